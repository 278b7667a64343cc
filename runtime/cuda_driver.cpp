#include "runtime/cuda_driver.h"

#include <fmt/format.h>

#include <cstdint>

#include "runtime/dynamic_library.h"

namespace kiln::runtime::cuda {
namespace {

// CUresult values the probe names (cuda.h; not included, to need no toolkit).
constexpr int kSuccess = 0;
constexpr int kInsufficientDriver = 35;
constexpr int kStubLibrary = 34;
constexpr int kNoDevice = 100;

using InitFn = int (*)(unsigned);
using IntOutFn = int (*)(int*);

std::string initFailure(int result, const std::string& library) {
  switch (result) {
    case kStubLibrary:
      return fmt::format(
          "{} is the CUDA toolkit's stub library, not a driver (cuInit: CUDA_ERROR_STUB_LIBRARY); take the "
          "toolkit's stubs/ folder off LD_LIBRARY_PATH and install the NVIDIA driver",
          library);
    case kNoDevice: return "the CUDA driver finds no GPU (cuInit: CUDA_ERROR_NO_DEVICE)";
    case kInsufficientDriver:
      return "the CUDA driver is older than the CUDA runtime needs (cuInit: CUDA_ERROR_INSUFFICIENT_DRIVER); update "
             "the NVIDIA driver";
    default: return fmt::format("cuInit failed with CUresult {}", result);
  }
}

}  // namespace

std::vector<std::string> driverCandidates() {
  // No toolkit folder: the toolkit holds only the stub library.
  return LibrarySearch{"KILN_CUDA_DRIVER_LIBRARY", {"libcuda.so.1"}, {}}.candidates();
}

DriverProbe probeDriver(std::span<const std::string> candidates) {
  DriverProbe probe;
  const DynamicLibrary library = DynamicLibrary::open(candidates);
  if (!library.loaded()) {
    probe.reason = fmt::format("no CUDA driver: {}; install the NVIDIA driver", library.error());
    return probe;
  }
  probe.library = library.name();
  std::string why;
  auto init = reinterpret_cast<InitFn>(library.symbol("cuInit", &why));
  auto version = init ? reinterpret_cast<IntOutFn>(library.symbol("cuDriverGetVersion", &why)) : nullptr;
  auto count = version ? reinterpret_cast<IntOutFn>(library.symbol("cuDeviceGetCount", &why)) : nullptr;
  if (!count) {
    probe.reason = fmt::format("{} is not a CUDA driver: {}", library.name(), why);
    return probe;
  }
  if (version(&probe.driverVersion) != kSuccess) probe.driverVersion = 0;
  probe.initResult = init(0);
  if (probe.initResult != kSuccess) {
    probe.reason = initFailure(probe.initResult, library.name());
    return probe;
  }
  if (const int r = count(&probe.deviceCount); r != kSuccess) {
    probe.deviceCount = 0;
    probe.reason = fmt::format("cuDeviceGetCount failed with CUresult {}", r);
    return probe;
  }
  if (probe.deviceCount == 0) {
    probe.reason = "the CUDA driver finds no GPU (cuDeviceGetCount: 0)";
    return probe;
  }
  probe.usable = true;
  return probe;
}

const DriverProbe& driver() {
  static const DriverProbe probe = probeDriver(driverCandidates());
  return probe;
}

int cubinArch(std::span<const unsigned char> image) {
  // ELF64, little-endian: e_ident[EI_CLASS] = 2, e_ident[EI_ABIVERSION] at 8,
  // e_machine (EM_CUDA = 190) at 18, e_flags at 48.
  constexpr unsigned kEmCuda = 190;
  if (image.size() < 64 || image[0] != 0x7f || image[1] != 'E' || image[2] != 'L' || image[3] != 'F' || image[4] != 2)
    return 0;
  if ((image[18] | image[19] << 8) != kEmCuda) return 0;
  const uint32_t flags = image[48] | image[49] << 8 | image[50] << 16 | static_cast<uint32_t>(image[51]) << 24;
  return image[8] >= 8 ? static_cast<int>((flags >> 8) & 0xffu) : static_cast<int>(flags & 0xffu);
}

}  // namespace kiln::runtime::cuda

// The CUDA target (codegen/cuda_target.h) on GpuTarget (codegen/gpu_target.h).
#include "codegen/cuda_target.h"

#include <fmt/format.h>

#include <charconv>

#include "codegen/cuda_library.h"
#include "codegen/gpu_target.h"
#include "codegen/nvrtc_compiler.h"
#include "runtime/cuda_dnn.h"
#include "runtime/error.h"

namespace kiln::codegen {

int smArchOf(std::string_view arch) {
  int sm = 0;
  if (arch.starts_with("sm_")) {
    const std::string_view digits = arch.substr(3);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), sm);
    if (ec == std::errc() && end == digits.data() + digits.size() && sm > 0) return sm;
  }
  fail("cuda: '{}' is not a GPU architecture of the form sm_XY", arch);
}

std::string cudaCompilerDescription() {
  return fmt::format("{} --fmad=false -prec-div=true -prec-sqrt=true -ftz=false --std=c++17 (cubin)", nvrtcVersion());
}

runtime::KernelImage buildCudaImage(const RenderedKernel& kernel, int smArch) {
  const CudaBinary binary = compileCudaToCubin(kernel.source, kernel.name, smArch);
  runtime::KernelImage image;
  image.format = runtime::KernelImage::Format::cubin;
  image.name = kernel.name;
  image.bytes.assign(binary.cubin.begin(), binary.cubin.end());
  return image;
}

namespace {

class CudaTarget final : public GpuTarget {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string description(Device device) const override {
    const runtime::DeviceProperties& p = runtime::deviceInterface(device).properties();
    return fmt::format("{} | {} | {}", p.arch, p.name, p.driverVersion);
  }
  const LibraryFunctions& libraries() const override {
    // cuBLAS launches its kernels on the stream, which a CUDA graph
    // captures; the index ops wait for their indices and cannot be. cuDNN's
    // convolutions (runtime/cuda_dnn.h) allocate their workspace from the
    // device's allocator during the call, and a benchmarked first call
    // times algorithms synchronously: not recordable.
    static const LibraryFunctions cuda{{&cudaMatmul, true},          {&cudaIndexSelect}, {&cudaIndexAdd}, {}, {},
                                       {&runtime::cuda::conv, false}};
    return cuda;
  }

 protected:
  const CDialect& dialect() const override { return cudaDialect(); }
  std::string compilerDescription() const override { return cudaCompilerDescription(); }
  runtime::KernelImage::Format objectFormat() const override { return runtime::KernelImage::Format::cubin; }
  runtime::KernelImage build(const RenderedKernel& kernel, Device device) const override {
    return buildCudaImage(kernel, smArchOf(runtime::deviceInterface(device).properties().arch));
  }
};

}  // namespace

const Target& cudaTarget() {
  static const CudaTarget cuda;
  return cuda;
}

}  // namespace kiln::codegen

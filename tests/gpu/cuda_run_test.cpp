// Tests that need an NVIDIA GPU (ctest label `gpu`, left out of
// scripts/test.sh unless asked): the CUDA C of every kernel kind of
// gpu_kernel_cases.h, compiled by NVRTC for the GPU's own sm_XY and
// launched through the CUDA driver API, against the CPU backend running the
// same kernels on the same buffers — the cases the OpenCL run test checks on
// PoCL, with the same references (plain float sums against the host model
// of the work-group tree, which CUDA's warp shuffles follow: Note [One
// reduction tree]). The driver is loaded at run time (dlopen of
// libcuda.so.1, as the runtime will), so this builds everywhere and reports
// a skip, with the reason, where there is no GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <string>
#include <type_traits>

#include "codegen/c_renderer.h"
#include "codegen/nvrtc_compiler.h"
#include "runtime/error.h"
#include "unit/codegen/gpu_kernel_cases.h"

namespace kiln::codegen::testing {
namespace {

// The few driver entry points the test uses, with the driver API's types
// (cuda.h is not needed). The _v2 names are the ABI current drivers export
// for the 64-bit device pointer calls.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
constexpr int kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;

struct Driver {
  void* library = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGetCount)(int*) = nullptr;
  CUresult (*deviceGet)(CUdevice*, int) = nullptr;
  CUresult (*deviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*primaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctxSetCurrent)(CUcontext) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;
  CUresult (*moduleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*memAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*memcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*memcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                           void**, void**) = nullptr;

  /// Loads the driver and its first device; `why` says why not.
  bool open(std::string& why) {
    library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      why = std::string("cannot load libcuda.so.1: ") + dlerror();
      return false;
    }
    bool ok = true;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, name));
      if (!fn) ok = false, why = std::string("libcuda.so.1 has no ") + name;
    };
    get(init, "cuInit");
    get(deviceGetCount, "cuDeviceGetCount");
    get(deviceGet, "cuDeviceGet");
    get(deviceGetAttribute, "cuDeviceGetAttribute");
    get(primaryCtxRetain, "cuDevicePrimaryCtxRetain");
    get(ctxSetCurrent, "cuCtxSetCurrent");
    get(ctxSynchronize, "cuCtxSynchronize");
    get(moduleLoadData, "cuModuleLoadData");
    get(moduleGetFunction, "cuModuleGetFunction");
    get(memAlloc, "cuMemAlloc_v2");
    get(memFree, "cuMemFree_v2");
    get(memcpyHtoD, "cuMemcpyHtoD_v2");
    get(memcpyDtoH, "cuMemcpyDtoH_v2");
    get(launchKernel, "cuLaunchKernel");
    if (!ok) return false;
    int count = 0;
    if (const CUresult r = init(0); r != 0) {
      why = fmt::format("cuInit failed: {} (34: the stub library, 100: no device, 35: driver too old)", r);
      return false;
    }
    if (deviceGetCount(&count) != 0 || count == 0) {
      why = "the CUDA driver finds no device";
      return false;
    }
    return true;
  }
};

void check(CUresult r, const char* call) { KILN_CHECK(r == 0, "cuda: {} failed: {}", call, r); }

class CudaTestDevice final : public KernelDevice {
 public:
  explicit CudaTestDevice(Driver& d) : d_(d) {
    check(d_.deviceGet(&device_, 0), "cuDeviceGet");
    int major = 0, minor = 0;
    check(d_.deviceGetAttribute(&major, kComputeCapabilityMajor, device_), "cuDeviceGetAttribute");
    check(d_.deviceGetAttribute(&minor, kComputeCapabilityMinor, device_), "cuDeviceGetAttribute");
    sm_ = major * 10 + minor;
    check(d_.primaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
    check(d_.ctxSetCurrent(context_), "cuCtxSetCurrent");
  }

  const CDialect& dialect() const override { return cudaDialect(); }
  std::string name() const override { return fmt::format("cuda:0 (sm_{})", sm_); }

  void build(const std::vector<RenderedKernel>& kernels) override {
    std::string source;
    for (const RenderedKernel& k : kernels) source += k.source + "\n";
    const CudaBinary bin = compileCudaToCubin(source, "kiln_test_program", sm_);
    std::cout << "[ info ] " << kernels.size() << " CUDA kernels built for sm_" << sm_ << " in " << bin.compileMs
              << " ms\n";
    cubin_ = bin.cubin;  // the driver reads the image while loading it
    check(d_.moduleLoadData(&module_, cubin_.data()), "cuModuleLoadData");
    for (const RenderedKernel& k : kernels) {
      CUfunction f = nullptr;
      EXPECT_EQ(d_.moduleGetFunction(&f, module_, k.name.c_str()), 0) << "no kernel " << k.name;
      functions_[k.name] = f;
    }
  }

  void run(const RenderedKernel& k, const Kernel& kernel, std::vector<Buffer>& buffers,
           const std::vector<int>& bufferOf, const std::vector<int64_t>& offsets, const LaunchArgs& launch,
           int64_t groups) override {
    std::vector<CUdeviceptr> memory;
    for (Buffer& b : buffers) {
      CUdeviceptr p = 0;
      check(d_.memAlloc(&p, std::max<size_t>(1, b.size())), "cuMemAlloc");
      check(d_.memcpyHtoD(p, b.data(), b.size()), "cuMemcpyHtoD");
      memory.push_back(p);
    }
    // CUDA offsets the pointers; the args struct is LaunchArgs::args and numel.
    std::vector<CUdeviceptr> pointers;
    for (int p = 0; p < kernel.numParams(); ++p)
      pointers.push_back(memory[static_cast<size_t>(bufferOf[p])] +
                         static_cast<CUdeviceptr>(offsets[p] * itemSize(kernel.params[p].dtype)));
    std::vector<int64_t> words = packGpuArgs(k, launch);
    std::vector<void*> params;
    for (CUdeviceptr& p : pointers) params.push_back(&p);
    params.push_back(words.data());
    if (groups > 0)
      check(d_.launchKernel(functions_.at(k.name), static_cast<unsigned>(groups), 1, 1,
                            static_cast<unsigned>(k.launch.localSize), 1, 1, 0, nullptr, params.data(), nullptr),
            "cuLaunchKernel");
    check(d_.ctxSynchronize(), "cuCtxSynchronize");
    for (size_t i = 0; i < buffers.size(); ++i) {
      check(d_.memcpyDtoH(buffers[i].data(), memory[i], buffers[i].size()), "cuMemcpyDtoH");
      check(d_.memFree(memory[i]), "cuMemFree");
    }
  }

 private:
  Driver& d_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  int sm_ = 0;
  std::vector<char> cubin_;
  std::map<std::string, CUfunction> functions_;
};

TEST(CudaRun, EveryCaseEqualsTheCpu) {
  static Driver driver;
  std::string why;
  if (!driver.open(why)) GTEST_SKIP() << "no CUDA GPU: " << why;
  if (!nvrtcAvailable(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  CudaTestDevice device(driver);
  const auto start = std::chrono::steady_clock::now();
  int n = 0;
  for (CaseGroup g : {CaseGroup::ops, CaseGroup::elementwise, CaseGroup::reductions, CaseGroup::lowered})
    n += runAndCompare(device, runCases(g, Coverage::full));
  std::cout << "[ info ] " << n << " launches on " << device.name() << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s\n";
  EXPECT_GT(n, 60);
}

}  // namespace
}  // namespace kiln::codegen::testing

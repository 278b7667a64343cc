// The CUDA target (codegen/cuda_target.h) and its library kernels
// (codegen/cuda_library.h) without a GPU: the target of cuda:N, kernels
// rendered in the CUDA dialect and compiled by NVRTC into a cubin for an
// exact sm_XY (read back from the cubin's ELF header), the library program
// compiled clean, and what compiling for a device that cannot be used says.
// Launching them needs a GPU: tests/gpu/cuda_device_test.cpp.
#include "codegen/cuda_target.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/cuda_library.h"
#include "codegen/nvrtc_compiler.h"
#include "common/error_of.h"
#include "runtime/cuda_dnn.h"
#include "runtime/cuda_driver.h"
#include "runtime/device_interface.h"
#include "unit/codegen/gpu_kernel_cases.h"

namespace kiln::codegen {
namespace {

#define SKIP_WITHOUT_NVRTC()                                        \
  do {                                                              \
    std::string why;                                                \
    if (!nvrtcAvailable(&why)) GTEST_SKIP() << "no NVRTC: " << why; \
  } while (0)

bool hasSymbol(const std::vector<uint8_t>& image, const std::string& name) {
  const std::string text(image.begin(), image.end());
  return text.find(std::string(1, '\0') + name + std::string(1, '\0')) != std::string::npos;
}

TEST(CudaTarget, IsTheTargetOfCudaDevices) {
  const Target& t = targetFor(Device::cuda(0));
  EXPECT_EQ(&t, &cudaTarget());
  EXPECT_EQ(&targetFor(Device::cuda(3)), &cudaTarget());
  EXPECT_EQ(t.name(), "cuda");
  EXPECT_NE(t.libraries().matmul.fn, nullptr);
  EXPECT_TRUE(t.libraries().matmul.recordable) << "cuBLAS launches on the stream a CUDA graph captures";
  EXPECT_NE(t.libraries().indexSelect.fn, nullptr);
  EXPECT_NE(t.libraries().indexAdd.fn, nullptr);
  EXPECT_EQ(t.libraries().conv.fn, &runtime::cuda::conv);
  EXPECT_FALSE(t.libraries().conv.recordable) << "cuDNN's workspace is allocated during the call";
  EXPECT_EQ(t.libraries().conv.withEpilogue, nullptr);
}

TEST(CudaTarget, SmArchOfTakesOnlySmXY) {
  EXPECT_EQ(smArchOf("sm_90"), 90);
  EXPECT_EQ(smArchOf("sm_120"), 120);
  EXPECT_EQ(errorOf([] { smArchOf("compute_90"); }), "cuda: 'compute_90' is not a GPU architecture of the form sm_XY");
  EXPECT_EQ(errorOf([] { smArchOf("sm_9x"); }), "cuda: 'sm_9x' is not a GPU architecture of the form sm_XY");
  EXPECT_EQ(errorOf([] { smArchOf(""); }), "cuda: '' is not a GPU architecture of the form sm_XY");
}

TEST(CudaTarget, CompilerDescriptionNamesNvrtcAndTheNumericFlags) {
  const std::string d = cudaCompilerDescription();
  EXPECT_TRUE(d.starts_with(nvrtcVersion())) << d;
  for (const char* flag : {"--fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false", "(cubin)"})
    EXPECT_NE(d.find(flag), std::string::npos) << flag << " in " << d;
}

TEST(CudaTarget, BuildsACubinForTheExactArchWithoutADevice) {
  SKIP_WITHOUT_NVRTC();
  const std::vector<Kernel> kinds = testing::kernelKinds();
  ASSERT_FALSE(kinds.empty());
  // An elementwise kernel and a reduction (warp shuffles, shared memory).
  std::vector<const Kernel*> picked = {&kinds.front()};
  for (const Kernel& k : kinds)
    if (k.isReduction()) {
      picked.push_back(&k);
      break;
    }
  for (const Kernel* kernel : picked) {
    const RenderedKernel rendered = renderGpuKernel(*kernel, cudaDialect());
    for (int sm : {90, 80}) {
      const runtime::KernelImage image = buildCudaImage(rendered, sm);
      EXPECT_EQ(image.format, runtime::KernelImage::Format::cubin);
      EXPECT_EQ(image.name, kernel->name);
      ASSERT_GE(image.bytes.size(), 64u);
      EXPECT_EQ(std::string(image.bytes.begin(), image.bytes.begin() + 4),
                "\x7f"
                "ELF");
      EXPECT_EQ(runtime::cuda::cubinArch(image.bytes), sm) << "a cubin for sm_" << sm << ", not PTX";
      EXPECT_TRUE(hasSymbol(image.bytes, kernel->name)) << kernel->name;
    }
  }
}

TEST(CudaLibrary, KernelsBuildCleanForSm90) {
  SKIP_WITHOUT_NVRTC();
  const CudaBinary binary = compileCudaToCubin(cudaLibrarySource(), "kiln_cuda_library", 90);
  EXPECT_EQ(binary.log, "") << "NVRTC warned";
  const std::vector<uint8_t> image(binary.cubin.begin(), binary.cubin.end());
  EXPECT_EQ(runtime::cuda::cubinArch(image), 90);
  std::vector<std::string> names;
  for (int size : {1, 2, 4, 8}) {
    names.push_back("kiln_copy_" + std::to_string(size));
    names.push_back("kiln_index_select_" + std::to_string(size));
  }
  for (const char* dtype : {"f32", "f64", "f16", "bf16", "i32", "i64"})
    names.push_back(std::string("kiln_index_add_") + dtype);
  names.push_back("kiln_matmul_i32");
  names.push_back("kiln_matmul_i64");
  for (const std::string& name : names) EXPECT_TRUE(hasSymbol(image, name)) << name << " is not in the cubin";
}

TEST(CudaTarget, CompilingForADeviceThatCannotBeUsedSaysWhy) {
  std::string why;
  if (isAvailable(DeviceType::cuda, &why)) GTEST_SKIP() << "this machine has a usable CUDA GPU";
  const Kernel kernel = testing::kernelKinds().front();
  EXPECT_EQ(errorOf([&] { cudaTarget().compile(kernel, Device::cuda(0)); }),
            "cuda:0: the device cannot be used: " + why);
  EXPECT_EQ(errorOf([] { cudaTarget().description(Device::cuda(0)); }), "cuda:0: the device cannot be used: " + why);
}

}  // namespace
}  // namespace kiln::codegen

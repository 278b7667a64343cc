// Every kernel of gpu_kernel_cases.h (every elementwise op on every dtype,
// broadcasts, strided ranks, index spaces, vectorized accesses, reductions
// of every kind, the kernels of traced softmax, layer norm, relu -> dropout
// -> layer_norm and their backwards) in CUDA C, built by NVRTC for sm_80 and
// sm_90: each entry point in the cubin's symbols, and no warning. The OpenCL
// C of every kind is built (and run) by opencl_run_test.cpp, as one program
// whose kernels are checked there; here, the OpenCL compiler's errors and
// device description. The tests skip, with the reason, where kiln was
// built without NVRTC or the ICD loader, or no OpenCL device is found.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "codegen/c_renderer.h"
#include "codegen/nvrtc_compiler.h"
#include "codegen/opencl_compiler.h"
#include "runtime/error.h"
#include "unit/codegen/gpu_kernel_cases.h"

namespace kiln::codegen {
namespace {

using namespace testing;

#define SKIP_WITHOUT_NVRTC()                                        \
  do {                                                              \
    std::string why;                                                \
    if (!nvrtcAvailable(&why)) GTEST_SKIP() << "no NVRTC: " << why; \
  } while (0)

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Builds `kernels` for sm_<sm> in programs of at most `batch` kernels;
/// every entry point must be in its cubin, with no warning.
void buildForSm(const std::vector<Kernel>& kernels, int sm, size_t batch) {
  for (size_t first = 0; first < kernels.size(); first += batch) {
    std::string source;
    const size_t last = std::min(kernels.size(), first + batch);
    for (size_t i = first; i < last; ++i) source += renderCudaC(kernels[i]) + "\n";
    const std::string name = fmt::format("kiln_cases_{}", first);
    try {
      const CudaBinary bin = compileCudaToCubin(source, name, sm);
      EXPECT_EQ(bin.log, "") << name << " sm_" << sm << ": NVRTC warned";
      const std::string image(bin.cubin.begin(), bin.cubin.end());
      ASSERT_TRUE(
          image.starts_with("\x7f"
                            "ELF"))
          << name;
      // extern "C": each kernel's symbol is its plain name, as the runtime looks it up.
      for (size_t i = first; i < last; ++i)
        EXPECT_TRUE(contains(image, std::string(1, '\0') + kernels[i].name + std::string(1, '\0')))
            << kernels[i].name << " is not in the sm_" << sm << " cubin";
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Three tests, which ctest runs in parallel.
TEST(GpuBuild, NvrtcBuildsEveryKindForSm80) {
  SKIP_WITHOUT_NVRTC();
  buildForSm(kernelKinds(), 80, 16);
}

TEST(GpuBuild, NvrtcBuildsEveryKindForSm90) {
  SKIP_WITHOUT_NVRTC();
  buildForSm(kernelKinds(), 90, 16);
}

TEST(GpuBuild, NvrtcBuildsEveryOpOnEveryDTypeForSm90) {
  // The formulas are the same on every architecture: sm_90 alone.
  SKIP_WITHOUT_NVRTC();
  std::vector<Kernel> oneOps;
  for (const OpCase& c : allOpCases()) oneOps.push_back(oneOpKernel(c));
  buildForSm(oneOps, 90, 64);
}

TEST(GpuBuild, OpenCLDeviceIsDescribedForCacheKeys) {
  std::string why;
  if (!openclAvailable(&why)) GTEST_SKIP() << "no OpenCL device: " << why;
  const std::string d = openclDeviceDescription();
  // name | vendor | driver version | OpenCL C version
  EXPECT_EQ(std::count(d.begin(), d.end(), '|'), 3) << d;
  EXPECT_TRUE(contains(d, "OpenCL C 1.") || contains(d, "OpenCL C 2.") || contains(d, "OpenCL C 3.")) << d;
}

TEST(GpuBuild, BrokenOpenCLThrowsWithProgramDeviceAndLog) {
  std::string why;
  if (!openclAvailable(&why)) GTEST_SKIP() << "no OpenCL device: " << why;
  try {
    compileOpenCL("__kernel void k(__global float* p) { p[0] = undeclared; }", "kiln_broken");
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "opencl: building program kiln_broken for ")) << what;
    EXPECT_TRUE(contains(what, openclDeviceDescription())) << what;
    EXPECT_TRUE(contains(what, "undeclared")) << "the build log: " << what;
  }
}

TEST(GpuBuild, OpenCLWithoutADeviceSaysWhy) {
  std::string why;
  if (openclAvailable(&why)) GTEST_SKIP() << "an OpenCL device is present: " << openclDeviceDescription();
  EXPECT_FALSE(why.empty());
  EXPECT_THROW(compileOpenCL("__kernel void k() {}", "kiln_k"), Error);
}

// Note [NVRTC is loaded at run time]: where kiln looks, and what a machine
// without NVRTC is told.
TEST(NvrtcLoader, LooksForTheBuildsSonameThenTheToolkitsFile) {
  SKIP_WITHOUT_NVRTC();
  const std::vector<std::string> c = detail::nvrtcCandidates();
  ASSERT_GE(c.size(), 2u);
  const std::string soname = c[c.size() - 2];
  EXPECT_EQ(soname.rfind("libnvrtc.so.", 0), 0u) << soname;
  EXPECT_TRUE(c.back().ends_with("/" + soname)) << c.back();
  EXPECT_EQ(c.back().front(), '/') << c.back();
  // Each loads the same NVRTC as kiln's own (the toolkit's file by path).
  for (const std::string& candidate : {soname, c.back()}) {
    const detail::NvrtcLoad load = detail::loadNvrtc(std::vector<std::string>{candidate});
    EXPECT_EQ(load.error, "") << candidate;
    EXPECT_EQ(load.library, candidate);
    EXPECT_EQ(load.version, nvrtcVersion());
  }
}

TEST(NvrtcLoader, AMachineWithoutNvrtcIsToldWhatWasTriedAndWhatToInstall) {
  const std::vector<std::string> missing = {"/nonexistent/cuda/lib64/libnvrtc.so.13"};
  const detail::NvrtcLoad load = detail::loadNvrtc(missing);
  EXPECT_EQ(load.library, "");
  EXPECT_EQ(load.version, "");
#if KILN_HAVE_NVRTC
  EXPECT_EQ(load.error.rfind("NVRTC could not be loaded (/nonexistent/cuda/lib64/libnvrtc.so.13: ", 0), 0u)
      << load.error;
  EXPECT_NE(load.error.find("set KILN_NVRTC_LIBRARY to its path"), std::string::npos) << load.error;
#else
  EXPECT_EQ(load.error, "kiln was built without the CUDA toolkit (no NVRTC)");
#endif
}

TEST(NvrtcLoader, ALibraryWithoutNvrtcsEntryPointsIsRefusedByName) {
  SKIP_WITHOUT_NVRTC();
  const std::vector<std::string> notNvrtc = {"libm.so.6"};
  const detail::NvrtcLoad load = detail::loadNvrtc(notNvrtc);
  EXPECT_EQ(load.error.rfind("NVRTC at libm.so.6 is unusable: libm.so.6 has no symbol nvrtcVersion", 0), 0u)
      << load.error;
  EXPECT_EQ(load.version, "");
}

TEST(NvrtcCompiler, VersionNamesNvrtc) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_TRUE(nvrtcVersion().starts_with("NVRTC 1")) << nvrtcVersion();
}

TEST(NvrtcCompiler, BrokenSourceThrowsWithKernelNameAndLog) {
  SKIP_WITHOUT_NVRTC();
  try {
    compileCudaToCubin("this is not cuda", "kiln_broken", 90);
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "kiln_broken")) << what;
    // NVRTC's log names the program file and says what is wrong.
    EXPECT_TRUE(contains(what, "kiln_broken.cu(1): error")) << what;
    EXPECT_TRUE(contains(what, "NVRTC_ERROR_COMPILATION")) << what;
  }
}

TEST(NvrtcCompiler, UnknownArchThrows) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_THROW(compileCudaToCubin(renderCudaC(elementwiseKernels().at(0)), "kiln_every_op", 1), Error);
}

}  // namespace
}  // namespace kiln::codegen

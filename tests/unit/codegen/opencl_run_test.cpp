// The OpenCL C of every kernel kind, run on the first OpenCL device (PoCL's
// CPU device in CI) against the CPU backend running the same kernels on the
// same buffers (gpu_kernel_cases.h): bit for bit for elementwise kernels of
// every op and dtype, broadcasts, strided and transposed reads, dropout's
// draws (vectorized and per element), buffers at odd element offsets (which
// OpenCL kernels add themselves) and reductions whose order does not
// matter; plain float sums bit for bit against a host model of the
// work-group tree (Note [One reduction tree]); fused kernels (softmax, layer
// norm, relu -> dropout -> layer_norm and its backward, cross_entropy, a
// column sum) within a tolerance, since the CPU adds in another order.
// Skips, with the reason, without an OpenCL device.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>

#include "unit/codegen/gpu_kernel_cases.h"
#include "unit/codegen/opencl_test_device.h"

namespace kiln::codegen {
namespace {

using namespace testing;

/// Runs one group of cases on the OpenCL device (one program each, so that
/// ctest runs the groups' PoCL builds in parallel).
void runGroup(CaseGroup group, int atLeast) {
  std::string why;
  std::unique_ptr<KernelDevice> device = makeOpenCLTestDevice(&why);
  if (!device) GTEST_SKIP() << "no OpenCL device: " << why;
  const auto start = std::chrono::steady_clock::now();
  const int n = runAndCompare(*device, runCases(group, Coverage::sampled));
  std::cout << "[ info ] " << n << " launches on " << device->name() << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s\n";
  EXPECT_GE(n, atLeast);
}

TEST(OpenCLRun, EveryOpOnEveryDTypeEqualsTheCpu) { runGroup(CaseGroup::ops, 16); }
TEST(OpenCLRun, ElementwiseKernelsEqualTheCpu) { runGroup(CaseGroup::elementwise, 13); }
TEST(OpenCLRun, ReductionsEqualTheCpuOrTheTreeOrder) { runGroup(CaseGroup::reductions, 10); }
TEST(OpenCLRun, LoweredKernelsEqualTheCpuWithinTheSumOrder) { runGroup(CaseGroup::lowered, 10); }

}  // namespace
}  // namespace kiln::codegen

// cuDNN's convolutions (runtime/cuda_dnn.h) on a machine that may have no
// GPU: cuDNN loads from the toolkit with every entry point kiln calls (or
// says why not), a ConvCall becomes the descriptors and buffer roles it
// should (detail::planDnnConv, a pure function), and a call on a machine
// without a driver is the device's error. The cuDNN kernels themselves are
// compared with the CPU's loops on a GPU (tests/gpu/cuda_conv_test.cpp).
#include "runtime/cuda_dnn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "common/conv_calls.h"
#include "common/error_of.h"
#include "runtime/conv.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_libraries.h"
#include "runtime/device_interface.h"

namespace kiln {
namespace {

using runtime::ConvCall;
using runtime::cuda::detail::DnnConvPlan;
using runtime::cuda::detail::DnnTensor;
using runtime::cuda::detail::planDnnConv;

constexpr const char* kNoHeaders = "kiln was built without the CUDA toolkit's cuDNN headers (no cudnn.h)";

ConvCall call(ConvCall::Kind kind, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int64_t stride,
              int64_t pad, int64_t dilation = 1, int64_t groups = 1, DType dtype = DType::f32) {
  return testutil::squareConvCall(kind, n, c, h, w, o, k, stride, pad, dilation, groups, dtype);
}

DnnTensor packed(int n, int c, int h, int w) { return {{n, c, h, w}, {c * h * w, h * w, w, 1}}; }

TEST(CudaDnnPlan, AForwardCallIsXWYWithItsGeometryAndHalfPrecisionOnTensorCores) {
  const ConvCall c = call(ConvCall::Kind::forward, 2, 4, 9, 7, 6, 3, 2, 1, 2, 2, DType::f16);
  const DnnConvPlan p = planDnnConv(c);
  EXPECT_EQ(p.xBuffer, 0);
  EXPECT_EQ(p.wBuffer, 1);
  EXPECT_EQ(p.yBuffer, 2);
  EXPECT_EQ(p.x, packed(2, 4, 9, 7));
  EXPECT_EQ(p.y, packed(2, 6, c.ho, c.wo));
  EXPECT_EQ(p.w, (std::array<int, 4>{6, 2, 3, 3}));
  EXPECT_EQ(p.padH, 1);
  EXPECT_EQ(p.padW, 1);
  EXPECT_EQ(p.strideH, 2);
  EXPECT_EQ(p.dilationW, 2);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.dtype, DType::f16);
  EXPECT_EQ(p.computeType, DType::f32);
  EXPECT_TRUE(p.tensorOps);
  EXPECT_FALSE(p.copyW);
  EXPECT_FALSE(p.explicitPadding);
  EXPECT_FALSE(p.zeroFill);
  EXPECT_FALSE(p.empty);
  EXPECT_EQ(p.resultElements, 2 * 6 * c.ho * c.wo);
}

TEST(CudaDnnPlan, F32AndF64StayOffTensorCoresAndComputeInTheirOwnPrecision) {
  const DnnConvPlan f32 = planDnnConv(call(ConvCall::Kind::forward, 1, 2, 5, 5, 3, 3, 1, 1));
  EXPECT_FALSE(f32.tensorOps);
  EXPECT_EQ(f32.computeType, DType::f32);
  const DnnConvPlan f64 = planDnnConv(call(ConvCall::Kind::forward, 1, 2, 5, 5, 3, 3, 1, 1, 1, 1, DType::f64));
  EXPECT_FALSE(f64.tensorOps);
  EXPECT_EQ(f64.computeType, DType::f64);
  const DnnConvPlan bf16 = planDnnConv(call(ConvCall::Kind::forward, 1, 2, 5, 5, 3, 3, 1, 1, 1, 1, DType::bf16));
  EXPECT_TRUE(bf16.tensorOps);
  EXPECT_EQ(bf16.computeType, DType::f32);
  EXPECT_EQ(errorOf([] { planDnnConv(call(ConvCall::Kind::forward, 1, 2, 5, 5, 3, 3, 1, 1, 1, 1, DType::i32)); }),
            "conv2d: cuDNN has no convolution of i32 (x [1, 2, 5, 5], w [3, 2, 3, 3], y [1, 3, 5, 5], i32)");
}

TEST(CudaDnnPlan, TheTransposeWritesXContiguousAndReadsYThroughItsStrides) {
  ConvCall c = call(ConvCall::Kind::transpose, 2, 3, 6, 6, 4, 3, 1, 1);
  c.xStrides = {999, 999, 999, 999};   // written: ignored
  c.yStrides = {4 * 36, 1, 6 * 4, 4};  // channels-last
  const DnnConvPlan p = planDnnConv(c);
  EXPECT_EQ(p.yBuffer, 0);
  EXPECT_EQ(p.wBuffer, 1);
  EXPECT_EQ(p.xBuffer, 2);
  EXPECT_EQ(p.x, packed(2, 3, 6, 6));
  EXPECT_EQ(p.y, (DnnTensor{{2, 4, 6, 6}, {144, 1, 24, 4}}));
  EXPECT_EQ(p.resultElements, 2 * 3 * 6 * 6);
}

TEST(CudaDnnPlan, TheWeightGradientReadsXAndYAndWritesAPackedFilter) {
  ConvCall c = call(ConvCall::Kind::weightGrad, 2, 4, 8, 8, 4, 3, 2, 1, 1, 4);
  c.wStrides = {1, 1, 1, 1};  // written: ignored, never copied
  c.xStrides = {4 * 64, 1, 8 * 4, 4};
  const DnnConvPlan p = planDnnConv(c);
  EXPECT_EQ(p.xBuffer, 0);
  EXPECT_EQ(p.yBuffer, 1);
  EXPECT_EQ(p.wBuffer, 2);
  EXPECT_FALSE(p.copyW);
  EXPECT_EQ(p.w, (std::array<int, 4>{4, 1, 3, 3}));
  EXPECT_EQ(p.x, (DnnTensor{{2, 4, 8, 8}, {256, 1, 32, 4}}));
  EXPECT_EQ(p.resultElements, 4 * 1 * 3 * 3);
}

TEST(CudaDnnPlan, AReadFilterThatIsNotPackedIsCopiedFirst) {
  ConvCall c = call(ConvCall::Kind::forward, 1, 2, 5, 5, 3, 3, 1, 1);
  c.wStrides = {2 * 9, 1, 3 * 2, 2};  // OHWI
  const DnnConvPlan p = planDnnConv(c);
  EXPECT_TRUE(p.copyW);
  EXPECT_EQ(p.wRead, (DnnTensor{{3, 2, 3, 3}, {18, 1, 6, 2}}));
  // A size-1 dim's stride does not matter.
  ConvCall one = call(ConvCall::Kind::forward, 1, 1, 5, 5, 3, 3, 1, 1);
  one.wStrides = {9, 12345, 3, 1};
  EXPECT_FALSE(planDnnConv(one).copyW);
  EXPECT_EQ(planDnnConv(one).w, (std::array<int, 4>{3, 1, 3, 3}));
}

TEST(CudaDnnPlan, PyTorchsFloorAndOutputPaddingFitSymmetricPadding) {
  // The last row of x is never read: padBottom −1, padTop 0, stride 2.
  const ConvCall floor = call(ConvCall::Kind::forward, 1, 1, 5, 5, 1, 2, 2, 0);
  ASSERT_EQ(floor.padBottom(), -1);
  EXPECT_FALSE(planDnnConv(floor).explicitPadding);
  // conv_transpose2d(stride 2, padding 1, output_padding 1): x is a row taller.
  ConvCall t = call(ConvCall::Kind::transpose, 1, 1, 8, 8, 1, 3, 2, 1);
  ASSERT_EQ(t.ho, 4);
  t.h = t.w = 8;  // (4 − 1)·2 − 2 + 3 + 1
  ASSERT_EQ(t.padBottom(), 0);
  const DnnConvPlan p = planDnnConv(t);
  EXPECT_FALSE(p.explicitPadding);
  EXPECT_EQ(p.padH, 1);
  EXPECT_EQ(p.x, packed(1, 1, 8, 8));
}

TEST(CudaDnnPlan, AsymmetricPaddingIsExplicitPaddingOfTheWindowRead) {
  // "same" padding of an even kernel: 0 on top, 1 at the bottom.
  ConvCall c = call(ConvCall::Kind::forward, 2, 3, 4, 6, 5, 2, 1, 0);
  c.ho = 4, c.wo = 6;
  c.yStrides = runtime::contiguousStrides(2, 5, 4, 6);
  ASSERT_EQ(c.padBottom(), 1);
  ASSERT_EQ(c.padRight(), 1);
  DnnConvPlan p = planDnnConv(c);
  EXPECT_TRUE(p.explicitPadding);
  EXPECT_EQ(p.padH, 0);
  EXPECT_EQ(p.padW, 0);
  EXPECT_EQ(p.x, packed(2, 3, 5, 7));  // the window: rows [0, 5), cols [0, 7)
  EXPECT_EQ(p.xInside, packed(2, 3, 4, 6));
  EXPECT_EQ(p.xInsideOffset, 0);
  EXPECT_EQ(p.xInsideCallOffset, 0);
  EXPECT_EQ(p.y, packed(2, 5, 4, 6));

  // More on top than at the bottom by a stride or more: padTop 2, bottom 0.
  ConvCall top = call(ConvCall::Kind::transpose, 1, 2, 5, 5, 2, 3, 1, 2);
  top.ho = top.wo = 5;
  ASSERT_EQ(top.padBottom(), 0);
  p = planDnnConv(top);
  EXPECT_TRUE(p.explicitPadding);
  EXPECT_EQ(p.x, packed(1, 2, 7, 7));
  EXPECT_EQ(p.xInside, packed(1, 2, 5, 5));  // the result's own (contiguous) strides
  EXPECT_EQ(p.xInsideOffset, 2 * 7 + 2);
  EXPECT_EQ(p.xBuffer, 2);

  // A bottom never read by more than the stride: rows 3 and 4 are left out.
  ConvCall cut = call(ConvCall::Kind::weightGrad, 1, 1, 5, 5, 1, 3, 1, 0);
  cut.ho = 1, cut.wo = 3;
  ASSERT_EQ(cut.padBottom(), -2);
  p = planDnnConv(cut);
  EXPECT_TRUE(p.explicitPadding);
  EXPECT_EQ(p.x, packed(1, 1, 3, 5));
  EXPECT_EQ(p.xInside, packed(1, 1, 3, 5));  // a view of x's first 3 rows
}

TEST(CudaDnnPlan, SumsOverNothingFillZerosAndEmptyResultsRunNothing) {
  ConvCall noChannels = call(ConvCall::Kind::forward, 1, 2, 5, 5, 3, 3, 1, 1);
  noChannels.c = 0;
  EXPECT_TRUE(planDnnConv(noChannels).zeroFill);
  ConvCall noImages = call(ConvCall::Kind::weightGrad, 0, 2, 5, 5, 3, 3, 1, 1);
  const DnnConvPlan p = planDnnConv(noImages);
  EXPECT_TRUE(p.zeroFill);
  EXPECT_FALSE(p.empty);
  EXPECT_EQ(p.resultElements, 3 * 2 * 3 * 3);
  EXPECT_TRUE(planDnnConv(call(ConvCall::Kind::forward, 0, 2, 5, 5, 3, 3, 1, 1)).empty);
  EXPECT_FALSE(planDnnConv(call(ConvCall::Kind::forward, 1, 2, 5, 5, 3, 3, 1, 1)).zeroFill);
}

TEST(CudaDnnPlan, ASizeBeyondCudnnsIntsIsRefusedByName) {
  ConvCall c = call(ConvCall::Kind::forward, 1, 1, 5, 5, 1, 1, 1, 0);
  c.xStrides = {int64_t{1} << 32, 25, 5, 1};
  c.n = 2;
  c.yStrides = runtime::contiguousStrides(2, 1, 5, 5);
  EXPECT_EQ(errorOf([&] { planDnnConv(c); }),
            "conv2d: a stride = 4294967296 does not fit cuDNN's 32-bit ints (x [2, 1, 5, 5], w [1, 1, 1, 1], y [2, 1, "
            "5, 5], f32)");
}

TEST(CudaDnnChoice, DeterministicWinsOverBenchmark) {
  using runtime::cuda::detail::DnnChoiceMode;
  using runtime::cuda::detail::dnnChoiceMode;
  EXPECT_EQ(dnnChoiceMode(false, false), DnnChoiceMode::heuristic);
  EXPECT_EQ(dnnChoiceMode(false, true), DnnChoiceMode::benchmark);
  EXPECT_EQ(dnnChoiceMode(true, true), DnnChoiceMode::deterministic);
  EXPECT_EQ(dnnChoiceMode(true, false), DnnChoiceMode::deterministic);
}

TEST(CudaDnnChoice, TheFirstUsableCandidateSkipsFailuresNondeterminismAndTf32) {
  using runtime::cuda::detail::DnnCandidate;
  using runtime::cuda::detail::firstUsableCandidate;
  // algo, succeeded, deterministic, tensor-op math; best first.
  const std::vector<DnnCandidate> ranked = {
      {7, false, true, false},  // failed (not supported for this call)
      {5, true, false, true},   // tensor cores, atomics
      {1, true, false, false},  // atomics
      {0, true, true, false},
  };
  EXPECT_EQ(firstUsableCandidate(ranked, /*tensorOps=*/true, /*deterministicOnly=*/false), 1u);
  EXPECT_EQ(firstUsableCandidate(ranked, /*tensorOps=*/false, /*deterministicOnly=*/false), 2u);  // no TF32
  EXPECT_EQ(firstUsableCandidate(ranked, /*tensorOps=*/true, /*deterministicOnly=*/true), 3u);
  const std::vector<DnnCandidate> none = {{4, true, false, false}, {6, false, true, false}};
  EXPECT_EQ(firstUsableCandidate(none, true, true), std::nullopt);
  EXPECT_EQ(firstUsableCandidate({}, true, false), std::nullopt);
}

TEST(CudaDnn, LoadsFromTheToolkitWithEveryEntryPointOrSaysWhy) {
  std::string why;
  if (!runtime::cuda::dnnAvailable(&why)) {
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(runtime::cuda::dnnVersion(), "cuDNN unavailable");
    GTEST_SKIP() << why;
  }
  const runtime::cuda::detail::CudnnLoad load =
      runtime::cuda::detail::loadCudnn(runtime::cuda::libraryCandidates(runtime::cuda::Library::cudnn));
  EXPECT_EQ(load.error, "");
  EXPECT_TRUE(load.version.starts_with("cuDNN 9.")) << load.version;
  for (const char* name : {"cudnnCreate",
                           "cudnnSetStream",
                           "cudnnSetTensorNdDescriptor",
                           "cudnnSetFilterNdDescriptor",
                           "cudnnSetConvolution2dDescriptor",
                           "cudnnSetConvolutionGroupCount",
                           "cudnnSetConvolutionMathType",
                           "cudnnTransformTensor",
                           "cudnnGetConvolutionForwardAlgorithm_v7",
                           "cudnnFindConvolutionForwardAlgorithmEx",
                           "cudnnGetConvolutionForwardWorkspaceSize",
                           "cudnnConvolutionForward",
                           "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                           "cudnnFindConvolutionBackwardDataAlgorithmEx",
                           "cudnnGetConvolutionBackwardDataWorkspaceSize",
                           "cudnnConvolutionBackwardData",
                           "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                           "cudnnFindConvolutionBackwardFilterAlgorithmEx",
                           "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                           "cudnnConvolutionBackwardFilter"})
    EXPECT_NE(std::find(load.entryPoints.begin(), load.entryPoints.end(), name), load.entryPoints.end()) << name;
  EXPECT_EQ(load.entryPoints.size(), 31u);
  EXPECT_EQ(runtime::cuda::dnnVersion(), load.version + " (" + load.library + ")");
  std::cout << "[ info ] " << runtime::cuda::dnnVersion() << "\n";
}

TEST(CudaDnn, AMissingOrForeignLibraryIsRefusedByName) {
  const runtime::cuda::detail::CudnnLoad missing =
      runtime::cuda::detail::loadCudnn(std::vector<std::string>{"/nonexistent/lib/libcudnn.so.9"});
  if (missing.error == kNoHeaders) GTEST_SKIP() << missing.error;
  EXPECT_TRUE(missing.error.starts_with("cuDNN could not be loaded (/nonexistent/lib/libcudnn.so.9: "))
      << missing.error;
  EXPECT_TRUE(missing.error.ends_with("set KILN_CUDNN_LIBRARY to its path")) << missing.error;
  const runtime::cuda::detail::CudnnLoad foreign =
      runtime::cuda::detail::loadCudnn(std::vector<std::string>{"libm.so.6"});
  EXPECT_TRUE(foreign.error.starts_with("cuDNN at libm.so.6 is unusable: libm.so.6 has no symbol cudnnGetVersion"))
      << foreign.error;
  EXPECT_TRUE(foreign.entryPoints.empty());
}

TEST(CudaDnn, ACallWithoutADriverIsTheDevicesError) {
  const runtime::cuda::DriverProbe& probe = runtime::cuda::driver();
  if (probe.usable) GTEST_SKIP() << "this machine has a usable CUDA driver";
  const std::vector<int64_t> args = call(ConvCall::Kind::forward, 1, 2, 5, 5, 3, 3, 1, 1).encode();
  const runtime::DevicePtr buffers[3] = {};
  const std::string error = errorOf([&] { runtime::cuda::conv({Device::cuda(0), {}, buffers, args}); });
  EXPECT_EQ(error, "cuda:0: the device cannot be used: " + probe.reason);
  // An empty result runs nothing, so it needs no device.
  const std::vector<int64_t> none = call(ConvCall::Kind::forward, 0, 2, 5, 5, 3, 3, 1, 1).encode();
  EXPECT_EQ(errorOf([&] { runtime::cuda::conv({Device::cuda(0), {}, buffers, none}); }), "no error");
}

}  // namespace
}  // namespace kiln

// Convolution epilogues (Note [Convolution epilogues] in runtime/conv.cpp):
// on the CPU a convolution's bias, batch norm's eval affine, activation and
// residual add run as the conv2d step's epilogue over each chunk of images
// as it is computed — one library call, no kernel step of its own — and
// compiled results equal eager ones bit for bit, with one chunk or many,
// on each CPU algorithm. A kernel that must not be an epilogue (a
// reduction, a transposed convolution) stays a step of its own.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "frontend/kiln.h"
#include "runtime/conv.h"
#include "tests/common/expect_epilogues.h"
#include "tests/common/same_bits.h"

namespace {

using namespace kiln;
using testutil::expectEpilogues;

Tensor normal(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, gen);
}

/// A ResNet basic block's tail in eval mode: relu(bn(conv(x)) + identity),
/// batch norm with its running statistics (an affine per channel).
Tensor blockTail(const std::vector<Tensor>& in) {
  Conv2dOptions same;
  same.padding = std::array<int64_t, 2>{1, 1};
  const Tensor y = conv2d(in[0], in[1], Tensor(), same);
  return relu(batchNorm(y, in[2], in[3], in[4], in[5], false) + in[0]);
}

TEST(ConvEpilogues, BiasReluResidualAndEvalBatchNormInOneCall) {
  // The whole call at once (the default), and in chunks of at most 1 MiB
  // of result: 1 image of 16x20x20 f32 output (25 KiB: one chunk) and 40 of
  // 64x24x24 (144 KiB each: 7 to a chunk, 6 chunks).
  for (const int64_t chunk : {int64_t{0}, int64_t{1} << 20})
    for (const auto& [n, c, hw] : std::vector<std::array<int64_t, 3>>{{1, 16, 20}, {40, 64, 24}}) {
      runtime::detail::setConvChunkBytes(chunk);
      const std::string size = fmt::format("{}x{}x{}x{}", n, c, hw, hw);
      const Tensor x = normal({n, c, hw, hw}, 1), w = normal({c, c, 3, 3}, 2) * 0.1, b = normal({c}, 3);
      const Tensor mean = normal({c}, 4), var = abs(normal({c}, 5)) + 0.5, gamma = normal({c}, 6),
                   beta = normal({c}, 7);
      Conv2dOptions same;
      same.padding = std::array<int64_t, 2>{1, 1};
      expectEpilogues(
          "bias " + size, [same](auto& in) { return conv2d(in[0], in[1], in[2], same); }, {x, w, b}, 1, 1);
      expectEpilogues(
          "bias relu residual " + size, [same](auto& in) { return relu(conv2d(in[0], in[1], in[2], same) + in[0]); },
          {x, w, b}, 1, 1);
      // Two steps: rsqrt(var + eps) over the channels (run before the
      // convolution: Note [Epilogue inputs first]), then the convolution with
      // the rest as its epilogue.
      expectEpilogues("eval batch norm, residual, relu " + size, blockTail, {x, w, mean, var, gamma, beta}, 2, 1);
    }
  runtime::detail::setConvChunkBytes(0);
}

TEST(ConvEpilogues, EachAlgorithmEqualsEager) {
  const Tensor x = normal({12, 32, 18, 18}, 8), w = normal({32, 32, 3, 3}, 9) * 0.1, b = normal({32}, 10);
  Conv2dOptions same;
  same.padding = std::array<int64_t, 2>{1, 1};
  for (runtime::ConvAlgorithm a :
       {runtime::ConvAlgorithm::onednn, runtime::ConvAlgorithm::onednnBlocked, runtime::ConvAlgorithm::direct}) {
    runtime::detail::forceConvAlgorithm(a);
    expectEpilogues(
        std::string(runtime::convAlgorithmName(a)),
        [same](auto& in) { return relu(conv2d(in[0], in[1], in[2], same)); }, {x, w, b}, 1, 1);
  }
  runtime::detail::forceConvAlgorithm(std::nullopt);
  expectEpilogues(
      "f32", [same](auto& in) { return relu(conv2d(in[0], in[1], in[2], same)); }, {x, w, b}, 1, 1);
  expectEpilogues(
      "f64 (direct loops)", [same](auto& in) { return relu(conv2d(in[0], in[1], in[2], same)); },
      {x.to(DType::f64), w.to(DType::f64), b.to(DType::f64)}, 1, 1);
  expectEpilogues(
      "channels-last input", [same](auto& in) { return relu(conv2d(in[0], in[1], in[2], same)); },
      {x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}), w, b}, 1, 1);
}

TEST(ConvEpilogues, WhatMustNotBeAnEpilogueStaysAStep) {
  const Tensor x = normal({4, 8, 10, 10}, 11), w = normal({8, 8, 3, 3}, 12);
  // A reduction over the result (training batch norm's statistics).
  expectEpilogues(
      "sum", [](auto& in) { return sum(relu(conv2d(in[0], in[1])), {1}); }, {x, w}, 2, 0);
  // The result read by a reduction and the elementwise after it (one
  // kernel of fuse-reductions': not an epilogue).
  expectEpilogues(
      "read by a reduction",
      [](auto& in) {
        const Tensor y = conv2d(in[0], in[1]);
        return relu(y) + sum(y, {0}, true);
      },
      {x, w}, 2, 0);
  // A transposed convolution takes none.
  expectEpilogues(
      "conv_transpose2d", [](auto& in) { return relu(convTranspose2d(in[0], in[1])); }, {x, w}, 2, 0);
}

}  // namespace

namespace {

TEST(ConvEpilogues, FoldBatchNormMatchesEagerToATolerance) {
  // fold-batchnorm (not in the default pipeline: not bit for bit) scales
  // the weight per output channel; the shift, the residual and relu remain
  // the convolution's epilogue.
  const int64_t n = 4, c = 16, hw = 12;
  const Tensor x = normal({n, c, hw, hw}, 20), w = normal({c, c, 3, 3}, 21) * 0.1;
  const Tensor mean = normal({c}, 22), var = abs(normal({c}, 23)) + 0.5, gamma = normal({c}, 24),
               beta = normal({c}, 25);
  const std::vector<Tensor> inputs = {x, w, mean, var, gamma, beta};
  const Tensor eager = blockTail(inputs);
  CompileOptions options;
  options.pipeline =
      "canonicalize,fold-constants,fold-batchnorm,cse,dce,fuse-attention,fuse-reductions,fuse-elementwise";
  detail::CompileEngine engine([](const std::vector<Tensor>& in) { return std::vector<Tensor>{blockTail(in)}; },
                               options);
  const Tensor folded = engine.call(inputs)[0];
  EXPECT_NE(engine.lastGraph().find("conv2d(%x0, %"), std::string::npos) << engine.lastGraph();
  EXPECT_EQ(engine.lastGraph().find("conv2d(%x0, %x1)"), std::string::npos) << "the weight is scaled first";
  EXPECT_EQ(engine.lastNumEpilogues(), 1) << engine.lastGraph();
  const std::vector<float> a = folded.toVector<float>(), b = eager.toVector<float>();
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / (1.0 + std::fabs(b[i])));
  EXPECT_LT(worst, 1e-5) << "the folded products round in another order, by a few ulps";
}

}  // namespace

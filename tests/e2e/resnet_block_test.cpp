// A ResNet basic block (conv-bn-relu-conv-bn, the identity added, relu)
// compiled: its kernel counts pinned, and its results equal to eager ones
// bit for bit (docs/convolution.md, "Fusion").
// - Training, forward and backward of mean(block(x)): 9 steps, the 5
//   convolution calls (2 forward, the second's input gradient, 2 weight
//   gradients) and 4 kernels. Each batch norm's statistics (mean and
//   variance over N, H, W), its normalization and the relu after it are one
//   reduction kernel, the running statistics updated in it too; the
//   backward of both batch norms and relus is one more, the loss one.
// - Eval: 5 steps, each convolution one call with the batch norm affine
//   (and relu) as its epilogue, rsqrt(var + eps) a kernel over the
//   channels each, and the residual, relu and mean one reduction kernel.
#include <gtest/gtest.h>

#include <vector>

#include "frontend/kiln.h"
#include "tests/common/same_bits.h"

namespace {

using namespace kiln;

struct Block {
  Tensor w1, w2, g1, b1, g2, b2, rm1, rv1, rm2, rv2;
  explicit Block(int64_t c) {
    Generator gen(3);
    w1 = (randn({c, c, 3, 3}, gen) * 0.1).setRequiresGrad();
    w2 = (randn({c, c, 3, 3}, gen) * 0.1).setRequiresGrad();
    g1 = (randn({c}, gen) * 0.1 + 1.0).setRequiresGrad(), b1 = (randn({c}, gen) * 0.1).setRequiresGrad();
    g2 = (randn({c}, gen) * 0.1 + 1.0).setRequiresGrad(), b2 = (randn({c}, gen) * 0.1).setRequiresGrad();
    rm1 = zeros({c}), rv1 = ones({c}), rm2 = zeros({c}), rv2 = ones({c});
  }
  std::vector<Tensor> parameters() const { return {w1, w2, g1, b1, g2, b2}; }
  std::vector<Tensor> statistics() const { return {rm1, rv1, rm2, rv2}; }
  Tensor forward(const Tensor& x, bool training) const {
    Conv2dOptions same;
    same.padding = std::array<int64_t, 2>{1, 1};
    const Tensor y = relu(batchNorm(conv2d(x, w1, Tensor(), same), rm1, rv1, g1, b1, training));
    return relu(batchNorm(conv2d(y, w2, Tensor(), same), rm2, rv2, g2, b2, training) + x);
  }
};

/// The top-level nodes of a printed graph (indented two spaces: a fusion's
/// body is indented more) that apply `op`.
int topLevel(const std::string& graph, const std::string& op) {
  int count = 0;
  size_t at = 0;
  while ((at = graph.find("\n  %", at)) != std::string::npos) {
    const size_t end = graph.find('\n', at + 1);
    const std::string line = graph.substr(at + 1, end - at - 1);
    if (line.find(" = " + op + "(") != std::string::npos) ++count;
    at = end;
  }
  return count;
}

TEST(ResNetBlock, TrainingStepIsNineStepsAndEqualsEager) {
  const Block eagerBlock(16), compiledBlock(16);
  Generator gen(4);
  const Tensor x = randn({4, 16, 8, 8}, gen);
  auto step = [](const Block& b) {
    return [&b](const std::vector<Tensor>& in) {
      Tensor loss = mean(b.forward(in[0], true));
      loss.backward();
      return std::vector<Tensor>{loss};
    };
  };
  const Tensor eagerLoss = step(eagerBlock)({x})[0];
  std::vector<Tensor> eagerGrads;
  for (const Tensor& p : eagerBlock.parameters()) eagerGrads.push_back(p.grad());
  detail::CompileEngine engine(step(compiledBlock), CompileOptions{});
  const Tensor loss = engine.call({x})[0];
  EXPECT_EQ(engine.lastNumKernels(), 9) << engine.lastGraph();
  EXPECT_TRUE(sameBits(loss, eagerLoss));
  const std::vector<Tensor> ps = compiledBlock.parameters();
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(sameBits(ps[i].grad(), eagerGrads[i])) << "parameter " << i;
  const std::vector<Tensor> want = eagerBlock.statistics(), got = compiledBlock.statistics();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(sameBits(got[i], want[i])) << "running statistic " << i;
  // The statistics: each batch norm's in one reduction kernel with its
  // normalization (no separate mean or var node is left).
  EXPECT_EQ(topLevel(engine.lastGraph(), "fusion"), 4) << engine.lastGraph();
  EXPECT_EQ(topLevel(engine.lastGraph(), "mean") + topLevel(engine.lastGraph(), "var"), 0) << engine.lastGraph();
  EXPECT_EQ(topLevel(engine.lastGraph(), "conv2d"), 2);
}

TEST(ResNetBlock, EvalIsFiveStepsWithTheBatchNormsAsEpiloguesAndEqualsEager) {
  const Block block(16);
  Generator gen(5);
  const Tensor x = randn({4, 16, 8, 8}, gen);
  NoGradGuard noGrad;
  auto fn = [&block](const std::vector<Tensor>& in) { return std::vector<Tensor>{mean(block.forward(in[0], false))}; };
  const Tensor eager = fn({x})[0];
  detail::CompileEngine engine(fn, CompileOptions{});
  const Tensor got = engine.call({x})[0];
  EXPECT_EQ(engine.lastNumKernels(), 5) << engine.lastGraph();
  EXPECT_EQ(engine.lastNumEpilogues(), 2) << engine.lastGraph();
  EXPECT_TRUE(sameBits(got, eager));
}

}  // namespace

// Matmul epilogues (Note [Matmul epilogues] in runtime/blas.cpp, Note
// [Matmul epilogues in compiled programs] in codegen/compile_graph.cpp): on
// the CPU, a linear layer's bias, activation (relu, gelu, silu) and
// residual add run as the matmul step's epilogue, over each block of the
// result as it is computed, in place. Compiled results equal eager ones bit
// for bit whatever the split: row blocks, column blocks (wider than tall),
// whole products of a batch, OpenBLAS's own threads, an empty sum; and a
// kernel that must not be an epilogue (the product read twice, a reduction,
// an input computed after the matmul) stays a step of its own.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "frontend/kiln.h"
#include "runtime/blas.h"
#include "tests/common/expect_epilogues.h"
#include "tests/common/same_bits.h"

namespace {

using namespace kiln;

using testutil::expectEpilogues;

Tensor normal(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, gen);
}

TEST(MatmulEpilogues, BiasActivationsAndResidualsEqualEagerInEverySplit) {
  // Taller than wide (row blocks), wider than tall (column blocks: the
  // epilogue runs on each row's piece of the block), small, odd sizes.
  for (const auto& [m, k, n] :
       std::vector<std::array<int64_t, 3>>{{300, 64, 48}, {24, 80, 700}, {5, 7, 3}, {257, 129, 65}}) {
    const std::string size = std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
    const Tensor x = normal({m, k}, 1), w = normal({n, k}, 2), b = normal({n}, 3), r = normal({m, n}, 4);
    expectEpilogues(
        "bias " + size, [](auto& in) { return linear(in[0], in[1], in[2]); }, {x, w, b}, 1, 1);
    expectEpilogues(
        "relu " + size, [](auto& in) { return relu(linear(in[0], in[1], in[2])); }, {x, w, b}, 1, 1);
    expectEpilogues(
        "gelu " + size, [](auto& in) { return gelu(linear(in[0], in[1], in[2])); }, {x, w, b}, 1, 1);
    expectEpilogues(
        "silu " + size, [](auto& in) { return silu(linear(in[0], in[1], in[2])); }, {x, w, b}, 1, 1);
    expectEpilogues(
        "residual " + size, [](auto& in) { return in[3] + linear(in[0], in[1], in[2]); }, {x, w, b, r}, 1, 1);
  }
}

TEST(MatmulEpilogues, BatchesBlasThreadsAndEmptySums) {
  // A batch of products (each thread takes whole products).
  const Tensor xb = normal({6, 40, 32}, 5), yb = normal({6, 32, 24}, 6), c = normal({24}, 7);
  expectEpilogues(
      "batched", [](auto& in) { return relu(matmul(in[0], in[1]) + in[2]); }, {xb, yb, c}, 1, 1);
  // OpenBLAS's threads compute the product, then the pool runs the epilogue.
  runtime::setBlasThreading(runtime::BlasThreading::blas);
  const Tensor x = normal({200, 96}, 8), w = normal({64, 96}, 9), b = normal({64}, 10);
  expectEpilogues(
      "blas threads", [](auto& in) { return gelu(linear(in[0], in[1], in[2])); }, {x, w, b}, 1, 1);
  runtime::setBlasThreading(runtime::BlasThreading::pool);
  // k = 0: the product is zeros, the epilogue still runs over all of it.
  const Tensor e = zeros({9, 0}), f = zeros({0, 5}), g = normal({5}, 11);
  expectEpilogues(
      "empty sum", [](auto& in) { return relu(matmul(in[0], in[1]) + in[2]); }, {e, f, g}, 1, 1);
  // Integers: the loop's blocks, then the epilogue.
  const Tensor xi = (normal({30, 20}, 12) * 10.0).to(DType::i32), wi = (normal({20, 10}, 13) * 10.0).to(DType::i32);
  expectEpilogues(
      "i32", [](auto& in) { return matmul(in[0], in[1]) * 3; }, {xi, wi}, 1, 1);
}

TEST(MatmulEpilogues, KernelsThatMustNotBeEpiloguesStayStepsOfTheirOwn) {
  const Tensor x = normal({64, 32}, 14), w = normal({48, 32}, 15), b = normal({48}, 16);
  // The product read by a reduction (fused with the relu into one kernel
  // over rows): the kernel needs whole rows, not blocks.
  expectEpilogues(
      "read by a reduction",
      [](auto& in) {
        Tensor p = matmul(in[0], in[1].t());
        return relu(p) + sum(p, {1}, true);
      },
      {x, w, b}, 2, 0);
  // The product read by a kernel and by another matmul: the kernel stays a
  // step (steps: p, relu(p), relu(p)·w, p·w with the sum as its epilogue).
  expectEpilogues(
      "read twice",
      [](auto& in) {
        Tensor p = matmul(in[0], in[1].t());
        return matmul(relu(p), in[1]) + matmul(p, in[1]);
      },
      {x, w, b}, 4, 1);
  // A reduction over the product (layer norm): its rows need the whole row.
  expectEpilogues(
      "reduction", [](auto& in) { return layerNorm(linear(in[0], in[1], in[2]), {48}); }, {x, w, b}, 2, 0);
  // The product is an output too: the kernel after it stays a step.
  detail::CompileEngine both(
      [](const std::vector<Tensor>& in) {
        Tensor p = matmul(in[0], in[1].t());
        return std::vector<Tensor>{p, relu(p)};
      },
      CompileOptions{});
  const std::vector<Tensor> out = both.call({x, w});
  EXPECT_TRUE(sameBits(out[0], matmul(x, w.t())));
  EXPECT_TRUE(sameBits(out[1], relu(matmul(x, w.t()))));
  EXPECT_EQ(both.lastNumEpilogues(), 0) << both.lastGraph();
  EXPECT_EQ(both.lastNumKernels(), 2) << both.lastGraph();
}

}  // namespace

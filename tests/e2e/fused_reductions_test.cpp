// End to end: softmax, log_softmax, layer_norm, cross_entropy, relu ->
// dropout -> layer_norm and the backwards compiled by kiln::compile (whose pipeline runs
// fuse-reductions) take the kernel counts issue 5 asks for, and their
// results equal eager ones bit for bit (eager runs every primitive op as a
// kernel of its own), at row lengths that are and are not multiples of the
// vector width, in every float dtype, along the last dim and along others.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;

/// Mismatching elements of two tensors of one dtype: bits compared through
/// f64 (exact for every float dtype), NaN equal to NaN.
size_t mismatches(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.type(), b.type());
  const std::vector<double> x = a.to(DType::f64).toVector<double>(), y = b.to(DType::f64).toVector<double>();
  size_t bad = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    bad += !(std::bit_cast<uint64_t>(x[i]) == std::bit_cast<uint64_t>(y[i]) || (std::isnan(x[i]) && std::isnan(y[i])));
  return bad + (x.size() != y.size() ? 1 : 0);
}

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Runs `fn` eagerly and compiled on `inputs`; expects equal bits and
/// `kernels` compiled kernels.
void expectCompiledEqualsEager(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs, int kernels) {
  SCOPED_TRACE(what);
  const std::vector<Tensor> eager = fn(inputs);
  detail::CompileEngine engine([fn](const std::vector<Tensor>& in) { return fn(in); }, CompileOptions{});
  const std::vector<Tensor> compiled = engine.call(inputs);
  ASSERT_EQ(eager.size(), compiled.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(mismatches(eager[i], compiled[i]), 0u) << "result " << i;
  EXPECT_EQ(engine.lastNumKernels(), kernels) << engine.lastGraph();
}

Tensor normal(const Shape& shape, uint64_t seed, double scale = 3.0, DType dtype = DType::f32) {
  Generator gen(seed);
  return (randn(shape, gen) * scale).to(dtype);
}

// Row lengths around the vector width (8 f64 lanes, 4 interleaved: 32).
// Rows past 16384 elements recompute instead of stashing (Note [Stashed
// row values]).
const std::vector<Shape> kShapes = {{64, 1024}, {37, 1000}, {5, 33},      {9, 31},
                                    {3, 2},     {2, 3, 50}, {4, 8, 1029}, {3, 20000}};

TEST(FusedReductions, SoftmaxAndLogSoftmaxAreOneKernel) {
  for (const Shape& s : kShapes) {
    const Tensor x = normal(s, s[0] * 7 + s.back());
    expectCompiledEqualsEager(
        "softmax " + ir::shapeStr(s), [](auto& in) { return std::vector{softmax(in[0], -1)}; }, {x}, 1);
    expectCompiledEqualsEager(
        "log_softmax " + ir::shapeStr(s), [](auto& in) { return std::vector{logSoftmax(in[0], -1)}; }, {x}, 1);
  }
  // Along dim 0: the rows are columns, read with a stride.
  const Tensor x = normal({300, 7}, 5);
  expectCompiledEqualsEager(
      "softmax dim 0", [](auto& in) { return std::vector{softmax(in[0], 0)}; }, {x}, 1);
  expectCompiledEqualsEager(
      "log_softmax dim 1 of 3", [](auto& in) { return std::vector{logSoftmax(in[0], 1)}; }, {normal({4, 70, 3}, 6)}, 1);
  // Of a transposed view: the sum is a second kernel (fuse-reductions.kir,
  // @transposed_softmax), so that it adds in eager's order.
  expectCompiledEqualsEager(
      "softmax of a transpose", [](auto& in) { return std::vector{softmax(in[0].t(), -1)}; }, {normal({300, 40}, 7)},
      2);
}

TEST(FusedReductions, LayerNormWithWeightAndBiasIsOneKernel) {
  for (const Shape& s : kShapes) {
    const int64_t c = s.back();
    const Tensor x = normal(s, c + 1, 2.0) + 5.0, w = normal({c}, c + 2), b = normal({c}, c + 3);
    expectCompiledEqualsEager(
        "layer_norm " + ir::shapeStr(s), [c](auto& in) { return std::vector{layerNorm(in[0], {c}, in[1], in[2])}; },
        {x, w, b}, 1);
    expectCompiledEqualsEager(
        "layer_norm without affine " + ir::shapeStr(s), [c](auto& in) { return std::vector{layerNorm(in[0], {c})}; },
        {x}, 1);
  }
  // Over the last two dims, with the statistics returned too.
  const Tensor x = normal({6, 5, 40}, 9), w = normal({5, 40}, 10), b = normal({5, 40}, 11);
  expectCompiledEqualsEager(
      "layer_norm over two dims",
      [](auto& in) {
        LayerNormResult r = layerNormWithStats(in[0], {5, 40}, in[1], in[2], 1e-5);
        return std::vector{r.output, r.mean, r.rstd};
      },
      {x, w, b}, 1);
}

TEST(FusedReductions, EveryFloatDtype) {
  for (DType d : {DType::f64, DType::f16, DType::bf16}) {
    const std::string name(dtypeName(d));
    const Tensor x = normal({33, 77}, 21, 3.0, d), w = normal({77}, 22, 1.0, d), b = normal({77}, 23, 1.0, d);
    expectCompiledEqualsEager(
        "softmax " + name, [](auto& in) { return std::vector{softmax(in[0], -1)}; }, {x}, 1);
    expectCompiledEqualsEager(
        "log_softmax " + name, [](auto& in) { return std::vector{logSoftmax(in[0], -1)}; }, {x}, 1);
    expectCompiledEqualsEager(
        "layer_norm " + name, [](auto& in) { return std::vector{layerNorm(in[0], {77}, in[1], in[2])}; }, {x, w, b}, 1);
  }
}

TEST(FusedReductions, CrossEntropyIsOneKernelPerRowAndOneForTheBatch) {
  const int64_t n = 129, classes = 37;
  const Tensor x = normal({n, classes}, 31);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = i % 9 == 4 ? -100 : (i * 7) % classes;
  const Tensor target = fromVector(t, {n});
  // Per row (reduction none): log_softmax, the pick of the target's class
  // and the weight of ignored rows, one kernel.
  expectCompiledEqualsEager(
      "cross_entropy none",
      [](auto& in) {
        CrossEntropyOptions o;
        o.reduction = Reduction::none;
        return std::vector{crossEntropy(in[0], in[1], o)};
      },
      {x, target}, 1);
  // Mean and sum add the row losses up over the batch: a reduction over
  // other rows (the batch), a second kernel.
  expectCompiledEqualsEager(
      "cross_entropy mean", [](auto& in) { return std::vector{crossEntropy(in[0], in[1])}; }, {x, target}, 2);
  expectCompiledEqualsEager(
      "cross_entropy sum with label smoothing",
      [](auto& in) {
        CrossEntropyOptions o;
        o.reduction = Reduction::sum;
        o.labelSmoothing = 0.1;
        return std::vector{crossEntropy(in[0], in[1], o)};
      },
      {x, target}, 2);
}

TEST(FusedReductions, LayerNormBackwardIsTwoKernels) {
  // Traced through backward() (docs/autograd.md): one kernel per row (the
  // forward's statistics, the input's gradient, and g * xhat for the
  // weight) and one over the columns (the weight's and bias's gradients).
  for (const Shape& s : {Shape{64, 256}, Shape{10, 33}, Shape{3, 7, 100}}) {
    const int64_t c = s.back();
    const Tensor x = normal(s, c + 40), w = normal({c}, c + 41), b = normal({c}, c + 42), g = normal(s, c + 43);
    expectCompiledEqualsEager(
        "layer_norm backward " + ir::shapeStr(s),
        [c](const std::vector<Tensor>& in) {
          Tensor xx = in[0].detach().setRequiresGrad(), ww = in[1].detach().setRequiresGrad(),
                 bb = in[2].detach().setRequiresGrad();
          Tensor y = layerNorm(xx, {c}, ww, bb);
          y.backward(in[3]);
          return std::vector{y, xx.grad(), ww.grad(), bb.grad()};
        },
        {x, w, b, g}, 2);
  }
}

TEST(FusedReductions, ReluDropoutLayerNormIsOneKernelAndItsBackwardTwo) {
  // The relu -> dropout -> layer_norm: forward one kernel (the
  // draws made in each pass over the row); forward and backward two (the
  // row kernel recomputes the mask for the gradient, the column sums of
  // the weight and bias gradients are the second). The generator advances
  // as eagerly, so both draw the same masks.
  const int64_t c = 300;
  const Tensor x = normal({50, c}, 61), w = normal({c}, 62), b = normal({c}, 63), g = normal({50, c}, 64);
  const Fn forward = [c](const std::vector<Tensor>& in) {
    return std::vector{layerNorm(dropout(relu(in[0]), 0.1), {c}, in[1], in[2])};
  };
  const Fn both = [c](const std::vector<Tensor>& in) {
    Tensor xx = in[0].detach().setRequiresGrad(), ww = in[1].detach().setRequiresGrad(),
           bb = in[2].detach().setRequiresGrad();
    Tensor y = layerNorm(dropout(relu(xx), 0.1), {c}, ww, bb);
    y.backward(in[3]);
    return std::vector{y, xx.grad(), ww.grad(), bb.grad()};
  };
  for (const auto& [what, fn, inputs, kernels] : {std::tuple{"forward", forward, std::vector{x, w, b}, 1},
                                                  std::tuple{"backward", both, std::vector{x, w, b, g}, 2}}) {
    SCOPED_TRACE(what);
    manualSeed(77);
    const uint64_t offset = defaultGenerator().offset();
    const std::vector<Tensor> eager = fn(inputs);
    defaultGenerator().setOffset(offset);
    detail::CompileEngine engine([fn](const std::vector<Tensor>& in) { return fn(in); }, CompileOptions{});
    const std::vector<Tensor> compiled = engine.call(inputs);
    ASSERT_EQ(eager.size(), compiled.size());
    for (size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(mismatches(eager[i], compiled[i]), 0u) << "result " << i;
    EXPECT_EQ(engine.lastNumKernels(), kernels) << engine.lastGraph();
  }
}

TEST(FusedReductions, SoftmaxForwardAndBackwardIsOneKernel) {
  const Tensor x = normal({40, 300}, 51), g = normal({40, 300}, 52);
  expectCompiledEqualsEager(
      "softmax backward",
      [](const std::vector<Tensor>& in) {
        Tensor xx = in[0].detach().setRequiresGrad();
        Tensor y = softmax(xx, -1);
        y.backward(in[1]);
        return std::vector{y, xx.grad()};
      },
      {x, g}, 1);
}

}  // namespace

// kiln::matmul and kiln::linear against a naive f64 loop: every case of
// torch.matmul (1-d and 2-d operands, batches that broadcast), views as
// operands (transposed, sliced, expanded, every other column), every
// dtype, the error for each mistake, eager calls that read views without a
// copy, and compiled == eager bit for bit.
//
// Tolerance (as in tests/unit/runtime/blas_test.cpp): |result - exact| <=
// 2·K·u·Σ|a·b| with u = 2^-24 (f32) or 2^-53 (f64), plus half an ulp of
// the result for f16 (2^-11) and bf16 (2^-8); integers exact.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;

std::vector<double> values(const Tensor& t) { return t.to(DType::f64).toVector<double>(); }

/// torch.matmul in f64 on row-major values: returns the result and, per
/// element, Σ|a·b| (for the tolerance).
struct Reference {
  Shape shape;
  std::vector<double> exact, magnitude;
  int64_t k = 0;
};
Reference reference(const Tensor& a, const Tensor& b) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const std::vector<double> va = values(a), vb = values(b);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const Shape batch = *ir::broadcastShapes(ba, bb);
  Reference r;
  r.k = k;
  int64_t batches = ir::numel(batch);
  auto offset = [&](const Shape& own, const Shape& idx, int64_t matrix) {
    int64_t flat = 0;
    for (size_t d = 0; d < own.size(); ++d) {
      const int64_t i = own[d] == 1 ? 0 : idx[batch.size() - own.size() + d];
      flat = flat * own[d] + i;
    }
    return flat * matrix;
  };
  for (int64_t f = 0; f < batches; ++f) {
    Shape idx(batch.size());
    for (size_t d = batch.size(), rest = static_cast<size_t>(f); d-- > 0;) {
      idx[d] = static_cast<int64_t>(rest % static_cast<size_t>(batch[d]));
      rest /= static_cast<size_t>(batch[d]);
    }
    const int64_t oa = offset(ba, idx, m * k), ob = offset(bb, idx, k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, mag = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const double p = va[static_cast<size_t>(oa + i * k + kk)] * vb[static_cast<size_t>(ob + kk * n + j)];
          s += p;
          mag += std::abs(p);
        }
        r.exact.push_back(s);
        r.magnitude.push_back(mag);
      }
  }
  r.shape = batch;
  if (a.dim() > 1) r.shape.push_back(m);
  if (b.dim() > 1) r.shape.push_back(n);
  return r;
}

::testing::AssertionResult matchesReference(const Tensor& a, const Tensor& b) {
  const Tensor got = matmul(a, b);
  const Reference r = reference(a, b);
  if (got.shape() != r.shape)
    return ::testing::AssertionFailure() << "shape " << got.str() << ", expected " << ir::shapeStr(r.shape);
  if (got.dtype() != a.dtype()) return ::testing::AssertionFailure() << "dtype " << got.str();
  const DType d = a.dtype();
  const double u = d == DType::f64 ? 0x1p-53 : 0x1p-24;
  const double half = d == DType::f16 ? 0x1p-11 : d == DType::bf16 ? 0x1p-8 : 0;
  const bool exact = d == DType::i32 || d == DType::i64;
  const std::vector<double> g = values(got);
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = exact ? 0 : 2 * static_cast<double>(r.k) * u * r.magnitude[i] + half * std::abs(r.exact[i]);
    if (!(std::abs(g[i] - r.exact[i]) <= tol))
      return ::testing::AssertionFailure() << a.str() << " @ " << b.str() << ": element " << i << " is " << g[i]
                                           << ", expected " << r.exact[i] << " within " << tol;
  }
  return ::testing::AssertionSuccess();
}

TEST(Matmul, EveryCaseOfTorchMatmul) {
  Generator gen(7);
  auto r = [&](Shape s) { return randn(s, gen); };
  EXPECT_TRUE(matchesReference(r({5}), r({5}))) << "dot";
  EXPECT_TRUE(matchesReference(r({5}), r({5, 3}))) << "vector-matrix";
  EXPECT_TRUE(matchesReference(r({4, 5}), r({5}))) << "matrix-vector";
  EXPECT_TRUE(matchesReference(r({4, 5}), r({5, 3}))) << "matrix-matrix";
  EXPECT_TRUE(matchesReference(r({2, 4, 5}), r({5, 3}))) << "batch-matrix (folded)";
  EXPECT_TRUE(matchesReference(r({4, 5}), r({2, 5, 3}))) << "matrix-batch";
  EXPECT_TRUE(matchesReference(r({2, 1, 4, 5}), r({3, 5, 6}))) << "broadcast batch dims";
  EXPECT_TRUE(matchesReference(r({5}), r({2, 5, 3}))) << "vector-batch";
  EXPECT_TRUE(matchesReference(r({2, 4, 5}), r({5}))) << "batch-vector";
  EXPECT_TRUE(matchesReference(r({3, 0}), r({0, 2}))) << "empty inner dim: zeros";
  EXPECT_TRUE(matchesReference(r({65, 300}), r({300, 129}))) << "large enough to split over threads";
}

TEST(Matmul, ViewsAsOperands) {
  Generator gen(8);
  Tensor x = randn({6, 8}, gen), y = randn({8, 6}, gen), z = randn({3, 8, 5}, gen);
  EXPECT_TRUE(matchesReference(x, y.t().t())) << "contiguous";
  EXPECT_TRUE(matchesReference(y.t(), y)) << "transposed";
  EXPECT_TRUE(matchesReference(x, x.t())) << "transposed second";
  EXPECT_TRUE(matchesReference(x.narrow(1, 2, 5), y.narrow(0, 1, 5))) << "sliced: rows longer than they are";
  EXPECT_TRUE(matchesReference(x.slice(1, 0, 8, 2), y.slice(0, 0, 8, 2))) << "every other column: copied";
  EXPECT_TRUE(matchesReference(z.select(0, 1).t(), x.t())) << "a batch picked out, transposed";
  EXPECT_TRUE(matchesReference(x.unsqueeze(0).expand({4, 6, 8}), z.select(0, 2))) << "expanded batch: stride 0";
  EXPECT_TRUE(matchesReference(z.transpose(1, 2), x.t())) << "batched transposes";
  EXPECT_TRUE(matchesReference(x.select(1, 3), y.t())) << "a strided vector";
}

TEST(Matmul, EveryDType) {
  Generator gen(9);
  Tensor a = randn({3, 7, 9}, gen), b = randn({9, 5}, gen);
  for (DType d : {DType::f64, DType::f16, DType::bf16}) {
    EXPECT_TRUE(matchesReference(a.to(d), b.to(d))) << dtypeName(d);
    EXPECT_TRUE(matchesReference(a.to(d).transpose(1, 2).transpose(1, 2), b.to(d).t().t())) << dtypeName(d);
    EXPECT_TRUE(matchesReference(b.to(d).t(), a.to(d).transpose(1, 2))) << dtypeName(d) << " transposed";
  }
  for (DType d : {DType::i32, DType::i64}) {
    Tensor ia = (a * 10.0).to(d), ib = (b * 10.0).to(d);
    EXPECT_TRUE(matchesReference(ia, ib)) << dtypeName(d);
    EXPECT_TRUE(matchesReference(ib.t(), ia.transpose(1, 2))) << dtypeName(d) << " transposed";
  }
}

TEST(Matmul, ErrorsNameTheShapes) {
  Tensor a = zeros({2, 3}), v3 = zeros({3}), v4 = zeros({4});
  EXPECT_EQ(errorOf([&] {
              matmul(a, zeros({4, 5}));
            }),
            "matmul: shapes f32[2,3]@cpu and f32[4,5]@cpu cannot be multiplied (3 != 4)");
  EXPECT_EQ(errorOf([&] { matmul(v3, v4); }), "matmul: shapes f32[3]@cpu and f32[4]@cpu cannot be multiplied (3 != 4)");
  EXPECT_EQ(errorOf([&] { matmul(v4, a); }),
            "matmul: shapes f32[4]@cpu and f32[2,3]@cpu cannot be multiplied (4 != 2)");
  EXPECT_EQ(errorOf([&] { matmul(a, v4); }),
            "matmul: shapes f32[2,3]@cpu and f32[4]@cpu cannot be multiplied (3 != 4)");
  EXPECT_EQ(errorOf([&] { matmul(zeros({}), v3); }),
            "matmul: both arguments need at least 1 dimension, got f32[]@cpu and f32[3]@cpu");
  EXPECT_EQ(errorOf([&] {
              matmul(a, zeros({3, 2}, DType::f64));
            }),
            "matmul: expected both tensors of one dtype, got f32[2,3]@cpu and f64[3,2]@cpu");
  EXPECT_EQ(errorOf([&] {
              matmul(zeros({2, 2}, DType::boolean), zeros({2, 2}, DType::boolean));
            }),
            "matmul: dtype bool is not supported, got bool[2,2]@cpu and bool[2,2]@cpu");
  EXPECT_EQ(errorOf([&] {
              matmul(zeros({2, 2, 3}), zeros({5, 3, 2}));
            }),
            "matmul: batch dimensions [2] and [5] of f32[2,2,3]@cpu and f32[5,3,2]@cpu do not broadcast");
  EXPECT_EQ(errorOf([&] { matmul(a, Tensor()); }), "matmul: argument 1 is an undefined tensor");
}

TEST(Linear, IsXTimesWeightTransposedPlusBias) {
  Generator gen(10);
  Tensor x = randn({2, 5, 8}, gen), w = randn({6, 8}, gen), b = randn({6}, gen);
  Tensor y = linear(x, w, b);
  ASSERT_EQ(y.shape(), (Shape{2, 5, 6}));
  const std::vector<double> vx = values(x), vw = values(w), vb = values(b), vy = values(y);
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t o = 0; o < 6; ++o) {
      double s = 0, mag = 0;
      for (int64_t i = 0; i < 8; ++i) {
        s += vx[static_cast<size_t>(r * 8 + i)] * vw[static_cast<size_t>(o * 8 + i)];
        mag += std::abs(vx[static_cast<size_t>(r * 8 + i)] * vw[static_cast<size_t>(o * 8 + i)]);
      }
      // One more rounding for the bias add: half an ulp of the sum.
      const double want = s + vb[static_cast<size_t>(o)];
      EXPECT_LE(std::abs(vy[static_cast<size_t>(r * 6 + o)] - want), 2 * 8 * 0x1p-24 * mag + 0x1p-24 * std::abs(want));
    }
  EXPECT_EQ(linear(randn({8}, gen), w).shape(), (Shape{6})) << "a 1-d input";
  EXPECT_EQ(
      errorOf([&] {
        linear(x, randn({6, 7}, gen));
      }),
      "linear: input f32[2,5,8]@cpu does not match weight f32[6,7]@cpu (expected the last dim of the input to be 7)");
  EXPECT_EQ(errorOf([&] { linear(x, w, b.to(DType::f64)); }),
            "linear: expected input, weight and bias of one dtype, got f32[2,5,8]@cpu, f32[6,8]@cpu and f64[6]@cpu");
  EXPECT_EQ(errorOf([&] { linear(x, w.flatten()); }), "linear: expected a 2-d weight [out, in], got f32[48]@cpu");
}

TEST(Matmul, EagerReadsATransposedWeightWithoutACopy) {
  Tensor x = randn({16, 32}), w = randn({24, 32});
  linear(x, w);  // compiles nothing new below
  const int64_t before = runtime::kernelLaunchCount();
  Tensor y = linear(x, w);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 1) << "one library call, no copy of w.t()";
  Tensor z = matmul(x.t().contiguous().t(), w.t());
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 3) << "the contiguous() copy, then one call";
}

/// Whether two tensors hold the same bits (via f64, which holds every dtype exactly).
::testing::AssertionResult sameBits(const Tensor& a, const Tensor& b) {
  if (a.type() != b.type()) return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const auto x = values(a), y = values(b);
  for (size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<uint64_t>(x[i]) != std::bit_cast<uint64_t>(y[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

TEST(Matmul, CompiledEqualsEagerBitForBit) {
  Generator gen(11);
  // Sizes where OpenBLAS uses its small-matrix kernels (100x37x250) and
  // where it does not, so that a changed flag or split would show.
  Tensor x = randn({100, 250}, gen), w = randn({37, 250}, gen), b = randn({37}, gen);
  Tensor xb = randn({3, 20, 64}, gen), wb = randn({48, 64}, gen), v = randn({64}, gen);
  auto mlp = [](const Tensor& x, const Tensor& w, const Tensor& b) { return relu(linear(x, w, b)); };
  auto f = compile(mlp);
  EXPECT_TRUE(sameBits(f(x, w, b), mlp(x, w, b)));
  // One step: the matmul, with the fusion of add and relu as its epilogue
  // (Note [Matmul epilogues]), which gives eager's bits.
  EXPECT_EQ(f.lastNumKernels(), 1) << f.lastGraph();
  EXPECT_EQ(f.lastNumEpilogues(), 1) << f.lastGraph();

  auto batched = [](const Tensor& x, const Tensor& w, const Tensor& v) {
    return std::vector<Tensor>{matmul(x, w.t()), matmul(x.transpose(1, 2).narrow(1, 3, 40), x), matmul(x, v),
                               matmul(v, w.t())};
  };
  auto g = compile(batched);
  const auto eager = batched(xb, wb, v), compiled = g(xb, wb, v);
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(sameBits(compiled[i], eager[i])) << "output " << i;

  auto halves = [](const Tensor& x, const Tensor& w) { return matmul(x.to(DType::bf16), w.to(DType::bf16).t()); };
  EXPECT_TRUE(sameBits(compile(halves)(x, w), halves(x, w)));
}

}  // namespace

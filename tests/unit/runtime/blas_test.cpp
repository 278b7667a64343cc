// The matmul library call (runtime/blas.h) against a naive f64 loop: every
// dtype, operands read through strides (contiguous, transposed — BLAS's
// transposed flag —, strided, which is copied, and stride-0 broadcast batch
// dims), batches folded into one product or not, products split by rows and
// by columns over the thread pool, and both threading choices.
//
// Tolerance for f32 and f64: a dot product of K terms computed in any order
// (with or without FMA) is within K·u·Σ|a·b| of the exact one (u = 2^-24 for
// f32, 2^-53 for f64; Higham, "Accuracy and Stability", §3.1); the tests
// allow twice that. f16 and bf16 results are that f32 result rounded once:
// within half an ulp of f16/bf16 more. Integers are exact, wrapping.
#include "runtime/blas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/error.h"
#include "runtime/numeric.h"
#include "runtime/onednn_matmul.h"

namespace kiln::runtime {
namespace {

/// A strided matrix operand: its storage and how [batch..., rows, cols] sit in it.
struct Operand {
  std::vector<double> values;  // storage, as doubles (converted per dtype)
  std::vector<int64_t> sizes, strides;
};

std::vector<double> randomValues(size_t n, uint32_t seed, bool integers = false) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = integers ? std::floor(u(gen) * 50) : u(gen);
  return v;
}

/// Storage in dtype `dtype`.
std::vector<char> store(const std::vector<double>& values, DType dtype) {
  std::vector<char> bytes(values.size() * static_cast<size_t>(itemSize(dtype)));
  for (size_t i = 0; i < values.size(); ++i)
    storeAs(bytes.data() + i * static_cast<size_t>(itemSize(dtype)), dtype, values[i]);
  return bytes;
}

double load(const char* p, DType dtype) {
  switch (dtype) {
    case DType::f32: return *reinterpret_cast<const float*>(p);
    case DType::f64: return *reinterpret_cast<const double*>(p);
    case DType::f16: return static_cast<float>(*reinterpret_cast<const Half*>(p));
    case DType::bf16: return static_cast<float>(*reinterpret_cast<const BFloat16*>(p));
    case DType::i32: return *reinterpret_cast<const int32_t*>(p);
    case DType::i64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::boolean: break;
  }
  return 0;
}

struct Problem {
  DType dtype = DType::f32;
  int64_t m, n, k;
  std::vector<int64_t> batch;  // of the result
  Operand a, b;                // a: [batch_a..., m, k], b: [batch_b..., k, n]; batch dims aligned right
};

/// Runs the call and checks every element against the f64 loop.
void check(const Problem& p, const char* what) {
  MatmulCall c;
  c.dtype = p.dtype;
  c.m = p.m, c.n = p.n, c.k = p.k;
  c.batch = p.batch;
  const size_t ra = p.a.sizes.size(), rb = p.b.sizes.size(), nb = p.batch.size();
  c.aRowStride = p.a.strides[ra - 2], c.aColStride = p.a.strides[ra - 1];
  c.bRowStride = p.b.strides[rb - 2], c.bColStride = p.b.strides[rb - 1];
  auto batchStride = [&](const Operand& o, size_t d) {
    const int64_t od = static_cast<int64_t>(d) - static_cast<int64_t>(nb - (o.sizes.size() - 2));
    return od < 0 || o.sizes[static_cast<size_t>(od)] == 1 ? 0 : o.strides[static_cast<size_t>(od)];
  };
  for (size_t d = 0; d < nb; ++d) {
    c.aBatchStrides.push_back(batchStride(p.a, d));
    c.bBatchStrides.push_back(batchStride(p.b, d));
  }
  std::vector<char> a = store(p.a.values, p.dtype), b = store(p.b.values, p.dtype);
  int64_t batches = 1;
  for (int64_t s : p.batch) batches *= s;
  const int64_t item = itemSize(p.dtype);
  std::vector<char> out(static_cast<size_t>(batches * p.m * p.n * item) + 1, 0x55);
  std::vector<void*> buffers = {a.data(), b.data(), out.data()};
  matmul(buffers, c.encode());

  const double u = p.dtype == DType::f64 ? 0x1p-53 : 0x1p-24;
  const double half = p.dtype == DType::f16 ? 0x1p-11 : p.dtype == DType::bf16 ? 0x1p-8 : 0;
  const bool exact = p.dtype == DType::i32 || p.dtype == DType::i64;
  // The operands as the call sees them: rounded to the dtype.
  Operand roundedA = p.a, roundedB = p.b;
  for (Operand* o : {&roundedA, &roundedB})
    for (double& v : o->values) v = load(store({v}, p.dtype).data(), p.dtype);
  std::vector<int64_t> bi(nb);
  for (int64_t flat = 0; flat < batches; ++flat) {
    for (size_t d = nb, rest = static_cast<size_t>(flat); d-- > 0;) {
      bi[d] = static_cast<int64_t>(rest % static_cast<size_t>(p.batch[d]));
      rest /= static_cast<size_t>(p.batch[d]);
    }
    auto base = [&](const Operand& o) {
      int64_t off = 0;
      for (size_t d = 0; d + 2 < o.sizes.size(); ++d)
        off += (o.sizes[d] == 1 ? 0 : bi[nb - (o.sizes.size() - 2) + d]) * o.strides[d];
      return off;
    };
    const int64_t baseA = base(p.a), baseB = base(p.b);
    const int64_t ars = p.a.strides[ra - 2], acs = p.a.strides[ra - 1];
    const int64_t brs = p.b.strides[rb - 2], bcs = p.b.strides[rb - 1];
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double exactSum = 0, magnitude = 0;
        for (int64_t kk = 0; kk < p.k; ++kk) {
          const double x = roundedA.values[static_cast<size_t>(baseA + i * ars + kk * acs)];
          const double y = roundedB.values[static_cast<size_t>(baseB + kk * brs + j * bcs)];
          exactSum += x * y;
          magnitude += std::abs(x * y);
        }
        const double got = load(out.data() + ((flat * p.m + i) * p.n + j) * item, p.dtype);
        const double tol = exact ? 0 : 2 * static_cast<double>(p.k) * u * magnitude + half * std::abs(exactSum);
        ASSERT_LE(std::abs(got - exactSum), tol)
            << what << " " << dtypeName(p.dtype) << ": batch " << flat << " [" << i << ", " << j << "]";
      }
  }
  EXPECT_EQ(out.back(), 0x55) << what << ": wrote past the result";
}

/// A contiguous [sizes...] operand, or its transposed view (last two dims
/// swapped in storage), or one whose columns are every other element.
enum class Layout { contiguous, transposed, strided };
Operand makeOperand(std::vector<int64_t> sizes, Layout layout, uint32_t seed, bool integers = false) {
  Operand o;
  o.sizes = sizes;
  const size_t r = sizes.size();
  std::vector<int64_t> storage = sizes;
  if (layout == Layout::transposed) std::swap(storage[r - 1], storage[r - 2]);
  if (layout == Layout::strided) storage[r - 1] *= 2;
  std::vector<int64_t> cs(r, 1);
  for (size_t d = r - 1; d-- > 0;) cs[d] = cs[d + 1] * storage[d + 1];
  o.strides = cs;
  if (layout == Layout::transposed) std::swap(o.strides[r - 1], o.strides[r - 2]);
  if (layout == Layout::strided) o.strides[r - 1] = 2;
  int64_t n = 1;
  for (int64_t s : storage) n *= s;
  o.values = randomValues(static_cast<size_t>(n), seed, integers);
  return o;
}

Problem problem(DType dtype, std::vector<int64_t> aSizes, Layout la, std::vector<int64_t> bSizes, Layout lb,
                std::vector<int64_t> batch = {}) {
  const bool ints = dtype == DType::i32 || dtype == DType::i64;
  Problem p;
  p.dtype = dtype;
  p.m = aSizes[aSizes.size() - 2], p.k = aSizes.back(), p.n = bSizes.back();
  p.batch = std::move(batch);
  p.a = makeOperand(aSizes, la, 1, ints);
  p.b = makeOperand(bSizes, lb, 2, ints);
  return p;
}

TEST(BlasMatmul, EncodesAndDecodesItsArguments) {
  MatmulCall c;
  c.dtype = DType::bf16;
  c.m = 3, c.n = 4, c.k = 5;
  c.batch = {2, 7};
  c.aBatchStrides = {0, 15};
  c.bBatchStrides = {140, 20};
  c.aRowStride = 5, c.aColStride = 1, c.bRowStride = 1, c.bColStride = 5;
  const MatmulCall d = MatmulCall::decode(c.encode());
  EXPECT_EQ(d.dtype, DType::bf16);
  EXPECT_EQ(d.batch, c.batch);
  EXPECT_EQ(d.aBatchStrides, c.aBatchStrides);
  EXPECT_EQ(d.bBatchStrides, c.bBatchStrides);
  EXPECT_EQ(std::vector<int64_t>({d.m, d.n, d.k, d.aRowStride, d.aColStride, d.bRowStride, d.bColStride}),
            std::vector<int64_t>({3, 4, 5, 5, 1, 1, 5}));
}

TEST(BlasMatmul, EveryLayoutOfEachOperand) {
  for (Layout la : {Layout::contiguous, Layout::transposed, Layout::strided})
    for (Layout lb : {Layout::contiguous, Layout::transposed, Layout::strided})
      for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64})
        check(problem(dtype, {7, 13}, la, {13, 9}, lb), "7x13 . 13x9");
}

TEST(BlasMatmul, BroadcastBatchDims) {
  // a [2, 1, 5, 6] with b [3, 6, 4]: result batch [2, 3], a repeated over 3, b over 2.
  check(problem(DType::f32, {2, 1, 5, 6}, Layout::contiguous, {3, 6, 4}, Layout::transposed, {2, 3}), "broadcast");
  check(problem(DType::i64, {2, 1, 5, 6}, Layout::strided, {3, 6, 4}, Layout::contiguous, {2, 3}), "broadcast");
  // b the same for every batch: the batch folds into the rows (and must still be right).
  check(problem(DType::f32, {4, 3, 5, 6}, Layout::contiguous, {6, 7}, Layout::transposed, {4, 3}), "folded");
  check(problem(DType::f16, {4, 3, 5, 6}, Layout::contiguous, {6, 7}, Layout::contiguous, {4, 3}), "folded");
  // ... unless a's batches do not continue its rows.
  check(problem(DType::f64, {4, 5, 6}, Layout::transposed, {6, 7}, Layout::contiguous, {4}), "not folded");
}

TEST(BlasMatmul, LargeProductsSplitOverThreadsByRowsOrColumns) {
  for (BlasThreading t : {BlasThreading::pool, BlasThreading::blas}) {
    setBlasThreading(t);
    check(problem(DType::f32, {300, 200}, Layout::contiguous, {200, 100}, Layout::transposed), "rows");
    check(problem(DType::f32, {8, 256}, Layout::transposed, {256, 1000}, Layout::contiguous), "columns");
    check(problem(DType::bf16, {130, 200}, Layout::contiguous, {200, 70}, Layout::contiguous), "rows");
    check(problem(DType::i32, {130, 100}, Layout::contiguous, {100, 170}, Layout::contiguous), "columns");
    check(problem(DType::f64, {64, 40, 50}, Layout::contiguous, {64, 50, 30}, Layout::contiguous, {64}), "batches");
  }
  setBlasThreading(BlasThreading::pool);
}

// oneDNN's sgemm behind f32 (and f16/bf16) products (Note [Choosing the
// BLAS] in codegen/blas_choice.cpp): the same layouts, splits and threads.
TEST(BlasMatmul, OneDnnProductsToo) {
  if (!haveOneDnn()) GTEST_SKIP() << "this build has no oneDNN (Debian libdnnl-dev)";
  setBlasLibrary(BlasLibrary::onednn);
  for (Layout la : {Layout::contiguous, Layout::transposed, Layout::strided})
    for (Layout lb : {Layout::contiguous, Layout::transposed, Layout::strided})
      for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64})
        check(problem(dtype, {7, 13}, la, {13, 9}, lb), "7x13 . 13x9");
  for (BlasThreading t : {BlasThreading::pool, BlasThreading::blas}) {
    setBlasThreading(t);
    check(problem(DType::f32, {300, 200}, Layout::contiguous, {200, 100}, Layout::transposed), "rows");
    check(problem(DType::f32, {8, 256}, Layout::transposed, {256, 1000}, Layout::contiguous), "columns");
    check(problem(DType::f32, {4, 3, 5, 6}, Layout::contiguous, {6, 7}, Layout::transposed, {4, 3}), "folded");
  }
  check(problem(DType::f32, {3, 0}, Layout::contiguous, {0, 4}, Layout::contiguous), "k = 0");
  setBlasThreading(BlasThreading::pool);
  EXPECT_NE(blasInfo().find("f32 products: oneDNN " + oneDnnVersion()), std::string::npos) << blasInfo();
  setBlasLibrary(BlasLibrary::openblas);
  EXPECT_EQ(blasInfo().find("oneDNN"), std::string::npos) << blasInfo();
}

// bf16 products on oneDNN's bf16 matmul primitive (Note [Native bf16
// products] in runtime/onednn_matmul.cpp): every layout, a broadcast
// operand (which oneDNN cannot describe: converted instead), batches,
// vectors and splits over threads, each element within the f64 bound.
TEST(BlasMatmul, NativeBf16ProductsOnOneDnn) {
  if (!haveOneDnn()) GTEST_SKIP() << "this build has no oneDNN (Debian libdnnl-dev)";
  const std::string impl = detail::oneDnnBf16Implementation(64, 64, 64);
  setHalfMatmul(HalfMatmul::onednn);
  for (Layout la : {Layout::contiguous, Layout::transposed, Layout::strided})
    for (Layout lb : {Layout::contiguous, Layout::transposed, Layout::strided})
      check(problem(DType::bf16, {7, 13}, la, {13, 9}, lb), "7x13 . 13x9");
  check(problem(DType::bf16, {2, 1, 5, 6}, Layout::contiguous, {3, 6, 4}, Layout::transposed, {2, 3}), "broadcast");
  check(problem(DType::bf16, {4, 3, 5, 6}, Layout::contiguous, {6, 7}, Layout::contiguous, {4, 3}), "folded");
  check(problem(DType::bf16, {1, 40}, Layout::contiguous, {40, 30}, Layout::transposed), "m = 1");
  check(problem(DType::bf16, {30, 40}, Layout::contiguous, {40, 1}, Layout::contiguous), "n = 1");
  check(problem(DType::bf16, {30, 1}, Layout::transposed, {1, 20}, Layout::strided), "k = 1");
  for (BlasThreading t : {BlasThreading::pool, BlasThreading::blas}) {
    setBlasThreading(t);
    check(problem(DType::bf16, {300, 200}, Layout::contiguous, {200, 100}, Layout::transposed), "rows");
    check(problem(DType::bf16, {8, 256}, Layout::transposed, {256, 1000}, Layout::contiguous), "columns");
  }
  setBlasThreading(BlasThreading::pool);
  const std::string info = blasInfo();
  setHalfMatmul(HalfMatmul::viaF32);
  if (impl.rfind("ref", 0) == 0)
    GTEST_SKIP() << "oneDNN has only its reference bf16 kernel on this CPU (" << impl
                 << "): the products above were converted";
  EXPECT_NE(info.find("bf16 products: oneDNN " + oneDnnVersion() + " "), std::string::npos) << info;
  EXPECT_EQ(blasInfo().find("bf16 products"), std::string::npos) << blasInfo();
  EXPECT_GT(timeHalfMatmul(HalfMatmul::onednn), 0.0);
  EXPECT_EQ(halfMatmul(), HalfMatmul::viaF32) << "timing leaves the choice as it was";
}

TEST(BlasMatmul, TimingALibraryLeavesTheChoiceAsItWas) {
  EXPECT_GT(timeBlasLibrary(BlasLibrary::openblas), 0.0);
  if (haveOneDnn()) {
    EXPECT_GT(timeBlasLibrary(BlasLibrary::onednn), 0.0);
  } else {
    EXPECT_THROW(timeBlasLibrary(BlasLibrary::onednn), Error);
    EXPECT_THROW(setBlasLibrary(BlasLibrary::onednn), Error);
  }
  EXPECT_EQ(blasLibrary(), BlasLibrary::openblas);
}

TEST(BlasMatmul, EmptyInnerDimGivesZerosAndEmptyResultsWriteNothing) {
  check(problem(DType::f32, {3, 0}, Layout::contiguous, {0, 4}, Layout::contiguous), "k = 0");
  check(problem(DType::i32, {3, 0}, Layout::contiguous, {0, 4}, Layout::contiguous), "k = 0");
  check(problem(DType::f32, {0, 5}, Layout::contiguous, {5, 4}, Layout::contiguous), "m = 0");
}

TEST(BlasMatmul, IntegersWrap) {
  // 2^31 - 1 squared plus itself wraps in i32 exactly as unsigned arithmetic does.
  const int32_t big = 2147483647;
  int32_t a[2] = {big, big}, b[2] = {big, 1}, out[1] = {0};
  MatmulCall c;
  c.dtype = DType::i32;
  c.m = 1, c.n = 1, c.k = 2;
  c.aRowStride = 2, c.aColStride = 1, c.bRowStride = 1, c.bColStride = 1;
  std::vector<void*> buffers = {a, b, out};
  matmul(buffers, c.encode());
  const uint32_t expected = static_cast<uint32_t>(big) * static_cast<uint32_t>(big) + static_cast<uint32_t>(big);
  EXPECT_EQ(out[0], static_cast<int32_t>(expected));
}

}  // namespace
}  // namespace kiln::runtime

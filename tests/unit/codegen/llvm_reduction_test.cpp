// Tests of the CPU reduction renderer (codegen/llvm_reduction.cpp):
// hand-made reduction Kernels are JIT-compiled and run on plain vectors and
// compared with C++ references: exactly for max, min, argmax and integer
// sums, to the correctly rounded value for f32 sums (accumulated in f64),
// NaN and signed zeros as documented, rows of no elements, several reduced
// dims, strided rows, a three-pass softmax with a row store, and every split
// of the output rows the thread pool may choose. The optimized IR must carry
// `reassoc` on the accumulating fadd and no other fast-math flag.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "codegen/cpu_compiler.h"
#include "codegen/kernel.h"
#include "common/run_in_pieces.h"
#include "unit/codegen/dtype_cases.h"

namespace kiln::codegen {
namespace {

using namespace instr;
using ir::Op;
using testing::rowKernel;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

bool sameBits(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

/// Runs `k` over `rows` output rows, in one call and again in the pieces
/// [0, c0), [c0, c1), ...: rows are independent, so both must agree.
template <class Out>
std::vector<Out> runRows(const Kernel& k, std::vector<void*> inputs, int64_t rows, int64_t outPerRow,
                         const std::vector<int64_t>& args, std::vector<int64_t> cuts = {}) {
  const auto [whole, pieces] = runWholeAndInPieces<Out>(k, std::move(inputs), rows,
                                                        static_cast<size_t>(rows * outPerRow), args, std::move(cuts));
  for (size_t i = 0; i < whole.size(); ++i) {
    if constexpr (std::is_same_v<Out, float>)
      EXPECT_TRUE(sameBits(whole[i], pieces[i])) << "element " << i << " depends on the split";
    else
      EXPECT_EQ(whole[i], pieces[i]) << "element " << i << " depends on the split";
  }
  return whole;
}

/// sizes [rows, cols], x contiguous, out one per row.
std::vector<int64_t> rowArgs(int64_t rows, int64_t cols) { return {rows, cols, cols, 1, 1, 0}; }

Kernel sumF32() {
  return rowKernel("kiln_t_sum", DType::f32, DType::f32,
                   {load(0, DType::f32), op(Op::cast, {0}, {{"dtype", DType::f64}}, DType::f64),
                    reduce(ReduceOp::sum, 1, DType::f64), op(Op::cast, {2}, {{"dtype", DType::f32}}, DType::f32),
                    store(1, 3, DType::f32)});
}

float ieeeMax(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return kNan;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
float ieeeMin(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return kNan;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

TEST(LlvmReduction, F32SumIsTheCorrectlyRoundedSumOfEachRow) {
  const int64_t rows = 37, cols = 1000;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = dist(rng);
  auto out = runRows<float>(sumF32(), {x.data()}, rows, 1, rowArgs(rows, cols), {1, 5, 6, 30});
  for (int64_t r = 0; r < rows; ++r) {
    long double exact = 0;
    for (int64_t c = 0; c < cols; ++c) exact += x[static_cast<size_t>(r * cols + c)];
    // The f64 partial sums err by at most (n + 1) 2^-53 sum|x| ~ 1e-10 here,
    // far below half an f32 ulp of the sum, except within that of a tie.
    EXPECT_TRUE(sameBits(out[r], static_cast<float>(exact)))
        << "row " << r << ": " << out[r] << " vs " << (double)exact;
  }
}

TEST(LlvmReduction, RowsOfNoElementsSumToZero) {
  float dummy = 1;
  auto out = runRows<float>(sumF32(), {&dummy}, 3, 1, rowArgs(3, 0));
  for (float v : out) EXPECT_TRUE(sameBits(v, 0.0f)) << v;
}

TEST(LlvmReduction, MaxAndMinPropagateNanAndOrderSignedZeros) {
  // Rows of 5, each a case; long rows too, so that the vector loop runs.
  std::vector<std::vector<float>> cases = {{1, 2, 3, 2, 1},
                                           {1, kNan, 3, 2, 1},
                                           {-0.0f, 0.0f, -0.0f, -0.0f, -0.0f},
                                           {-0.0f, -0.0f, -0.0f, -0.0f, -0.0f},
                                           {0.0f, -0.0f, 0, 0, 0},
                                           {-kInf, -kInf, -kInf, -kInf, -kInf},
                                           {kInf, -kInf, 0, 0, 0},
                                           {3, 3, 3, 3, kNan}};
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  for (int c = 0; c < 4; ++c) {
    std::vector<float> row(5);
    for (float& v : row) v = dist(rng);
    cases.push_back(row);
  }
  const int64_t cols = 5, rows = static_cast<int64_t>(cases.size());
  std::vector<float> x;
  for (auto& row : cases) x.insert(x.end(), row.begin(), row.end());
  for (ReduceOp o : {ReduceOp::max, ReduceOp::min}) {
    Kernel k = rowKernel(o == ReduceOp::max ? "kiln_t_max" : "kiln_t_min", DType::f32, DType::f32,
                         {load(0), reduce(o, 0), store(1, 1)});
    auto out = runRows<float>(k, {x.data()}, rows, 1, rowArgs(rows, cols), {2, 3});
    for (int64_t r = 0; r < rows; ++r) {
      float want = cases[r][0];
      for (float v : cases[r]) want = o == ReduceOp::max ? ieeeMax(want, v) : ieeeMin(want, v);
      EXPECT_TRUE(sameBits(out[r], want)) << reduceOpName(o) << " row " << r << ": " << out[r] << " vs " << want;
    }
  }
  // A long row with one NaN deep inside the vector loop.
  std::vector<float> longRow(4099);
  for (size_t i = 0; i < longRow.size(); ++i) longRow[i] = static_cast<float>(i % 97);
  longRow[2049] = kNan;
  Kernel k = rowKernel("kiln_t_max_long", DType::f32, DType::f32, {load(0), reduce(ReduceOp::max, 0), store(1, 1)});
  EXPECT_TRUE(std::isnan(runRows<float>(k, {longRow.data()}, 1, 1, rowArgs(1, 4099))[0]));
  longRow[2049] = 500;
  EXPECT_EQ(runRows<float>(k, {longRow.data()}, 1, 1, rowArgs(1, 4099))[0], 500.0f);
}

TEST(LlvmReduction, ArgmaxIsTheFirstMaximumOrTheFirstNan) {
  std::vector<std::vector<float>> cases = {
      {1, 3, 2, 3, 0},      {1, kNan, 3, kNan, 9}, {-kInf, -kInf, -kInf, -kInf, -kInf},
      {kNan, 1, 2, 3, 4},   {0, 0, 0, 0, 0},       {-1, -2, -3, -4, -0.5f},
      {2, 2, kInf, kInf, 1}};
  const int64_t cols = 5, rows = static_cast<int64_t>(cases.size());
  std::vector<float> x;
  for (auto& row : cases) x.insert(x.end(), row.begin(), row.end());
  Kernel k = rowKernel("kiln_t_argmax", DType::f32, DType::i64,
                       {load(0), reduce(ReduceOp::argmax, 0, DType::i64), store(1, 1, DType::i64)});
  auto out = runRows<int64_t>(k, {x.data()}, rows, 1, rowArgs(rows, cols), {3});
  EXPECT_EQ(out, (std::vector<int64_t>{1, 1, 0, 0, 0, 4, 2}));
  // Integers, with INT_MIN everywhere.
  std::vector<int32_t> xi = {5, -7, 5, 9, 9, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN};
  Kernel ki = rowKernel("kiln_t_argmax_i32", DType::i32, DType::i64,
                        {load(0, DType::i32), reduce(ReduceOp::argmax, 0, DType::i64), store(1, 1, DType::i64)});
  EXPECT_EQ(runRows<int64_t>(ki, {xi.data()}, 2, 1, rowArgs(2, 5)), (std::vector<int64_t>{3, 0}));
}

TEST(LlvmReduction, IntegerAndBoolReductionsAreExact) {
  // i32 summed in i64: no overflow at 2^31.
  std::vector<int32_t> x(3000, INT32_MAX);
  x[5] = -3;
  Kernel k = rowKernel("kiln_t_sum_i32", DType::i32, DType::i64,
                       {load(0, DType::i32), op(Op::cast, {0}, {{"dtype", DType::i64}}, DType::i64),
                        reduce(ReduceOp::sum, 1, DType::i64), store(1, 2, DType::i64)});
  EXPECT_EQ(runRows<int64_t>(k, {x.data()}, 1, 1, rowArgs(1, 3000))[0], int64_t{INT32_MAX} * 2999 - 3);
  // bool: max is or, min is and, a sum counts the trues.
  std::vector<uint8_t> b = {0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1};
  for (auto [o, want] : {std::pair{ReduceOp::max, std::vector<uint8_t>{0, 1, 1}},
                         std::pair{ReduceOp::min, std::vector<uint8_t>{0, 0, 1}}}) {
    Kernel kb = rowKernel(o == ReduceOp::max ? "kiln_t_any" : "kiln_t_all", DType::boolean, DType::boolean,
                          {load(0, DType::boolean), reduce(o, 0, DType::boolean), store(1, 1, DType::boolean)});
    EXPECT_EQ(runRows<uint8_t>(kb, {b.data()}, 3, 1, rowArgs(3, 4)), want) << reduceOpName(o);
  }
  Kernel kc = rowKernel("kiln_t_count", DType::boolean, DType::i64,
                        {load(0, DType::boolean), op(Op::cast, {0}, {{"dtype", DType::i64}}, DType::i64),
                         reduce(ReduceOp::sum, 1, DType::i64), store(1, 2, DType::i64)});
  EXPECT_EQ(runRows<int64_t>(kc, {b.data()}, 3, 1, rowArgs(3, 4)), (std::vector<int64_t>{0, 3, 4}));
}

TEST(LlvmReduction, TwoReducedDimsWithStridesAndTheExtent) {
  // x is [A=3, B=4, C=5] contiguous; reduce A and C (keep B): outer [B],
  // reduced [A, C], strides of x over (B, A, C) = (5, 20, 1). The mean is
  // sum / extent, the extent A * C = 15.
  const int64_t A = 3, B = 4, C = 5;
  std::vector<float> x(static_cast<size_t>(A * B * C));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i * i % 17) - 4.5f;
  Kernel k;
  k.name = "kiln_t_mean_ac";
  k.rank = 3;
  k.reduceRank = 2;
  k.params = {{DType::f32, false, InnerStride::one, false}, {DType::f32, true, InnerStride::zero, true}};
  k.body = {load(0),
            op(Op::cast, {0}, {{"dtype", DType::f64}}, DType::f64),
            reduce(ReduceOp::sum, 1, DType::f64),
            extent(DType::f64),
            op(Op::div, {2, 3}, {}, DType::f64),
            op(Op::cast, {4}, {{"dtype", DType::f32}}, DType::f32),
            store(1, 5)};
  auto out = runRows<float>(k, {x.data()}, B, 1, {B, A, C, 5, 20, 1, 1, 0, 0}, {1, 3});
  for (int64_t b = 0; b < B; ++b) {
    double s = 0;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t c = 0; c < C; ++c) s += x[static_cast<size_t>(a * B * C + b * C + c)];
    EXPECT_EQ(out[b], static_cast<float>(s / 15.0)) << b;
  }
}

TEST(LlvmReduction, ColumnsWithAStridedRow) {
  // Reduce dim 0 of x [R=300, C=3]: outer [C], row [R] with stride C.
  const int64_t R = 300, C = 3;
  std::vector<float> x(static_cast<size_t>(R * C));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1000) * 0.25f;
  Kernel k = sumF32();
  k.name = "kiln_t_sum_cols";
  k.params[0].inner = InnerStride::any;
  auto out = runRows<float>(k, {x.data()}, C, 1, {C, R, 1, C, 1, 0}, {1});
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t r = 0; r < R; ++r) s += x[static_cast<size_t>(r * C + c)];
    EXPECT_EQ(out[c], static_cast<float>(s)) << c;
  }
}

TEST(LlvmReduction, SoftmaxInThreePassesWithARowStore) {
  // m = max(x); s = sum(exp(x - m)); out = exp(x - m) / s, stored along the row.
  Kernel k;
  k.name = "kiln_t_softmax";
  k.rank = 2;
  k.reduceRank = 1;
  k.params = {{DType::f32, false, InnerStride::one, false}, {DType::f32, true, InnerStride::one, false}};
  k.body = {load(0),          reduce(ReduceOp::max, 0), op(Op::sub, {0, 1}),
            op(Op::exp, {2}), reduce(ReduceOp::sum, 3), op(Op::div, {3, 4}),
            store(1, 5)};
  const KernelStages stages = kernelStages(k);
  EXPECT_EQ(stages.numPasses, 3);
  const int64_t rows = 5, cols = 77;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (float& v : x) v = dist(rng);
  auto out = runRows<float>(k, {x.data()}, rows, cols, {rows, cols, cols, 1, cols, 1}, {2});
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(x[r * cols + c]));
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int64_t c = 0; c < cols; ++c) {
      const double want = std::exp(x[r * cols + c] - m) / s;
      EXPECT_NEAR(out[r * cols + c], want, 1e-6 * want + 1e-12) << r << "," << c;
    }
  }
}

TEST(LlvmReduction, OnlyTheAccumulatingFaddIsReassociable) {
  const std::string sum = renderLlvmIr(sumF32(), /*optimized=*/true);
  EXPECT_TRUE(std::regex_search(sum, std::regex(R"(fadd reassoc <\d+ x double>)"))) << sum;
  const std::string max = renderLlvmIr(
      rowKernel("kiln_t_max", DType::f32, DType::f32, {load(0), reduce(ReduceOp::max, 0), store(1, 1)}), true);
  EXPECT_TRUE(std::regex_search(max, std::regex(R"(@llvm\.maximum\.v\d+f32)"))) << max;
  for (const std::string& ir : {sum, max, renderLlvmIr(sumF32(), false)})
    for (const char* flag : {" fast ", " nnan", " ninf", " nsz", " arcp", " contract", " afn"})
      EXPECT_EQ(ir.find(flag), std::string::npos) << "found `" << flag << "`";
  // Unoptimized: reassoc on the accumulating fadd alone.
  const std::string raw = renderLlvmIr(sumF32(), false);
  size_t count = 0;
  for (size_t at = raw.find("reassoc"); at != std::string::npos; at = raw.find("reassoc", at + 1)) ++count;
  EXPECT_EQ(count, 1u) << raw;
}

}  // namespace
}  // namespace kiln::codegen

// Tests of the column tiles of the CPU reduction renderer (Note [Column
// tiles] in codegen/llvm_reduction.cpp): kernels whose rows are columns
// fold a block of neighbouring columns at each row element. Every result
// must equal, bit for bit, a plain sequential loop written here (each
// column added in row order, in the kernel's accumulator dtype): f32 and
// f64 sums, max and min with NaN and signed zeros, sizes that leave tails,
// ranges [begin, end) that split blocks and runs of the innermost outer
// dim, two reduced dims, per-column and per-row operands, epilogue
// operands and outputs of any layout, and strided or transposed inputs
// that must take the row loop. The rendered IR must hold the vectorized
// block loop for a column kernel and none for the others.
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

namespace kiln::codegen {
namespace {

using namespace instr;
using ir::Op;

template <class T>
bool sameBits(T a, T b) {
  if constexpr (std::is_same_v<T, float>)
    return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  else
    return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

/// Runs `k` over output rows [0, rows) in one call and again in the pieces
/// [0, c0), [c0, c1), ... (the thread pool's splits); returns both.
template <class Out>
std::pair<std::vector<Out>, std::vector<Out>> run(const Kernel& k, std::vector<void*> inputs, int64_t rows,
                                                  const std::vector<int64_t>& args, std::vector<int64_t> cuts) {
  return runWholeAndInPieces<Out>(k, std::move(inputs), rows, static_cast<size_t>(rows), args, std::move(cuts));
}

/// Checks both results of run() against `want`, bit for bit (NaN: any NaN).
template <class T>
void expectBits(const std::pair<std::vector<T>, std::vector<T>>& got, const std::vector<T>& want,
                const std::string& what) {
  ASSERT_EQ(got.first.size(), want.size());
  int bad = 0;
  for (size_t c = 0; c < want.size() && bad < 5; ++c) {
    for (const std::vector<T>* out : {&got.first, &got.second}) {
      const T v = (*out)[c];
      const bool ok = std::isnan(want[c]) ? std::isnan(v) : sameBits(v, want[c]);
      if (!ok) ++bad;
      EXPECT_TRUE(ok) << what << ", column " << c << (out == &got.first ? " (one call)" : " (pieces)") << ": " << v
                      << " vs " << want[c];
    }
  }
}

/// sum(x, {0}) of x [R, C] in dtype T (f32 accumulates in f64): outer [C],
/// the row [R]; x's inner stride class `any`.
template <class T>
Kernel columnSum(const std::string& name) {
  constexpr DType d = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  Kernel k;
  k.name = name;
  k.rank = 2;
  k.reduceRank = 1;
  k.params = {{d, false, InnerStride::any, false}, {d, true, InnerStride::zero, true}};
  if constexpr (d == DType::f32)
    k.body = {load(0, d), op(Op::cast, {0}, {{"dtype", DType::f64}}, DType::f64), reduce(ReduceOp::sum, 1, DType::f64),
              op(Op::cast, {2}, {{"dtype", d}}, d), store(1, 3, d)};
  else
    k.body = {load(0, d), reduce(ReduceOp::sum, 0, d), store(1, 1, d)};
  return k;
}

/// The sequential reference: column c of the [R, C] view of `x` at
/// x[r * rowStride + c * colStride], added in row order.
template <class T>
std::vector<T> referenceSums(const std::vector<T>& x, int64_t R, int64_t C, int64_t rowStride, int64_t colStride) {
  using Acc = double;  // f32 and f64 both accumulate in f64
  std::vector<T> out(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    Acc acc = 0;
    for (int64_t r = 0; r < R; ++r) acc += static_cast<Acc>(x[static_cast<size_t>(r * rowStride + c * colStride)]);
    out[static_cast<size_t>(c)] = static_cast<T>(acc);
  }
  return out;
}

/// An [R, C] x whose column sums depend on the order they add in: values
/// of magnitude 2^-20 to 2^10, both signs, and in each column a pair +2^60,
/// -2^60 that cancels exactly, at rows that differ from column to column;
/// what the partial sums lose when they pass 2^60 depends on the order.
template <class T>
std::vector<T> orderSensitive(int64_t R, int64_t C, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> expo(-20, 10);
  std::vector<T> x(static_cast<size_t>(R * C));
  for (T& v : x) v = static_cast<T>(std::ldexp(mant(rng), expo(rng)));
  for (int64_t c = 0; c < C && R >= 2; ++c) {
    const int64_t r1 = (c * 7 + 1) % R, r2 = (r1 + 1 + (c * 13) % (R - 1)) % R;
    x[static_cast<size_t>(r1 * C + c)] = static_cast<T>(std::ldexp(1.0, 60));
    x[static_cast<size_t>(r2 * C + c)] = static_cast<T>(-std::ldexp(1.0, 60));
  }
  return x;
}

template <class T>
void checkColumnSums(const std::string& name) {
  // 999 rows; 1037 columns = 4 blocks of 256 and a block of 13; the pieces
  // cut blocks anywhere and leave pieces shorter than any block (tails).
  const int64_t R = 999, C = 1037;
  const std::vector<T> x = orderSensitive<T>(R, C, 5);
  const std::vector<T> want = referenceSums(x, R, C, C, 1);
  // The sums do depend on the order: reversed, some differ.
  int differ = 0;
  for (int64_t c = 0; c < C; ++c) {
    double acc = 0;
    for (int64_t r = R - 1; r >= 0; --r) acc += static_cast<double>(x[static_cast<size_t>(r * C + c)]);
    differ += !sameBits(static_cast<T>(acc), want[static_cast<size_t>(c)]);
  }
  ASSERT_GT(differ, C / 4) << "the data should make the order visible";
  const Kernel k = columnSum<T>(name);
  expectBits(run<T>(k, {const_cast<T*>(x.data())}, C, {C, R, 1, C, 1, 0}, {3, 5, 300, 301, 777, 1030, 1033}), want,
             name);
}

TEST(ColumnTiles, F32ColumnSumsAddEachColumnInRowOrder) { checkColumnSums<float>("kiln_t_col_sum_f32"); }
TEST(ColumnTiles, F64ColumnSumsAddEachColumnInRowOrder) { checkColumnSums<double>("kiln_t_col_sum_f64"); }

TEST(ColumnTiles, MaxAndMinPropagateNanAndOrderSignedZeros) {
  const int64_t R = 77, C = 300;
  std::mt19937 rng(9);
  std::normal_distribution<float> dist;
  std::vector<float> x(static_cast<size_t>(R * C));
  for (float& v : x) v = dist(rng);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x[static_cast<size_t>(40 * C + 17)] = nan;  // column 17, mid-column
  x[static_cast<size_t>(0 * C + 260)] = nan;  // column 260, first row
  for (int64_t r = 0; r < R; ++r) {           // columns 100 and 101: only zeros
    x[static_cast<size_t>(r * C + 100)] = r % 3 ? -0.0f : 0.0f;
    x[static_cast<size_t>(r * C + 101)] = -0.0f;
  }
  for (ReduceOp o : {ReduceOp::max, ReduceOp::min}) {
    Kernel k;
    k.name = o == ReduceOp::max ? "kiln_t_col_max" : "kiln_t_col_min";
    k.rank = 2;
    k.reduceRank = 1;
    k.params = {{DType::f32, false, InnerStride::any, false}, {DType::f32, true, InnerStride::zero, true}};
    k.body = {load(0), reduce(o, 0), store(1, 1)};
    std::vector<float> want(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      float acc = o == ReduceOp::max ? -INFINITY : INFINITY;
      for (int64_t r = 0; r < R; ++r) {
        const float v = x[static_cast<size_t>(r * C + c)];
        if (std::isnan(acc) || std::isnan(v))
          acc = nan;
        else if (acc == v)
          acc = (std::signbit(acc) == (o == ReduceOp::max)) ? v : acc;
        else
          acc = (o == ReduceOp::max) == (v > acc) ? v : acc;
      }
      want[static_cast<size_t>(c)] = acc;
    }
    ASSERT_TRUE(sameBits(want[100], o == ReduceOp::max ? 0.0f : -0.0f));
    ASSERT_TRUE(sameBits(want[101], -0.0f));
    expectBits(run<float>(k, {x.data()}, C, {C, R, 1, C, 1, 0}, {2, 100, 103, 290}), want, k.name);
  }
}

TEST(ColumnTiles, BlocksStopAtTheEndOfEachRunOfTheInnermostOuterDim) {
  // x [R, A, B] contiguous, summed over dim 0: outer [A, B], x's strides
  // over (A, B, R) are (B, 1, A*B). Runs of B = 21 columns: each a block,
  // and ranges that start and end inside runs.
  const int64_t R = 50, A = 7, B = 21;
  const std::vector<float> x = orderSensitive<float>(R, A * B, 11);
  Kernel k = columnSum<float>("kiln_t_col_sum_runs");
  k.rank = 3;
  const std::vector<float> want = referenceSums(x, R, A * B, A * B, 1);
  expectBits(
      run<float>(k, {const_cast<float*>(x.data())}, A * B, {A, B, R, B, 1, A * B, B, 1, 0}, {10, 30, 35, 63, 64, 100}),
      want, k.name);
}

TEST(ColumnTiles, TwoReducedDimsAreWalkedInRowMajorOrder) {
  // x [R1, R2, C] contiguous, summed over dims 0 and 1: outer [C], the row
  // [R1, R2] (row index r1 * R2 + r2), x's strides over (C, R1, R2) are
  // (1, R2 * C, C).
  const int64_t R1 = 13, R2 = 29, C = 300;
  const std::vector<float> x = orderSensitive<float>(R1 * R2, C, 29);
  Kernel k = columnSum<float>("kiln_t_col_sum_two_dims");
  k.rank = 3;
  k.reduceRank = 2;
  expectBits(run<float>(k, {const_cast<float*>(x.data())}, C, {C, R1, R2, 1, R2 * C, C, 1, 0, 0}, {20, 270}),
             referenceSums(x, R1 * R2, C, C, 1), k.name);
}

TEST(ColumnTiles, StridedAndTransposedInputsTakeTheRowLoop) {
  const int64_t R = 130, C = 70;
  const std::vector<float> x = orderSensitive<float>(R, 2 * C, 13);
  const Kernel k = columnSum<float>("kiln_t_col_sum_views");
  auto* data = const_cast<float*>(x.data());
  // Every other column of an [R, 2C] buffer: the stride along the columns is 2.
  expectBits(run<float>(k, {data}, C, {C, R, 2, 2 * C, 1, 0}, {9, 40}), referenceSums(x, R, C, 2 * C, 2),
             "every other column");
  // The transpose of a contiguous [C, R]: rows contiguous, columns R apart.
  expectBits(run<float>(k, {data}, C, {C, R, R, 1, 1, 0}, {9, 40}), referenceSums(x, R, C, 1, R), "transposed");
  // An output written with a stride of 3 (the epilogue follows it): results
  // at 0, 3, 6, ...
  CompiledCpuKernel compiled = compileCpuKernel(k);
  std::vector<float> out(static_cast<size_t>(3 * C), 7.0f);
  std::vector<void*> buffers = {data, out.data()};
  const std::vector<int64_t> args = {C, R, 1, C, 3, 0};
  compiled.fn(buffers.data(), args.data(), 0, C);
  const std::vector<float> want = referenceSums(x, R, C, C, 1);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_TRUE(sameBits(out[static_cast<size_t>(3 * c)], want[static_cast<size_t>(c)])) << c;
    EXPECT_EQ(out[static_cast<size_t>(3 * c + 1)], 7.0f) << c;
  }
}

TEST(ColumnTiles, PerColumnAndPerRowOperands) {
  // A bias-gradient-like kernel: out[c] = sum_r f64((x[r, c] - m[r]) * w[c]),
  // with m per row of x (contiguous along the row, broadcast across the
  // columns) and w per column (an outer param read by the row values).
  const int64_t R = 301, C = 555;
  const std::vector<float> x = orderSensitive<float>(R, C, 17);
  const std::vector<float> m = orderSensitive<float>(R, 1, 19);
  const std::vector<float> w = orderSensitive<float>(C, 1, 23);
  Kernel k;
  k.name = "kiln_t_col_sum_mw";
  k.rank = 2;
  k.reduceRank = 1;
  k.params = {{DType::f32, false, InnerStride::any, false},
              {DType::f32, false, InnerStride::one, false},
              {DType::f32, false, InnerStride::zero, true},
              {DType::f32, true, InnerStride::zero, true}};
  k.body = {load(0),
            load(1),
            load(2),
            op(Op::sub, {0, 1}),
            op(Op::mul, {3, 2}),
            op(Op::cast, {4}, {{"dtype", DType::f64}}, DType::f64),
            reduce(ReduceOp::sum, 5, DType::f64),
            op(Op::cast, {6}, {{"dtype", DType::f32}}, DType::f32),
            store(3, 7)};
  std::vector<float> want(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    double acc = 0;
    for (int64_t r = 0; r < R; ++r) {
      const float d = x[static_cast<size_t>(r * C + c)] - m[static_cast<size_t>(r)];
      acc += static_cast<double>(d * w[static_cast<size_t>(c)]);
    }
    want[static_cast<size_t>(c)] = static_cast<float>(acc);
  }
  std::vector<void*> in = {const_cast<float*>(x.data()), const_cast<float*>(m.data()), const_cast<float*>(w.data())};
  // args: sizes (C, R); strides x (1, C), m (0, 1), w (1, 0), out (1, 0).
  expectBits(run<float>(k, in, C, {C, R, 1, C, 0, 1, 1, 0, 1, 0}, {4, 260, 261, 549}), want, "tiled");
  // m read with a stride along the columns too (a [C, R] m whose rows are
  // all the same): the launch must take the row loop, with the same sums.
  std::vector<float> mRows;
  for (int64_t c = 0; c < C; ++c) mRows.insert(mRows.end(), m.begin(), m.end());
  in[1] = mRows.data();
  expectBits(run<float>(k, in, C, {C, R, 1, C, R, 1, 1, 0, 1, 0}, {4, 260}), want, "row loop");
}

TEST(ColumnTiles, EpilogueOperandsAndOutputsOfAnyLayout) {
  // An optimizer-like epilogue: out[c] = f32(sum_r x[r, c]) * s + p[c], with
  // s a broadcast scalar (stride 0 along the columns), p read every third
  // element and out written every other one: only the pass's operands must
  // be laid out for blocks, the epilogue follows the launch's strides.
  const int64_t R = 257, C = 300;
  const std::vector<float> x = orderSensitive<float>(R, C, 31);
  const std::vector<float> p = orderSensitive<float>(3 * C, 1, 37);
  const float s = 0.375f;
  Kernel k;
  k.name = "kiln_t_col_sum_epilogue";
  k.rank = 2;
  k.reduceRank = 1;
  k.params = {{DType::f32, false, InnerStride::any, false},
              {DType::f32, false, InnerStride::zero, true},
              {DType::f32, false, InnerStride::zero, true},
              {DType::f32, true, InnerStride::zero, true}};
  k.body = {load(0),
            load(1),
            load(2),
            op(Op::cast, {0}, {{"dtype", DType::f64}}, DType::f64),
            reduce(ReduceOp::sum, 3, DType::f64),
            op(Op::cast, {4}, {{"dtype", DType::f32}}, DType::f32),
            op(Op::mul, {5, 1}),
            op(Op::add, {6, 2}),
            store(3, 7)};
  const std::vector<float> sums = referenceSums(x, R, C, C, 1);
  CompiledCpuKernel compiled = compileCpuKernel(k);
  std::vector<float> out(static_cast<size_t>(2 * C), 7.0f);
  std::vector<void*> buffers = {const_cast<float*>(x.data()), const_cast<float*>(&s), const_cast<float*>(p.data()),
                                out.data()};
  // args: sizes (C, R); strides x (1, C), s (0, 0), p (3, 0), out (2, 0).
  const std::vector<int64_t> args = {C, R, 1, C, 0, 0, 3, 0, 2, 0};
  for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 100}, {100, 103}, {103, C}})
    compiled.fn(buffers.data(), args.data(), b, e);
  for (int64_t c = 0; c < C; ++c) {
    const float want = sums[static_cast<size_t>(c)] * s + p[static_cast<size_t>(3 * c)];
    EXPECT_TRUE(sameBits(out[static_cast<size_t>(2 * c)], want)) << c << ": " << out[2 * c] << " vs " << want;
    EXPECT_EQ(out[static_cast<size_t>(2 * c + 1)], 7.0f) << c;
  }
}

TEST(ColumnTiles, OnlyColumnKernelsGetTheVectorizedBlockLoop) {
  // A column sum: a block loop whose f64 adds are vectors and plain (no
  // reassoc: each lane is one column, added in sequence).
  const std::string col = renderLlvmIr(columnSum<float>("kiln_t_col_ir"), /*optimized=*/true);
  EXPECT_TRUE(std::regex_search(col, std::regex(R"(fadd <\d+ x double>)"))) << col;
  EXPECT_EQ(col.find("reassoc"), std::string::npos) << col;
  EXPECT_NE(renderLlvmIr(columnSum<float>("kiln_t_col_ir"), false).find("tile.columns"), std::string::npos);
  // A row sum (contiguous rows) keeps its vectorized reassoc order, no blocks.
  Kernel row = columnSum<float>("kiln_t_row_ir");
  row.params[0].inner = InnerStride::one;
  EXPECT_EQ(renderLlvmIr(row, false).find("tile."), std::string::npos);
  // Argmax over columns and a two-pass kernel over columns: the row loop.
  Kernel arg = columnSum<float>("kiln_t_col_argmax_ir");
  arg.params[1].dtype = DType::i64;
  arg.body = {load(0), reduce(ReduceOp::argmax, 0, DType::i64), store(1, 1, DType::i64)};
  EXPECT_EQ(renderLlvmIr(arg, false).find("tile."), std::string::npos);
  Kernel twoPass = columnSum<float>("kiln_t_col_center_ir");
  twoPass.body = {load(0), reduce(ReduceOp::max, 0), op(Op::sub, {0, 1}), reduce(ReduceOp::sum, 2), store(1, 3)};
  EXPECT_EQ(renderLlvmIr(twoPass, false).find("tile."), std::string::npos);
}

}  // namespace
}  // namespace kiln::codegen

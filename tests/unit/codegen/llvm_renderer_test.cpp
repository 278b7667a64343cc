// Tests of the CPU backend (codegen/cpu_compiler.h): hand-made Kernels are
// rendered to LLVM IR, JIT-compiled and run on plain float vectors. Results
// must equal ir::evalScalarF32 bit for bit (Note [Eager equals compiled]) for
// every split of the domain the runtime may choose, including mid-row ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "codegen/build_id.h"
#include "codegen/cpu_compiler.h"
#include "codegen/kernel.h"
#include "ir/scalar_eval.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

using Kind = ScalarInstr::Kind;
using namespace instr;
using ir::Op;

KernelParam input(InnerStride inner = InnerStride::one) { return {DType::f32, false, inner}; }
KernelParam output(InnerStride inner = InnerStride::one) { return {DType::f32, true, inner}; }

/// Bitwise equality, with every NaN equal to every other NaN.
bool sameBits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

std::string bitsStr(float v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", static_cast<double>(v), std::bit_cast<uint32_t>(v));
  return buf;
}

float eval(Op o, float a) { return ir::evalScalarF32(o, std::vector<float>{a}); }
float eval(Op o, float a, float b) { return ir::evalScalarF32(o, std::vector<float>{a, b}); }

/// Runs `fn` over [0, numel) in the pieces given by the sorted `cuts`
/// (each cut a begin of the next piece).
void runSplit(const CompiledCpuKernel& k, std::vector<void*> buffers, const std::vector<int64_t>& args,
              std::vector<int64_t> cuts, int64_t numel) {
  cuts.push_back(numel);
  int64_t begin = 0;
  for (int64_t cut : cuts) {
    k.fn(buffers.data(), args.data(), begin, cut);
    begin = cut;
  }
}

/// How many special values open testValues().
constexpr size_t kNumSpecials = 42;

/// Special values first, then exp's rounding ties, ordinary values and
/// random bit patterns.
std::vector<float> testValues(size_t n, uint32_t seed) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float denormMin = std::numeric_limits<float>::denorm_min();
  const float normMin = std::numeric_limits<float>::min();
  const float big = std::numeric_limits<float>::max();
  std::vector<float> v = {0.0f,       -0.0f,      inf,       -inf,        nan,          -nan,       denormMin,
                          -denormMin, normMin,    -normMin,  normMin / 3, -normMin / 3, big,        -big,
                          1e30f,      -1e30f,     1e-30f,    -1e-30f,     1.0f,         -1.0f,      0.5f,
                          -0.5f,      0.625f,     -0.625f,   0.6249999f,  -0.6249999f,  88.72283f,  88.7229f,
                          89.0f,      -87.33654f, -87.3366f, -103.0f,     -104.0f,      20.0f,      -20.0f,
                          9.0f,       -9.0f,      1e-7f,     -1e-7f,      0.34657359f,  1.0397208f, 3.0f};
  EXPECT_EQ(v.size(), kNumSpecials);
  // Inputs whose exp argument reduction x * log2(e) is a tie k + 0.5 in
  // float: rint must round them to even, as the C++ evaluator does.
  const float log2e = static_cast<float>(1.44269504088896341);
  for (int k = -126; k <= 127; ++k) {
    const float tie = static_cast<float>(k) + 0.5f;
    float lo = tie / log2e, hi = lo;
    for (int step = 0; step < 4; ++step) {
      lo = std::nextafter(lo, -INFINITY);
      hi = std::nextafter(hi, INFINITY);
    }
    for (float t = lo; t <= hi; t = std::nextafter(t, INFINITY))
      if (t * log2e == tie) v.push_back(t);
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> small(-10.0f, 10.0f), wide(-200.0f, 200.0f);
  std::uniform_int_distribution<uint32_t> bits;
  while (v.size() < n) {
    switch (v.size() % 4) {
      case 0: v.push_back(small(rng)); break;
      case 1: v.push_back(wide(rng)); break;
      case 2: v.push_back(std::bit_cast<float>(bits(rng))); break;
      case 3: v.push_back(small(rng) * 1e-3f); break;
    }
  }
  v.resize(n);
  return v;
}

/// out[k] = op_k(x) or op_k(x, y) for every elementwise op, plus one long chain.
struct ElementwiseCase {
  Kernel kernel;
  std::vector<Op> unary = {Op::neg, Op::relu, Op::exp, Op::log, Op::sqrt, Op::tanh, Op::sigmoid};
  std::vector<Op> binary = {Op::add, Op::sub, Op::mul, Op::div, Op::maximum, Op::minimum};
  int numOutputs() const { return static_cast<int>(unary.size() + binary.size()) + 1; }

  ElementwiseCase() {
    kernel.name = "kiln_test_elementwise";
    kernel.rank = 1;
    kernel.params = {input(), input()};
    for (int i = 0; i < numOutputs(); ++i) kernel.params.push_back(output());
    auto& body = kernel.body;
    auto emit = [&](ScalarInstr s) {
      body.push_back(std::move(s));
      return static_cast<int>(body.size()) - 1;
    };
    const int x = emit(load(0)), y = emit(load(1));
    int out = 2;
    for (Op o : unary) emit(store(out++, emit(op(o, {x}))));
    for (Op o : binary) emit(store(out++, emit(op(o, {x, y}))));
    // The chain: relu(x + 0.5) -> exp -> log -> tanh -> sigmoid -> sqrt -> maximum(., y) -> minimum(., y).
    int v = emit(op(Op::add, {x, emit(constant(0.5))}));
    for (Op o : {Op::relu, Op::exp, Op::log, Op::tanh, Op::sigmoid, Op::sqrt}) v = emit(op(o, {v}));
    v = emit(op(Op::maximum, {v, y}));
    v = emit(op(Op::minimum, {v, y}));
    emit(store(out, v));
  }

  float reference(int output, float x, float y) const {
    const int u = static_cast<int>(unary.size()), b = static_cast<int>(binary.size());
    if (output < u) return eval(unary[output], x);
    if (output < u + b) return eval(binary[output - u], x, y);
    float v = eval(Op::add, x, 0.5f);
    for (Op o : {Op::relu, Op::exp, Op::log, Op::tanh, Op::sigmoid, Op::sqrt}) v = eval(o, v);
    return eval(Op::minimum, eval(Op::maximum, v, y), y);
  }
};

TEST(LlvmRenderer, ElementwiseOpsMatchTheScalarEvaluatorBitForBit) {
  ElementwiseCase c;
  const int64_t n = 10007;
  std::vector<float> x = testValues(static_cast<size_t>(n), 1);
  std::vector<float> y = testValues(static_cast<size_t>(n), 2);
  // Pair every special value with every other one, so that maximum(-0, +0),
  // maximum(x, NaN) and friends all occur.
  for (size_t i = 0; i < kNumSpecials; ++i)
    for (size_t j = 0; j < kNumSpecials; ++j) {
      x[2000 + i * kNumSpecials + j] = x[i];
      y[2000 + i * kNumSpecials + j] = x[j];
    }

  CompiledCpuKernel k = compileCpuKernel(c.kernel);
  ASSERT_NE(k.fn, nullptr);
  std::cout << "compile time of a " << c.kernel.body.size() << "-instruction kernel: " << k.compileMs << " ms\n";

  std::vector<std::vector<float>> outs(static_cast<size_t>(c.numOutputs()),
                                       std::vector<float>(static_cast<size_t>(n), 12345.0f));
  std::vector<void*> buffers = {x.data(), y.data()};
  for (auto& o : outs) buffers.push_back(o.data());
  std::vector<int64_t> args = {n};
  for (size_t p = 0; p < buffers.size(); ++p) args.push_back(1);
  // Odd pieces: some start and end off any vector boundary.
  runSplit(k, buffers, args, {0, 3, 4, 1001, 5000, 9999}, n);

  for (int o = 0; o < c.numOutputs(); ++o) {
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = c.reference(o, x[i], y[i]), got = outs[o][i];
      if (!sameBits(want, got) && ++mismatches <= 5)
        ADD_FAILURE() << "output " << o << " at " << i << ": x=" << bitsStr(x[i]) << " y=" << bitsStr(y[i]) << " want "
                      << bitsStr(want) << " got " << bitsStr(got);
    }
    EXPECT_EQ(mismatches, 0) << "output " << o;
  }
}

TEST(LlvmRenderer, EmptyRangeWritesNothing) {
  ElementwiseCase c;
  CompiledCpuKernel k = compileCpuKernel(c.kernel);
  std::vector<float> x(8, 1.0f), y(8, 2.0f);
  std::vector<std::vector<float>> outs(static_cast<size_t>(c.numOutputs()), std::vector<float>(8, 7.0f));
  std::vector<void*> buffers = {x.data(), y.data()};
  for (auto& o : outs) buffers.push_back(o.data());
  std::vector<int64_t> args(1 + buffers.size(), 1);
  args[0] = 8;
  k.fn(buffers.data(), args.data(), 3, 3);
  k.fn(buffers.data(), args.data(), 5, 2);
  for (auto& o : outs)
    for (float v : o) EXPECT_EQ(v, 7.0f);
}

/// x[.., ..] + b over a rank-2 or rank-3 domain; `bStrides` says how b is broadcast.
struct BroadcastAdd {
  std::vector<int64_t> sizes;
  std::vector<int64_t> bStrides;
  InnerStride bInner;
};

void checkBroadcastAdd(const BroadcastAdd& c, const std::vector<std::vector<int64_t>>& splits) {
  const int rank = static_cast<int>(c.sizes.size());
  Kernel kernel;
  kernel.name = "kiln_test_broadcast_add_" + std::to_string(rank) + "_" + std::to_string(static_cast<int>(c.bInner));
  kernel.rank = rank;
  kernel.params = {input(), input(c.bInner), output()};
  kernel.body = {load(0), load(1), op(Op::add, {0, 1}), store(2, 2)};
  CompiledCpuKernel k = compileCpuKernel(kernel);

  int64_t numel = 1, bExtent = 1;
  std::vector<int64_t> contiguous(static_cast<size_t>(rank));
  for (int d = rank - 1; d >= 0; --d) {
    contiguous[d] = numel;
    numel *= c.sizes[d];
    bExtent += (c.sizes[d] - 1) * c.bStrides[d];
  }
  std::vector<float> x(static_cast<size_t>(numel)), b(static_cast<size_t>(bExtent));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1000.0f * static_cast<float>(i + 1);
  std::vector<float> want(x.size());
  for (int64_t flat = 0; flat < numel; ++flat) {
    int64_t rem = flat, bOff = 0;
    for (int d = rank - 1; d >= 0; --d) {
      bOff += (rem % c.sizes[d]) * c.bStrides[d];
      rem /= c.sizes[d];
    }
    want[flat] = x[flat] + b[bOff];
  }

  std::vector<int64_t> args = c.sizes;
  args.insert(args.end(), contiguous.begin(), contiguous.end());
  args.insert(args.end(), c.bStrides.begin(), c.bStrides.end());
  args.insert(args.end(), contiguous.begin(), contiguous.end());
  for (const auto& cuts : splits) {
    std::vector<float> out(x.size(), -1.0f);
    runSplit(k, {x.data(), b.data(), out.data()}, args, cuts, numel);
    int mismatches = 0;
    for (int64_t i = 0; i < numel; ++i)
      if (out[i] != want[i] && ++mismatches <= 5)
        ADD_FAILURE() << kernel.name << " split " << ::testing::PrintToString(cuts) << " at " << i << ": want "
                      << want[i] << " got " << out[i];
    EXPECT_EQ(mismatches, 0) << kernel.name << " split " << ::testing::PrintToString(cuts);
  }
}

/// Fixed splits plus random ones (sorted cut points in (0, numel)).
std::vector<std::vector<int64_t>> splitsFor(int64_t numel, std::vector<std::vector<int64_t>> fixed) {
  std::mt19937 rng(7);
  for (int s = 0; s < 20; ++s) {
    std::uniform_int_distribution<int64_t> at(0, numel);
    std::vector<int64_t> cuts(static_cast<size_t>(1 + s % 6));
    for (auto& cut : cuts) cut = at(rng);
    std::sort(cuts.begin(), cuts.end());
    fixed.push_back(cuts);
  }
  // Element by element near the start: every begin is its own mid-row start.
  std::vector<int64_t> ones;
  for (int64_t i = 1; i < std::min<int64_t>(numel, 120); ++i) ones.push_back(i);
  fixed.push_back(ones);
  return fixed;
}

TEST(LlvmRenderer, RowBroadcastWithMidRowSplits) {
  // x[37,53] + b[53]: b's outer stride is 0, its inner stride 1.
  checkBroadcastAdd({{37, 53}, {0, 1}, InnerStride::one}, splitsFor(37 * 53, {{}, {0, 17, 100, 1961}, {52, 53, 54}}));
}

TEST(LlvmRenderer, ColumnBroadcastWithMidRowSplits) {
  // x[37,53] + c[37,1]: c's inner stride is 0.
  checkBroadcastAdd({{37, 53}, {1, 0}, InnerStride::zero}, splitsFor(37 * 53, {{}, {0, 17, 100, 1961}, {52, 53, 54}}));
}

TEST(LlvmRenderer, Rank3CarriesAcrossTwoDimensions) {
  // x[5,7,11] + y[5,1,11]: a split that ends a row, and one crossing a plane.
  checkBroadcastAdd({{5, 7, 11}, {11, 0, 1}, InnerStride::one}, splitsFor(5 * 7 * 11, {{}, {11, 76, 77, 78}, {70}}));
  checkBroadcastAdd({{5, 7, 11}, {1, 0, 0}, InnerStride::zero}, splitsFor(5 * 7 * 11, {{}, {76, 300}}));
}

TEST(LlvmRenderer, InnerStrideAnyReadsTheStrideArgument) {
  // out[R,C] = 2 * x^T with x stored as [C,R]: x's inner stride is R.
  const int64_t rows = 19, cols = 23;
  Kernel kernel;
  kernel.name = "kiln_test_transpose";
  kernel.rank = 2;
  kernel.params = {input(InnerStride::any), output()};
  kernel.body = {load(0), constant(2.0), op(Op::mul, {0, 1}), store(1, 2)};
  CompiledCpuKernel k = compileCpuKernel(kernel);

  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<int64_t> args = {rows, cols, 1, rows, cols, 1};
  for (const auto& cuts : splitsFor(rows * cols, {{}, {5, 30, 400}})) {
    std::vector<float> out(x.size(), -1.0f);
    runSplit(k, {x.data(), out.data()}, args, cuts, rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(out[r * cols + c], 2.0f * x[c * rows + r]) << "at " << r << "," << c;
  }
}

TEST(LlvmRenderer, OptimizedInnerLoopIsVectorizedWithoutOverlapChecks) {
  Kernel kernel;
  kernel.name = "kiln_test_vectorize";
  kernel.rank = 1;
  kernel.params = {input(), input(), output()};
  kernel.body = {load(0), load(1), op(Op::add, {0, 1}), op(Op::exp, {2}), op(Op::maximum, {3, 1}), store(2, 4)};

  const std::string plain = renderLlvmIr(kernel, false);
  EXPECT_NE(plain.find("define void @kiln_test_vectorize(ptr"), std::string::npos) << plain;
  EXPECT_NE(plain.find("noalias"), std::string::npos) << plain;

  const std::string ir = renderLlvmIr(kernel, true);
  EXPECT_TRUE(std::regex_search(ir, std::regex("<(4|8|16) x float>"))) << ir;
  // noalias reached the vectorizer: it needed no runtime overlap check.
  EXPECT_EQ(ir.find("vector.memcheck"), std::string::npos) << ir;
  // No FMA and no fast-math flag, or eager and compiled would differ.
  for (const char* banned : {"fmuladd", "llvm.fma", " contract ", " reassoc ", " fast ", " afn "})
    EXPECT_EQ(ir.find(banned), std::string::npos) << banned << " in\n" << ir;
}

TEST(LlvmRenderer, ReportsCompileTime) {
  // Ten ops in a chain, as a small fused group would be.
  Kernel kernel;
  kernel.name = "kiln_test_ten_ops";
  kernel.rank = 1;
  kernel.params = {input(), input(), output()};
  kernel.body = {load(0), load(1), constant(0.5)};
  int v = 0;
  for (Op o :
       {Op::add, Op::relu, Op::exp, Op::log, Op::tanh, Op::sigmoid, Op::sqrt, Op::neg, Op::maximum, Op::minimum}) {
    const bool binary = ir::opInfo(o).arity == 2;
    kernel.body.push_back(op(o, binary ? std::vector<int>{v, o == Op::add ? 2 : 1} : std::vector<int>{v}));
    v = static_cast<int>(kernel.body.size()) - 1;
  }
  kernel.body.push_back(store(2, v));
  CompiledCpuKernel k = compileCpuKernel(kernel);
  EXPECT_GT(k.compileMs, 0.0);
  std::cout << "compile time of a 10-op kernel: " << k.compileMs << " ms\n";
}

Kernel validKernel() {
  Kernel kernel;
  kernel.name = "kiln_test_broken";
  kernel.rank = 1;
  kernel.params = {input(), output()};
  kernel.body = {load(0), op(Op::relu, {0}), store(1, 1)};
  return kernel;
}

TEST(LlvmRenderer, MalformedKernelsThrowInsteadOfCrashing) {
  ASSERT_NO_THROW(compileCpuKernel(validKernel()));
  auto expectBug = [](Kernel kernel, const char* what) {
    try {
      compileCpuKernel(kernel);
      ADD_FAILURE() << what << ": no exception";
    } catch (const InternalError& e) {
      EXPECT_NE(std::string(e.what()).find("kiln bug"), std::string::npos) << e.what();
      if (kernel.name == "kiln_test_broken") {
        EXPECT_NE(std::string(e.what()).find("kiln_test_broken"), std::string::npos) << e.what();
      }
    }
  };
  Kernel k = validKernel();
  k.body[1].operands = {5};
  expectBug(k, "operand out of range");
  k = validKernel();
  k.body[1].operands = {1};
  expectBug(k, "operand refers to itself");
  k = validKernel();
  k.body[1].operands = {0, 0};
  expectBug(k, "wrong arity");
  k = validKernel();
  k.body[2].param = 0;
  expectBug(k, "store to an input");
  k = validKernel();
  k.body[0].param = 7;
  expectBug(k, "load of a missing param");
  k = validKernel();
  k.body.push_back(store(1, 2));
  expectBug(k, "store of a store");
  k = validKernel();
  k.params[0].dtype = DType::f64;
  expectBug(k, "f64 param");
  k = validKernel();
  k.body[1].op = Op::fusion;
  expectBug(k, "fusion has no formula");
  k = validKernel();
  k.rank = 0;
  expectBug(k, "rank 0");
  k = validKernel();
  k.name = "not an identifier";
  expectBug(k, "bad name");
  EXPECT_THROW(renderLlvmIr(k), InternalError);
}

TEST(LlvmRenderer, CompilesFromSeveralThreadsAndUnloads) {
  // The same name from every thread: each kernel has its own JITDylib.
  std::vector<CompiledCpuKernel> compiled(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < compiled.size(); ++t)
    threads.emplace_back([&, t] { compiled[t] = compileCpuKernel(validKernel()); });
  for (auto& t : threads) t.join();
  for (auto& k : compiled) {
    std::vector<float> x = {-1.0f, 2.0f, -0.0f}, out(3, 9.0f);
    std::vector<void*> buffers = {x.data(), out.data()};
    std::vector<int64_t> args = {3, 1, 1};
    k.fn(buffers.data(), args.data(), 0, 3);
    EXPECT_EQ(out, (std::vector<float>{0.0f, 2.0f, 0.0f}));
  }
  compiled.clear();  // unloads all four
  CompiledCpuKernel again = compileCpuKernel(validKernel());
  EXPECT_NE(again.fn, nullptr);
}

TEST(LlvmRenderer, TargetDescriptionNamesLlvmAndTheCpu) {
  const std::string d = cpuTargetDescription();
  EXPECT_EQ(d.rfind("LLVM 19.", 0), 0u) << d;
  EXPECT_NE(d.find('+'), std::string::npos) << d;  // some enabled feature
  EXPECT_EQ(d, cpuTargetDescription());
}

}  // namespace
}  // namespace kiln::codegen

namespace kiln::codegen {
namespace {

TEST(DiskKeys, ABuildWithAnIdKeysKernelsBySignatureWithoutRendering) {
  // This build is linked with a GNU build ID (Debian's default): 20 bytes
  // of SHA-1 as hex.
  const std::string& id = codegenBuildId();
  ASSERT_EQ(id.size(), 40u) << id;
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  const Kernel k = validKernel();
  const std::string key = cpuKernelCacheKey(k);
  EXPECT_EQ(key.rfind("cpu\n" + cpuTargetDescription() + "\n", 0), 0u) << "the device kind, then the target" << key;
  EXPECT_NE(key.find("kiln build " + id + "\n"), std::string::npos) << key;
  EXPECT_NE(key.find(k.str()), std::string::npos) << key;
  // Kernels that differ in anything the renderers read differ in key.
  Kernel other = k;
  other.params[0].inner = InnerStride::any;
  EXPECT_NE(cpuKernelCacheKey(other), key);
  EXPECT_EQ(cpuKernelCacheKey(validKernel()), key);
}

}  // namespace
}  // namespace kiln::codegen

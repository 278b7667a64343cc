// The CPU backend on every dtype: each elementwise op on each dtype it takes
// and cast between every pair of dtypes, JIT-compiled and run over special
// and random values, must equal the C++ evaluator bit for bit (Note [Eager
// equals compiled]); every f16 and bf16 bit pattern loads and stores
// exactly; a fused chain with f16 intermediates rounds after every op, as
// the evaluator does one op at a time.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "codegen/cpu_compiler.h"
#include "codegen/kernel.h"
#include "ir/scalar_eval.h"
#include "unit/codegen/dtype_cases.h"

namespace kiln::codegen {
namespace {

using namespace instr;
using namespace testing;
using ir::Op;

/// Runs `k` (rank 1, contiguous) over `n` elements in a few uneven pieces.
void run(const Kernel& k, std::vector<Buffer>& buffers, int64_t n) {
  CompiledCpuKernel compiled = compileCpuKernel(k);
  std::vector<void*> pointers;
  for (Buffer& b : buffers) pointers.push_back(b.data());
  std::vector<int64_t> args = {n};
  for (size_t p = 0; p < buffers.size(); ++p) args.push_back(1);
  int64_t begin = 0;
  for (int64_t cut : {int64_t{3}, n / 3, n / 2 + 1, n}) {
    cut = std::min(cut, n);
    compiled.fn(pointers.data(), args.data(), begin, cut);
    begin = cut;
  }
}

TEST(LlvmDTypes, EveryOpOnEveryDTypeEqualsTheEvaluator) {
  const size_t n = 1501;
  int kernels = 0;
  for (const OpCase& c : allOpCases()) {
    const Kernel k = oneOpKernel(c);
    std::vector<Buffer> buffers;
    for (size_t i = 0; i < c.in.size(); ++i) buffers.push_back(testElements(c.in[i], n, static_cast<uint32_t>(i + 1)));
    // Pair the first special values of the inputs with each other.
    if (c.in.size() >= 2 && c.in[0] == c.in[1]) {
      const size_t size = static_cast<size_t>(itemSize(c.in[0]));
      for (size_t a = 0; a < 20; ++a)
        for (size_t b = 0; b < 20; ++b) {
          std::memcpy(buffers[0].data() + (200 + a * 20 + b) * size, buffers[0].data() + a * size, size);
          std::memcpy(buffers[1].data() + (200 + a * 20 + b) * size, buffers[0].data() + b * size, size);
        }
    }
    buffers.push_back(Buffer(n * static_cast<size_t>(itemSize(c.out)), 0xcd));
    run(k, buffers, static_cast<int64_t>(n));
    Buffer want(buffers.back().size());
    int mismatches = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<ir::ScalarValue> in;
      for (size_t p = 0; p < c.in.size(); ++p) in.push_back(readElement(buffers[p], c.in[p], i));
      writeElement(want, i, ir::evalScalar(c.op, in, c.attrs));
      if (!sameElement(want, buffers.back(), c.out, i) && ++mismatches <= 3) {
        std::string inputs;
        for (size_t p = 0; p < c.in.size(); ++p) inputs += " " + elementStr(buffers[p], c.in[p], i);
        ADD_FAILURE() << c.label << " at " << i << " of" << inputs << ": want " << elementStr(want, c.out, i)
                      << ", got " << elementStr(buffers.back(), c.out, i);
      }
    }
    EXPECT_EQ(mismatches, 0) << c.label;
    ++kernels;
  }
  std::cout << "[ info ] " << kernels << " one-op kernels checked\n";
  EXPECT_GT(kernels, 100);
}

TEST(LlvmDTypes, EveryHalfBitPatternLoadsAndStoresExactly) {
  for (DType d : {DType::f16, DType::bf16}) {
    const size_t n = 65536;
    Kernel k;
    k.name = "kiln_test_half_roundtrip";
    k.rank = 1;
    k.params = {{d, false, InnerStride::one}, {DType::f32, true, InnerStride::one}, {d, true, InnerStride::one}};
    k.body = {load(0, d), op(Op::cast, {0}, {{"dtype", DType::f32}}, DType::f32), store(1, 1, DType::f32),
              store(2, 0, d)};
    std::vector<Buffer> buffers = {Buffer(2 * n), Buffer(4 * n), Buffer(2 * n)};
    for (size_t i = 0; i < n; ++i) std::memcpy(buffers[0].data() + 2 * i, &i, 2);
    run(k, buffers, static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const auto bits = static_cast<uint16_t>(i);
      const float want = d == DType::f16 ? f16BitsToF32(bits) : bf16BitsToF32(bits);
      uint32_t got;
      std::memcpy(&got, buffers[1].data() + 4 * i, 4);
      ASSERT_EQ(got, std::bit_cast<uint32_t>(want)) << dtypeName(d) << " bits " << std::hex << i;
      uint16_t back;
      std::memcpy(&back, buffers[2].data() + 2 * i, 2);
      ASSERT_EQ(back, bits) << dtypeName(d) << " stores what it loaded, NaN payloads too";
    }
  }
}

TEST(LlvmDTypes, FusedHalfChainRoundsAfterEveryOp) {
  // y = f16(x) * 3 -> exp -> + f16(n) -> f32 -> where(y > 1.5, y, x * 0.1), and y as f16.
  Kernel k;
  k.name = "kiln_test_half_chain";
  k.rank = 1;
  k.params = {{DType::f32, false, InnerStride::one},
              {DType::i32, false, InnerStride::one},
              {DType::f32, true, InnerStride::one},
              {DType::f16, true, InnerStride::one}};
  const DType h = DType::f16, f = DType::f32;
  k.body = {
      load(0, f),                              // 0 x
      load(1, DType::i32),                     // 1 n
      op(Op::cast, {0}, {{"dtype", h}}, h),    // 2
      constant(3.0, h),                        // 3
      op(Op::mul, {2, 3}, {}, h),              // 4
      op(Op::exp, {4}, {}, h),                 // 5
      op(Op::cast, {1}, {{"dtype", h}}, h),    // 6
      op(Op::add, {5, 6}, {}, h),              // 7
      op(Op::cast, {7}, {{"dtype", f}}, f),    // 8
      constant(1.5, f),                        // 9
      op(Op::gt, {8, 9}, {}, DType::boolean),  // 10
      constant(0.1, f),                        // 11
      op(Op::mul, {0, 11}, {}, f),             // 12
      op(Op::where, {10, 8, 12}, {}, f),       // 13
      store(2, 13, f),
      store(3, 7, h),
  };
  const size_t n = 4099;
  std::vector<Buffer> buffers = {testElements(f, n, 7), testElements(DType::i32, n, 8), Buffer(4 * n), Buffer(2 * n)};
  run(k, buffers, static_cast<int64_t>(n));
  using ir::ScalarValue;
  auto ev = [](Op o, std::vector<ScalarValue> in, ir::Attributes a = {}) { return ir::evalScalar(o, in, a); };
  Buffer want0(4 * n), want1(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const ScalarValue x = readElement(buffers[0], f, i), m = readElement(buffers[1], DType::i32, i);
    const ScalarValue xh = ev(Op::cast, {x}, {{"dtype", h}});
    const ScalarValue e = ev(Op::exp, {ev(Op::mul, {xh, ScalarValue::of(h, 3.0)})});
    const ScalarValue s = ev(Op::add, {e, ev(Op::cast, {m}, {{"dtype", h}})});
    const ScalarValue y = ev(Op::cast, {s}, {{"dtype", f}});
    const ScalarValue r =
        ev(Op::where, {ev(Op::gt, {y, ScalarValue::of(f, 1.5)}), y, ev(Op::mul, {x, ScalarValue::of(f, 0.1)})});
    writeElement(want0, i, r);
    writeElement(want1, i, s);
    ASSERT_TRUE(sameElement(want0, buffers[2], f, i))
        << "at " << i << ": " << elementStr(want0, f, i) << " vs " << elementStr(buffers[2], f, i);
    ASSERT_TRUE(sameElement(want1, buffers[3], h, i)) << "at " << i;
  }
}

TEST(LlvmDTypes, IntegerKernelsHaveNoOverflowFlags) {
  // Wrapping arithmetic: an `nsw` would let LLVM assume overflow away.
  for (DType d : {DType::i32, DType::i64}) {
    Kernel k = oneOpKernel({Op::add, {d, d}, d, {}, "add"});
    const std::string ir = renderLlvmIr(k);
    EXPECT_NE(ir.find(" = add "), std::string::npos) << ir;
    EXPECT_EQ(ir.find("add nsw i" + std::string(d == DType::i32 ? "32" : "64") + " %v"), std::string::npos) << ir;
  }
  const std::string cast =
      renderLlvmIr(oneOpKernel({Op::cast, {DType::f32}, DType::i32, {{"dtype", DType::i32}}, "c"}));
  EXPECT_NE(cast.find("llvm.fptosi.sat.i32.f32"), std::string::npos) << cast;
}

}  // namespace
}  // namespace kiln::codegen

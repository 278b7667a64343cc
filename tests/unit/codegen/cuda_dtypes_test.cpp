// The CUDA C renderer on every dtype: the parameter types of the ABI, the
// f16/bf16 conversions written into the source (no header, no cuda_fp16),
// saturating casts and wrapping integers spelled out, and every kernel kind
// of dtype_cases.h (each op on each dtype, cast between every pair, a fused
// chain with f16 intermediates) compiled by NVRTC for sm_90. The compile
// tests skip, with the reason, where kiln was built without NVRTC. (Running
// them needs the CUDA runtime, which does not exist yet; the CPU renderer
// tests check the values.)
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "codegen/cuda_renderer.h"
#include "codegen/nvrtc_compiler.h"
#include "unit/codegen/dtype_cases.h"

namespace kiln::codegen {
namespace {

using namespace instr;
using namespace testing;
using ir::Op;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// `src` without its // comments.
std::string codeOnly(const std::string& src) {
  std::string code;
  size_t at = 0;
  while (at < src.size()) {
    size_t end = src.find('\n', at);
    if (end == std::string::npos) end = src.size();
    const std::string line = src.substr(at, end - at);
    code += line.substr(0, line.find("//")) + "\n";
    at = end + 1;
  }
  return code;
}

Kernel halfChainKernel() {
  Kernel k;
  k.name = "kiln_test_half_chain";
  k.rank = 2;
  const DType h = DType::f16, f = DType::f32;
  k.params = {{f, false, InnerStride::one},
              {DType::i32, false, InnerStride::zero},
              {DType::bf16, false, InnerStride::any},
              {f, true, InnerStride::one},
              {h, true, InnerStride::one},
              {DType::boolean, true, InnerStride::one}};
  k.body = {
      load(0, f),
      load(1, DType::i32),
      load(2, DType::bf16),
      op(Op::cast, {0}, {{"dtype", h}}, h),     // 3
      constant(3.0, h),                         // 4
      op(Op::mul, {3, 4}, {}, h),               // 5
      op(Op::exp, {5}, {}, h),                  // 6
      op(Op::cast, {1}, {{"dtype", h}}, h),     // 7
      op(Op::add, {6, 7}, {}, h),               // 8
      op(Op::cast, {8}, {{"dtype", f}}, f),     // 9
      op(Op::cast, {2}, {{"dtype", f}}, f),     // 10
      op(Op::gt, {9, 10}, {}, DType::boolean),  // 11
      op(Op::where, {11, 9, 10}, {}, f),        // 12
      store(3, 12, f),
      store(4, 8, h),
      store(5, 11, DType::boolean),
  };
  return k;
}

TEST(CudaDTypes, ParametersHaveTheStorageTypeOfTheirDType) {
  const std::string src = renderCudaC(halfChainKernel());
  EXPECT_TRUE(contains(src,
                       "(const float* __restrict__ p0, const int* __restrict__ p1, const unsigned short* __restrict__ "
                       "p2, float* __restrict__ p3, unsigned short* __restrict__ p4, unsigned char* __restrict__ p5, "))
      << src;
  EXPECT_TRUE(contains(src, "p4[o4] = (unsigned short)")) << src;
  EXPECT_TRUE(contains(src, "p5[o5] = (unsigned char)")) << src;
  const std::string f64 = renderCudaC(oneOpKernel({Op::exp, {DType::f64}, DType::f64, {}, "exp_f64"}));
  EXPECT_TRUE(contains(f64, "(const double* __restrict__ p0, double* __restrict__ p1, ")) << f64;
  EXPECT_TRUE(contains(f64, "__longlong_as_double(")) << f64;
  const std::string i64 = renderCudaC(oneOpKernel({Op::mul, {DType::i64, DType::i64}, DType::i64, {}, "mul_i64"}));
  EXPECT_TRUE(contains(i64, "const long long* __restrict__ p0")) << i64;
}

TEST(CudaDTypes, NoHeadersNoHalfLibraryNoUndefinedConversions) {
  for (const Kernel& k : {halfChainKernel(), oneOpKernel({Op::add, {DType::i32, DType::i32}, DType::i32, {}, "a"}),
                          oneOpKernel({Op::cast, {DType::f64}, DType::i64, {{"dtype", DType::i64}}, "c"})}) {
    const std::string code = codeOnly(renderCudaC(k));
    for (const char* banned : {"#include", "__half", "__float2half", "__nv_bfloat16", "fma", "expf(", "exp("})
      EXPECT_FALSE(contains(code, banned)) << "found `" << banned << "` in\n" << code;
  }
  // Integer arithmetic wraps through unsigned; float -> int saturates by compares.
  const std::string add = renderCudaC(oneOpKernel({Op::add, {DType::i32, DType::i32}, DType::i32, {}, "a"}));
  EXPECT_TRUE(contains(add, "(int)((unsigned)v0 + (unsigned)v1)")) << add;
  const std::string sat = renderCudaC(oneOpKernel({Op::cast, {DType::f32}, DType::i32, {{"dtype", DType::i32}}, "c"}));
  EXPECT_TRUE(contains(sat, "v0 != v0 ? 0 : v0 >= 0x1p31f ? 2147483647 : v0 <= -0x1p31f ? (int)0x80000000u : (int)v0"))
      << sat;
}

TEST(CudaDTypes, EveryKernelKindCompilesForSm90) {
  std::string why;
  if (!nvrtcAvailable(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  // One program per operand dtype (faster than one per kernel); each kernel
  // is extern "C" with its own name and argument struct.
  std::map<std::string, std::string> programs;
  std::map<std::string, int> counts;
  for (const OpCase& c : allOpCases()) {
    const std::string key(dtypeName(c.in[0]));
    programs[key] += renderCudaC(oneOpKernel(c)) + "\n";
    counts[key]++;
  }
  programs["chain"] = renderCudaC(halfChainKernel());
  counts["chain"] = 1;
  for (const auto& [key, src] : programs) {
    const CudaBinary bin = compileCudaToCubin(src, "kiln_dtypes_" + key, 90);
    ASSERT_GT(bin.cubin.size(), 4u) << key;
    EXPECT_EQ(bin.log, "") << key << ": NVRTC warned";
    EXPECT_EQ(std::string(bin.cubin.begin(), bin.cubin.begin() + 4),
              "\x7f"
              "ELF")
        << key;
    const std::string image(bin.cubin.begin(), bin.cubin.end());
    for (const OpCase& c : allOpCases())
      if (key == std::string(dtypeName(c.in[0]))) {
        EXPECT_TRUE(contains(image, "kiln_test_" + c.label)) << c.label;
      }
    std::cout << "[ info ] " << counts[key] << " kernel(s) on " << key << ": sm_90 cubin of " << bin.cubin.size()
              << " bytes in " << bin.compileMs << " ms\n";
  }
}

}  // namespace
}  // namespace kiln::codegen

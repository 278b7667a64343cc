// Tests of the CUDA C renderer and the NVRTC compile: hand-made Kernels are
// rendered, their text is checked for the ABI and for what must never appear
// (FMA, device math library calls), and they are compiled to cubins. The
// compile tests skip, with the reason, where kiln was built without NVRTC.
#include "codegen/cuda_renderer.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/nvrtc_compiler.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

using Kind = ScalarInstr::Kind;
using namespace instr;

/// out = chain of every elementwise op over x, y (rank 1, contiguous).
Kernel everyOpKernel() {
  Kernel k;
  k.name = "kiln_every_op";
  k.rank = 1;
  k.params = {{DType::f32, false, InnerStride::one},
              {DType::f32, false, InnerStride::one},
              {DType::f32, true, InnerStride::one}};
  using ir::Op;
  const ir::Attributes tanhForm = {{"approximate", int64_t{1}}};
  k.body = {
      load(0),                                 // %0 x
      load(1),                                 // %1 y
      op(Op::add, {0, 1}),                     // %2
      op(Op::sub, {2, 1}),                     // %3
      op(Op::mul, {3, 0}),                     // %4
      op(Op::div, {4, 1}),                     // %5
      op(Op::maximum, {5, 0}),                 // %6
      op(Op::minimum, {6, 1}),                 // %7
      op(Op::neg, {7}),                        // %8
      op(Op::relu, {8}),                       // %9
      op(Op::exp, {9}),                        // %10
      op(Op::log, {10}),                       // %11
      op(Op::sqrt, {11}),                      // %12
      op(Op::tanh, {12}),                      // %13
      op(Op::sigmoid, {13}),                   // %14
      op(Op::constant, {}, {{"value", 0.5}}),  // %15
      op(Op::mul, {14, 15}),                   // %16
      constant(-1.0e-3),                       // %17
      op(Op::add, {16, 17}),                   // %18
      op(Op::abs, {18}),                       // %19
      op(Op::rsqrt, {19}),                     // %20
      op(Op::sin, {20}),                       // %21
      op(Op::cos, {21}),                       // %22
      op(Op::erf, {22}),                       // %23
      op(Op::silu, {23}),                      // %24
      op(Op::gelu, {24}),                      // %25
      op(Op::gelu, {25}, tanhForm),            // %26
      op(Op::pow, {26, 0}),                    // %27
      store(2, 27),
  };
  return k;
}

/// out[R,C] = x[R,C] + b[C].
Kernel broadcastKernel(InnerStride xInner = InnerStride::one) {
  Kernel k;
  k.name = "kiln_add_bias";
  k.rank = 2;
  k.params = {{DType::f32, false, xInner}, {DType::f32, false, InnerStride::one}, {DType::f32, true, InnerStride::one}};
  k.body = {load(0), load(1), op(ir::Op::add, {0, 1}), store(2, 2)};
  return k;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// `src` without its // comments, which name ops ("// %3 = exp(%2)") and flags.
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

bool isElf(const std::vector<char>& cubin) {
  return cubin.size() > 4 && cubin[0] == '\x7f' && cubin[1] == 'E' && cubin[2] == 'L' && cubin[3] == 'F';
}

#define SKIP_WITHOUT_NVRTC()                                        \
  do {                                                              \
    std::string why;                                                \
    if (!nvrtcAvailable(&why)) GTEST_SKIP() << "no NVRTC: " << why; \
  } while (0)

TEST(CudaRenderer, EveryOpIsExternCGlobalWithTheAbi) {
  const std::string src = renderCudaC(everyOpKernel());
  EXPECT_TRUE(contains(src, "extern \"C\" __global__ void kiln_every_op(")) << src;
  EXPECT_TRUE(contains(src,
                       "const float* __restrict__ p0, const float* __restrict__ p1, float* __restrict__ p2, "
                       "KilnArgs_kiln_every_op a)"))
      << src;
  EXPECT_TRUE(contains(src,
                       "struct KilnArgs_kiln_every_op {\n  long long sizes[1];\n  long long strides[3][1];\n"
                       "  long long numel;\n};"))
      << src;
  // A grid-stride loop over the whole domain in 64-bit.
  EXPECT_TRUE(contains(src, "for (long long i = ")) << src;
  EXPECT_TRUE(contains(src, "i < a.numel; i += step")) << src;
  EXPECT_TRUE(contains(src, "p2[o2] = ")) << src;
}

TEST(CudaRenderer, NoFmaNoDeviceMathLibraryNoHeaders) {
  const std::string src = codeOnly(renderCudaC(everyOpKernel()));
  ASSERT_TRUE(contains(src, "v0 + v1;")) << src;  // the stripping kept the code
  for (const char* banned : {"fma",    "expf(",  "logf(", "tanhf(", "exp(",  "log(",     "tanh(",    "exp2f(",
                             "__expf", "__logf", "powf(", "pow(",   "sinf(", "cosf(",    "sin(",     "cos(",
                             "__sinf", "sincos", "erff(", "erf(",   "rsqrt", "#include", "INFINITY", "NAN"}) {
    EXPECT_FALSE(contains(src, banned)) << "found `" << banned << "` in\n" << src;
  }
  // What the formulas do use, spelled as codegen/cuda_renderer.cpp promises.
  EXPECT_TRUE(contains(src, "rintf(")) << src;
  EXPECT_TRUE(contains(src, "sqrtf(")) << src;
  EXPECT_TRUE(contains(src, "__float_as_uint(")) << src;
  EXPECT_TRUE(contains(src, "& 0x807fffffu) | 0x3f000000u)")) << src;
  EXPECT_TRUE(contains(src, "+ 127) << 23)")) << src;
}

TEST(CudaRenderer, ConstantsAreExactF32) {
  const std::string src = renderCudaC(everyOpKernel());
  // 0.5 from the attribute, -1e-3 rounded to f32 (0x3a83126f) and the formulas'
  // infinity, as hex literals or bit patterns.
  EXPECT_TRUE(contains(src, "= 0x1p-1f;")) << src;
  EXPECT_TRUE(contains(src, "= (-0x1.0624dep-10f);")) << src;
  EXPECT_TRUE(contains(src, "__uint_as_float(0x7f800000u)")) << src;  // exp's overflow
  EXPECT_TRUE(contains(src, "__uint_as_float(0xff800000u)")) << src;  // log(0)
  EXPECT_TRUE(contains(src, "__uint_as_float(0x7fc00000u)")) << src;  // log(x < 0)
  // ln2 split of exp: 0.693359375 is exactly 0x1.63p-1.
  EXPECT_TRUE(contains(src, "= 0x1.63p-1f;")) << src;
}

TEST(CudaRenderer, BroadcastUsesStridesAndConstantInnerStride) {
  const std::string src = renderCudaC(broadcastKernel());
  EXPECT_TRUE(contains(src,
                       "const float* __restrict__ p0, const float* __restrict__ p1, float* __restrict__ p2, "
                       "KilnArgs_kiln_add_bias a)"))
      << src;
  EXPECT_TRUE(contains(src, "long long strides[3][2];")) << src;
  EXPECT_TRUE(contains(src, "const long long i1 = rest % a.sizes[1];")) << src;
  // Outer strides are arguments; the inner one is the constant 1.
  EXPECT_TRUE(contains(src, "const long long o0 = i0 * a.strides[0][0] + i1;")) << src;
  EXPECT_TRUE(contains(src, "const long long o1 = i0 * a.strides[1][0] + i1;")) << src;
  EXPECT_FALSE(contains(src, "a.strides[0][1]")) << src;
}

TEST(CudaRenderer, InnerStrideClassesRenderDifferently) {
  const std::string one = renderCudaC(broadcastKernel(InnerStride::one));
  const std::string zero = renderCudaC(broadcastKernel(InnerStride::zero));
  const std::string any = renderCudaC(broadcastKernel(InnerStride::any));
  EXPECT_NE(one, zero);
  EXPECT_NE(one, any);
  EXPECT_NE(zero, any);
  EXPECT_TRUE(contains(zero, "const long long o0 = i0 * a.strides[0][0];")) << zero;
  EXPECT_TRUE(contains(any, "const long long o0 = i0 * a.strides[0][0] + i1 * a.strides[0][1];")) << any;
}

TEST(CudaRenderer, Rank3DecomposesInnermostFirst) {
  Kernel k;
  k.name = "kiln_rank3";
  k.rank = 3;
  // A transposed input (inner stride any), a row broadcast (inner stride zero).
  k.params = {{DType::f32, false, InnerStride::any},
              {DType::f32, false, InnerStride::zero},
              {DType::f32, true, InnerStride::one}};
  k.body = {load(0), load(1), op(ir::Op::mul, {0, 1}), store(2, 2)};
  const std::string src = renderCudaC(k);
  EXPECT_TRUE(contains(src,
                       "    long long rest = i;\n"
                       "    const long long i2 = rest % a.sizes[2];\n"
                       "    rest /= a.sizes[2];\n"
                       "    const long long i1 = rest % a.sizes[1];\n"
                       "    rest /= a.sizes[1];\n"
                       "    const long long i0 = rest;\n"))
      << src;
  EXPECT_TRUE(contains(src, "o0 = i0 * a.strides[0][0] + i1 * a.strides[0][1] + i2 * a.strides[0][2];")) << src;
  EXPECT_TRUE(contains(src, "o1 = i0 * a.strides[1][0] + i1 * a.strides[1][1];")) << src;
  EXPECT_TRUE(contains(src, "o2 = i0 * a.strides[2][0] + i1 * a.strides[2][1] + i2;")) << src;
  std::string why;
  if (nvrtcAvailable(&why)) {
    EXPECT_TRUE(isElf(compileCudaToCubin(src, k.name, 90).cubin));
  }
}

TEST(CudaRenderer, RenderingIsDeterministic) {
  EXPECT_EQ(renderCudaC(everyOpKernel()), renderCudaC(everyOpKernel()));
  EXPECT_EQ(renderCudaC(broadcastKernel()), renderCudaC(broadcastKernel()));
}

TEST(CudaRenderer, ALoadOfAnotherDtypeThanItsParamIsAKilnBug) {
  // Every dtype renders (cuda_dtypes_test.cpp); a body that disagrees with
  // its parameters does not.
  Kernel k = broadcastKernel();
  k.params[1].dtype = DType::f16;
  try {
    renderCudaC(k);
    FAIL() << "expected kiln::InternalError";
  } catch (const InternalError& e) {
    EXPECT_TRUE(contains(e.what(), "kiln_add_bias")) << e.what();
    EXPECT_TRUE(contains(e.what(), "loads f32 from param 1 of f16")) << e.what();
  }
}

TEST(CudaRenderer, MalformedBodyIsAKilnBug) {
  Kernel k = broadcastKernel();
  k.body[2].operands = {0, 3};  // %3 is the store, after %2
  EXPECT_THROW(renderCudaC(k), InternalError);
}

TEST(NvrtcCompiler, VersionNamesNvrtc) {
  SKIP_WITHOUT_NVRTC();
  EXPECT_TRUE(nvrtcVersion().starts_with("NVRTC 1")) << nvrtcVersion();
}

TEST(NvrtcCompiler, EveryOpCompilesForSm90AndSm80) {
  SKIP_WITHOUT_NVRTC();
  const Kernel k = everyOpKernel();
  const std::string src = renderCudaC(k);
  for (int sm : {90, 80}) {
    const CudaBinary bin = compileCudaToCubin(src, k.name, sm);
    EXPECT_TRUE(isElf(bin.cubin)) << "sm_" << sm << ": " << bin.cubin.size() << " bytes";
    EXPECT_GT(bin.compileMs, 0.0);
    // The kernel is in the image under its unmangled name (extern "C").
    EXPECT_TRUE(contains(std::string(bin.cubin.begin(), bin.cubin.end()), k.name)) << "sm_" << sm;
    std::cout << "[ info ] " << k.name << " sm_" << sm << ": " << bin.cubin.size() << " bytes in " << bin.compileMs
              << " ms (" << nvrtcVersion() << ")\n";
  }
}

TEST(NvrtcCompiler, BroadcastKernelsCompile) {
  SKIP_WITHOUT_NVRTC();
  for (InnerStride inner : {InnerStride::one, InnerStride::zero, InnerStride::any}) {
    const Kernel k = broadcastKernel(inner);
    const CudaBinary bin = compileCudaToCubin(renderCudaC(k), k.name, 90);
    EXPECT_TRUE(isElf(bin.cubin));
    std::cout << "[ info ] " << k.name << " sm_90: " << bin.compileMs << " ms\n";
  }
}

TEST(NvrtcCompiler, BrokenSourceThrowsWithKernelNameAndLog) {
  SKIP_WITHOUT_NVRTC();
  try {
    compileCudaToCubin("this is not cuda", "kiln_broken", 90);
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "kiln_broken")) << what;
    // NVRTC's log names the program file and says what is wrong.
    EXPECT_TRUE(contains(what, "kiln_broken.cu(1): error")) << what;
    EXPECT_TRUE(contains(what, "NVRTC_ERROR_COMPILATION")) << what;
  }
}

TEST(NvrtcCompiler, UnknownArchThrows) {
  SKIP_WITHOUT_NVRTC();
  const Kernel k = broadcastKernel();
  EXPECT_THROW(compileCudaToCubin(renderCudaC(k), k.name, 1), Error);
}

}  // namespace
}  // namespace kiln::codegen

// CUDA C of elementwise kernels with vector accesses (Note [Vectorized
// elementwise kernels] in codegen/cuda_renderer.cpp): a rank-1 kernel whose
// parameters are contiguous or scalars reads and writes four elements per
// access, behind a run-time alignment check, with a scalar tail; a kernel
// with a strided parameter or index space does not; dropout draws its
// group's Philox block once per vector. Every variant compiles with NVRTC
// for sm_80 and sm_90 (no GPU runs them here).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/cuda_renderer.h"
#include "codegen/kernel.h"
#include "codegen/nvrtc_compiler.h"

namespace kiln::codegen {
namespace {

using namespace instr;
using ir::Op;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// The text between `from` and `to` (both must be there).
std::string between(const std::string& text, const std::string& from, const std::string& to) {
  const size_t a = text.find(from);
  const size_t b = text.find(to, a);
  EXPECT_NE(a, std::string::npos) << from;
  EXPECT_NE(b, std::string::npos) << to;
  return a == std::string::npos || b == std::string::npos ? std::string() : text.substr(a, b - a);
}

/// y = dropout(relu(x), seed, offset) * x over one contiguous dim, in `d`.
Kernel reluDropoutMul(DType d, InnerStride xInner = InnerStride::one, InnerStride space = InnerStride::one) {
  Kernel k;
  k.name = std::string("kiln_vec_") + std::string(dtypeName(d));
  k.rank = xInner == InnerStride::any ? 2 : 1;
  k.params = {{d, false, xInner},
              {DType::i64, false, InnerStride::zero},
              {DType::i64, false, InnerStride::zero},
              {d, true, InnerStride::one}};
  k.indexSpaces = {space};
  k.body = {load(0, d),
            load(1, DType::i64),
            load(2, DType::i64),
            op(Op::relu, {0}, {}, d),
            index(0),
            op(Op::dropout, {3, 1, 2, 4}, {{"p", 0.25}}, d),
            op(Op::mul, {5, 0}, {}, d),
            store(3, 6, d)};
  return k;
}

void expectCompiles(const std::string& src, const std::string& name) {
  std::string why;
  if (!nvrtcAvailable(&why)) return;
  for (int sm : {80, 90}) {
    try {
      const CudaBinary bin = compileCudaToCubin(src, name, sm);
      EXPECT_EQ(std::string(bin.cubin.data() + 1, 3), "ELF") << "sm_" << sm;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "sm_" << sm << ": " << e.what() << "\n" << src;
    }
  }
}

TEST(CudaVectorize, ContiguousF32ReadsAndWritesFloat4AfterAnAlignmentCheck) {
  const Kernel k = reluDropoutMul(DType::f32);
  const std::string src = renderCudaC(k);
  EXPECT_NE(src.find("struct __align__(16) KilnVec4_f32 { float v[4]; };"), std::string::npos) << src;
  EXPECT_NE(src.find("if ((unsigned long long)p0 % 16 == 0 && (unsigned long long)p3 % 16 == 0)"), std::string::npos)
      << src;
  EXPECT_NE(src.find("const KilnVec4_f32 r0 = *reinterpret_cast<const KilnVec4_f32*>(p0 + i);"), std::string::npos)
      << src;
  EXPECT_NE(src.find("*reinterpret_cast<KilnVec4_f32*>(p3 + i) = w3;"), std::string::npos) << src;
  // The four lanes read the vector's elements; scalars (seed, offset) stay scalar loads.
  for (int lane = 0; lane < 4; ++lane)
    EXPECT_NE(src.find("= r0.v[" + std::to_string(lane) + "];"), std::string::npos) << lane;
  EXPECT_NE(src.find("p1[0]"), std::string::npos);
  // A scalar tail and a scalar loop for unaligned pointers.
  EXPECT_NE(src.find("for (long long i = numVectors * 4 + first; i < a.numel; i += step)"), std::string::npos);
  EXPECT_NE(src.find("} else {"), std::string::npos);
  EXPECT_EQ(count(src, "p0[o0]"), 2) << "the tail and the unaligned loop load element by element";
  expectCompiles(src, k.name);
}

TEST(CudaVectorize, DropoutDrawsOnePhiloxBlockPerVector) {
  // Ten rounds of two 32x32->64 multiplies: 20 in the vector loop (one
  // block for four elements), where a draw per element would make 80.
  const std::string src = renderCudaC(reluDropoutMul(DType::f32));
  const std::string vectorLoop = between(src, "for (long long v = first;", "// The numel % 4 elements left");
  EXPECT_EQ(count(vectorLoop, " * (unsigned long long)"), 20) << vectorLoop;
  EXPECT_EQ(count(vectorLoop, "i >> 2"), 1) << vectorLoop;
  for (int lane = 0; lane < 4; ++lane)
    EXPECT_NE(vectorLoop.find("word " + std::to_string(lane) + " of the vector's block"), std::string::npos);
  // The scalar tail draws per element: its group's block, then its word.
  const std::string tail = between(src, "// The numel % 4 elements left", "} else {");
  EXPECT_EQ(count(tail, " * (unsigned long long)"), 20) << tail;
}

TEST(CudaVectorize, VectorSizeFollowsTheDType) {
  struct Case {
    DType d;
    std::string decl, check;
  };
  const Case cases[] = {
      {DType::f16, "struct __align__(8) KilnVec4_f16 { unsigned short v[4]; };", "(unsigned long long)p0 % 8 == 0"},
      {DType::bf16, "struct __align__(8) KilnVec4_bf16 { unsigned short v[4]; };", "(unsigned long long)p0 % 8 == 0"},
      {DType::f64, "struct __align__(16) KilnVec4_f64 { double v[4]; };", "(unsigned long long)p0 % 16 == 0"},
  };
  for (const Case& c : cases) {
    const Kernel k = reluDropoutMul(c.d);
    const std::string src = renderCudaC(k);
    EXPECT_NE(src.find(c.decl), std::string::npos) << src;
    EXPECT_NE(src.find(c.check), std::string::npos) << src;
    expectCompiles(src, k.name);
  }
  // bool outputs: four bytes at a time.
  Kernel cmp;
  cmp.name = "kiln_vec_cmp";
  cmp.params = {{DType::f32, false, InnerStride::one}, {DType::boolean, true, InnerStride::one}};
  cmp.body = {load(0), constant(0.5), op(Op::gt, {0, 1}, {}, DType::boolean), store(1, 2, DType::boolean)};
  const std::string src = renderCudaC(cmp);
  EXPECT_NE(src.find("struct __align__(4) KilnVec4_bool { unsigned char v[4]; };"), std::string::npos) << src;
  EXPECT_NE(src.find("(unsigned long long)p1 % 4 == 0"), std::string::npos) << src;
  expectCompiles(src, cmp.name);
}

TEST(CudaVectorize, StridedParametersAndIndexSpacesStayScalar) {
  // A transposed operand (inner stride `any`, rank 2) and a strided index
  // space: no vector type, no reinterpreting casts, one grid-stride loop.
  for (const Kernel& k :
       {reluDropoutMul(DType::f32, InnerStride::any), reluDropoutMul(DType::f32, InnerStride::one, InnerStride::any)}) {
    const std::string src = renderCudaC(k);
    EXPECT_EQ(src.find("KilnVec4"), std::string::npos) << src;
    EXPECT_EQ(src.find("reinterpret_cast"), std::string::npos) << src;
    EXPECT_EQ(count(src, "i += step"), 1) << src;
    expectCompiles(src, k.name);
  }
  // Reductions have their own form (a block per row).
  Kernel sum;
  sum.name = "kiln_vec_sum";
  sum.rank = 2;
  sum.reduceRank = 1;
  sum.params = {{DType::f32, false, InnerStride::one}, {DType::f32, true, InnerStride::one, true}};
  sum.body = {load(0), reduce(ReduceOp::sum, 0), store(1, 1)};
  EXPECT_EQ(renderCudaC(sum).find("KilnVec4"), std::string::npos);
}

}  // namespace
}  // namespace kiln::codegen

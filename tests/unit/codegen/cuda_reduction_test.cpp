// Tests of the CUDA C reduction renderer (codegen/cuda_reduction.cpp): the
// text has the ABI, a block per row, warp shuffles and shared memory, IEEE
// maximum instead of fmaxf, and no FMA; and NVRTC compiles every kind of
// reduction kernel (sum, max, min, argmax; each dtype they take; several
// passes with a row store; two reduced dims; outer inputs) to cubins for
// sm_80 and sm_90. The compile tests skip, with the reason, where kiln was
// built without NVRTC. No test runs a kernel: that needs a GPU.
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

#define SKIP_WITHOUT_NVRTC()                                        \
  do {                                                              \
    std::string why;                                                \
    if (!nvrtcAvailable(&why)) GTEST_SKIP() << "no NVRTC: " << why; \
  } while (0)

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Kernel rowKernel(const std::string& name, DType in, DType out, std::vector<ScalarInstr> body) {
  Kernel k;
  k.name = name;
  k.rank = 2;
  k.reduceRank = 1;
  k.params = {{in, false, InnerStride::one, false}, {out, true, InnerStride::zero, true}};
  k.body = std::move(body);
  return k;
}

/// One kernel per (reduce op, dtype) the lowering produces, and the shapes of
/// kernel fuse-reductions makes: several passes, row stores, outer inputs.
std::vector<Kernel> everyKind() {
  std::vector<Kernel> ks;
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean}) {
    const std::string t(dtypeName(d));
    for (ReduceOp o : {ReduceOp::max, ReduceOp::min})
      ks.push_back(rowKernel("kiln_t_" + std::string(reduceOpName(o)) + "_" + t, d, d,
                             {load(0, d), reduce(o, 0, d), store(1, 1, d)}));
    if (d != DType::boolean)
      ks.push_back(rowKernel("kiln_t_argmax_" + t, d, DType::i64,
                             {load(0, d), reduce(ReduceOp::argmax, 0, DType::i64), store(1, 1, DType::i64)}));
    const DType acc = isFloatingPoint(d) ? DType::f64 : DType::i64;
    ks.push_back(rowKernel("kiln_t_sum_" + t, d, d == DType::boolean || d == DType::i32 ? DType::i64 : d,
                           {load(0, d), op(Op::cast, {0}, {{"dtype", acc}}, acc), reduce(ReduceOp::sum, 1, acc),
                            op(Op::cast, {2}, {{"dtype", d == DType::boolean || d == DType::i32 ? DType::i64 : d}},
                               d == DType::boolean || d == DType::i32 ? DType::i64 : d),
                            store(1, 3, d == DType::boolean || d == DType::i32 ? DType::i64 : d)}));
  }
  // i32 and f32 sums in their own dtype (the kernel form allows them).
  ks.push_back(rowKernel("kiln_t_sum_i32_i32", DType::i32, DType::i32,
                         {load(0, DType::i32), reduce(ReduceOp::sum, 0, DType::i32), store(1, 1, DType::i32)}));
  ks.push_back(
      rowKernel("kiln_t_sum_f32_f32", DType::f32, DType::f32, {load(0), reduce(ReduceOp::sum, 0), store(1, 1)}));
  // var: two passes, the mean first.
  ks.push_back(rowKernel(
      "kiln_t_var", DType::f32, DType::f32,
      {load(0), op(Op::cast, {0}, {{"dtype", DType::f64}}, DType::f64), extent(DType::f64),
       reduce(ReduceOp::sum, 1, DType::f64), op(Op::div, {3, 2}, {}, DType::f64), op(Op::sub, {1, 4}, {}, DType::f64),
       op(Op::mul, {5, 5}, {}, DType::f64), reduce(ReduceOp::sum, 6, DType::f64), op(Op::div, {7, 2}, {}, DType::f64),
       op(Op::cast, {8}, {{"dtype", DType::f32}}, DType::f32), store(1, 9)}));
  // softmax: three passes, the last one storing along the row.
  Kernel softmax = rowKernel("kiln_t_softmax", DType::f32, DType::f32,
                             {load(0), reduce(ReduceOp::max, 0), op(Op::sub, {0, 1}), op(Op::exp, {2}),
                              reduce(ReduceOp::sum, 3), op(Op::div, {3, 4}), store(1, 5)});
  softmax.params[1] = {DType::f32, true, InnerStride::one, false};
  ks.push_back(softmax);
  // Two reduced dims, a strided row, and an outer input added in the epilogue.
  Kernel bias;
  bias.name = "kiln_t_sum_bias";
  bias.rank = 3;
  bias.reduceRank = 2;
  bias.params = {{DType::f32, false, InnerStride::any, false},
                 {DType::f32, false, InnerStride::zero, true},
                 {DType::f32, true, InnerStride::zero, true}};
  bias.body = {load(0), load(1), reduce(ReduceOp::sum, 0), op(Op::add, {2, 1}), store(2, 3)};
  ks.push_back(bias);
  return ks;
}

TEST(CudaReduction, ABlockPerRowWithShufflesAndSharedMemory) {
  const Kernel k =
      rowKernel("kiln_t_sum", DType::f32, DType::f32,
                {load(0), op(Op::cast, {0}, {{"dtype", DType::f64}}, DType::f64), reduce(ReduceOp::sum, 1, DType::f64),
                 op(Op::cast, {2}, {{"dtype", DType::f32}}, DType::f32), store(1, 3)});
  const std::string src = renderCudaC(k);
  EXPECT_TRUE(contains(src,
                       "extern \"C\" __global__ void __launch_bounds__(256) kiln_t_sum(const float* __restrict__ p0, "
                       "float* __restrict__ p1, KilnArgs_kiln_t_sum a)"))
      << src;
  EXPECT_TRUE(contains(src, "for (long long row = blockIdx.x; row < a.numel; row += gridDim.x)")) << src;
  EXPECT_TRUE(contains(src, "for (long long r = threadIdx.x; r < row_length; r += blockDim.x)")) << src;
  EXPECT_TRUE(contains(src, "__shfl_down_sync(0xffffffffu, acc2, offset)")) << src;
  EXPECT_TRUE(contains(src, "__shared__ double smem_double[32];")) << src;
  EXPECT_TRUE(contains(src, "__syncthreads();")) << src;
  EXPECT_TRUE(contains(src, "if (threadIdx.x == 0) p1[b1] = ")) << src;
  for (const char* banned : {"fmaf(", "fma(", "__fma", "fmaxf", "fmax("}) EXPECT_FALSE(contains(src, banned)) << src;
  EXPECT_FALSE(contains(src, "#include")) << src;
}

TEST(CudaReduction, FloatMaxIsIeeeMaximumNotFmaxf) {
  const std::string src =
      renderCudaC(rowKernel("kiln_t_max", DType::f32, DType::f32, {load(0), reduce(ReduceOp::max, 0), store(1, 1)}));
  EXPECT_TRUE(contains(src, "acc1 = kiln_max_f32(acc1, v")) << src;
  EXPECT_FALSE(contains(src, "fmaxf")) << src;
  // The identity is -inf, as a bit pattern.
  EXPECT_TRUE(contains(src, "float acc1 = __int_as_float((int)0xff800000u);")) << src;
}

TEST(CudaReduction, ArgmaxCarriesTheIndexThroughTheShuffles) {
  const std::string src =
      renderCudaC(rowKernel("kiln_t_argmax", DType::f32, DType::i64,
                            {load(0), reduce(ReduceOp::argmax, 0, DType::i64), store(1, 1, DType::i64)}));
  EXPECT_TRUE(contains(src, "long long acc1_index = 0x7fffffffffffffffll;")) << src;
  EXPECT_TRUE(contains(src, "__shfl_down_sync(0xffffffffu, acc1_index, offset)")) << src;
  EXPECT_TRUE(contains(src, "__shared__ long long smem_long_long[32];")) << src;
}

TEST(CudaReduction, NvrtcCompilesEveryKindForSm80AndSm90) {
  SKIP_WITHOUT_NVRTC();
  for (const Kernel& k : everyKind()) {
    const std::string src = renderCudaC(k);
    for (int sm : {80, 90}) {
      SCOPED_TRACE(k.name + " for sm_" + std::to_string(sm));
      try {
        CudaBinary bin = compileCudaToCubin(src, k.name, sm);
        EXPECT_GT(bin.cubin.size(), 4u);
        EXPECT_EQ(std::string(bin.cubin.data() + 1, 3), "ELF");
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what() << "\n" << src;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::codegen

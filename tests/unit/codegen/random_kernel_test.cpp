// rand and randn in kernels: fused with an add that broadcasts its other
// operand, the CPU kernel computes each element from its own row-major
// index, bit for bit what the C++ evaluator gives; and the CUDA
// C of every fill in every float dtype, alone and fused, is what NVRTC
// compiles for sm_80 and sm_90, with kiln's own log and cos in it rather
// than a device library's.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/c_renderer.h"
#include "codegen/nvrtc_compiler.h"
#include "common/graph_builders.h"
#include "ir/scalar_eval.h"
#include "passes/passes.h"
#include "runtime/allocator.h"
#include "runtime/executable.h"

namespace kiln::codegen {
namespace {

using ir::Op;

const ir::TensorType kI64{DType::i64, {}, Device::cpu()};

/// x[cols] + fill(seed, offset) {shape = [rows, cols], dtype}, fused: x
/// broadcasts down the fill's rows.
std::unique_ptr<ir::Graph> fusedFill(Op op, DType dtype, int64_t rows, int64_t cols) {
  auto g = std::make_unique<ir::Graph>("fill");
  ir::Value* x = g->addInput({dtype, {cols}, Device::cpu()});
  ir::Value* seed = g->addInput(kI64);
  ir::Value* offset = g->addInput(kI64);
  const ir::Attributes attrs = {{"shape", ir::Shape{rows, cols}}, {"dtype", dtype}};
  ir::Value* r = g->create(op, std::vector<ir::Value*>{seed, offset}, attrs)->output();
  g->setOutputs({testutil::bin(*g, Op::add, x, r)});
  passes::PassManager("fuse-elementwise").run(*g);
  return g;
}

std::shared_ptr<runtime::Buffer> bufferOf(const void* data, size_t bytes) {
  auto b = runtime::allocateBuffer(Device::cpu(), bytes);
  std::memcpy(b->hostData(), data, bytes);
  return b;
}

TEST(RandomKernel, AFusedFillIndexesItsOwnResult) {
  const int64_t rows = 7, cols = 301, seed = 0x0123456789abcdefll, offset = 0x100000007ll;
  for (Op op : {Op::rand, Op::randn})
    for (DType d : {DType::f32, DType::f64}) {
      SCOPED_TRACE(std::string(ir::opName(op)) + " " + std::string(dtypeName(d)));
      auto g = fusedFill(op, d, rows, cols);
      ASSERT_EQ(g->nodes().size(), 1u) << "one kernel";
      const bool f64 = d == DType::f64;
      std::vector<double> x(static_cast<size_t>(cols));
      for (size_t c = 0; c < x.size(); ++c) x[c] = static_cast<double>(c);
      std::vector<float> x32(x.begin(), x.end());
      const runtime::Executable exe = compileGraph(*g, Device::cpu());
      auto outs = exe.run({f64 ? bufferOf(x.data(), x.size() * 8) : bufferOf(x32.data(), x32.size() * 4),
                           bufferOf(&seed, 8), bufferOf(&offset, 8)});
      const ir::Attributes attrs = {{"shape", ir::Shape{rows, cols}}, {"dtype", d}};
      for (int64_t i = 0; i < rows * cols; ++i) {
        const ir::ScalarValue want =
            ir::evalScalar(op,
                           std::vector<ir::ScalarValue>{ir::ScalarValue::ofInt(DType::i64, seed),
                                                        ir::ScalarValue::ofInt(DType::i64, offset),
                                                        ir::ScalarValue::ofInt(DType::i64, i)},
                           attrs);
        const double c = static_cast<double>(i % cols);
        const size_t at = static_cast<size_t>(i);
        const double got = f64 ? static_cast<const double*>(outs.at(0)->hostData())[at]
                               : static_cast<const float*>(outs.at(0)->hostData())[at];
        const double sum = f64 ? c + want.f : static_cast<double>(static_cast<float>(c) + static_cast<float>(want.f));
        ASSERT_EQ(got, sum) << "element " << i;
      }
    }
}

TEST(RandomKernel, CudaCOfEveryFillCompilesWithNvrtc) {
  std::string why;
  const bool nvrtc = nvrtcAvailable(&why);
  for (Op op : {Op::rand, Op::randn})
    for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::string(ir::opName(op)) + " " + std::string(dtypeName(d)));
      auto alone = std::make_unique<ir::Graph>("fill");
      ir::Value* seed = alone->addInput(kI64);
      ir::Value* offset = alone->addInput(kI64);
      alone->setOutputs(
          {alone->create(op, std::vector<ir::Value*>{seed, offset}, {{"shape", ir::Shape{64, 96}}, {"dtype", d}})
               ->output()});
      passes::PassManager("fuse-elementwise").run(*alone);
      const auto fused = fusedFill(op, d, 8, 96);
      for (const ir::Graph* g : {alone.get(), fused.get()}) {
        const Kernel k = lowerFusion(*g->nodes().at(0)).kernel;
        ASSERT_EQ(k.numIndexSpaces(), 1);
        const std::string src = renderCudaC(k);
        // kiln's formulas, not CUDA's math library (Note [Eager equals compiled]).
        for (const char* banned : {"fmaf(", "fma(", "log(", "logf(", "cos(", "cosf("})
          EXPECT_EQ(src.find(banned), std::string::npos) << banned << "\n" << src;
        if (!nvrtc) continue;
        for (int sm : {80, 90}) {
          const CudaBinary bin = compileCudaToCubin(src, k.name, sm);
          EXPECT_FALSE(bin.cubin.empty()) << "sm_" << sm;
          // No warnings: a fill computes only the Philox words it reads.
          EXPECT_EQ(bin.log, "") << "sm_" << sm;
        }
      }
    }
  if (!nvrtc) GTEST_SKIP() << "rendered, not compiled: no NVRTC: " << why;
}

}  // namespace
}  // namespace kiln::codegen

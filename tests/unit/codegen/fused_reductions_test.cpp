// The kernels of what fuse-reductions builds from traced programs (softmax,
// log_softmax, layer_norm in f32 and f16, relu -> dropout -> layer_norm with
// its index space, and its backward, cross_entropy, a layer norm backward): their CPU code vectorizes every pass, with
// the float sums split into the fixed 8 lanes x 4 (Note [Fixed summation order]), and keeps costly row values for later
// passes (Note [Stashed row values]); and the lowering's parameters for inputs read along the row and once per row.
// (Their GPU kernels are built and run by the tests of gpu_kernel_cases.h.)
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "codegen/codegen.h"
#include "codegen/cpu_compiler.h"
#include "common/graph_builders.h"
#include "frontend/kiln.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"

namespace {

using namespace kiln;
using namespace kiln::testutil;
using ir::Op;

ir::TensorType type(DType d, ir::Shape s) { return {d, std::move(s), Device::cpu()}; }

/// The kernels of `fn` traced with `inputs` and run through kiln::compile's pipeline.
template <class F>
std::vector<codegen::Kernel> kernelsOf(F fn, const std::vector<ir::TensorType>& inputs, int* nodes = nullptr) {
  Trace t = trace(fn, inputs, "t");
  passes::PassManager(CompileOptions{}.pipeline).run(*t.graph);
  std::vector<codegen::Kernel> out;
  int count = 0;
  for (const ir::Node* n : t.graph->nodes()) {
    if (n->op() == Op::constant) continue;
    ++count;
    for (codegen::LoweredKernel& k : codegen::lowerKernels(*n)) out.push_back(std::move(k.kernel));
  }
  if (nodes) *nodes = count;
  return out;
}

struct Program {
  std::string name;
  std::vector<codegen::Kernel> kernels;
};

std::vector<Program> programs() {
  const auto f32 = [](ir::Shape s) { return type(DType::f32, std::move(s)); };
  std::vector<Program> ps;
  ps.push_back({"softmax", kernelsOf([](const Tensor& x) { return softmax(x, -1); }, {f32({64, 1000})})});
  ps.push_back({"log_softmax", kernelsOf([](const Tensor& x) { return logSoftmax(x, 1); }, {f32({64, 1000})})});
  ps.push_back({"layer_norm",
                kernelsOf([](const Tensor& x, const Tensor& w, const Tensor& b) { return layerNorm(x, {512}, w, b); },
                          {f32({64, 512}), f32({512}), f32({512})})});
  ps.push_back({"layer_norm_f16",
                kernelsOf([](const Tensor& x, const Tensor& w, const Tensor& b) { return layerNorm(x, {512}, w, b); },
                          {type(DType::f16, {64, 512}), type(DType::f16, {512}), type(DType::f16, {512})})});
  ps.push_back({"relu_dropout_layer_norm",
                kernelsOf([](const Tensor& x, const Tensor& w,
                             const Tensor& b) { return layerNorm(dropout(relu(x), 0.1), {512}, w, b); },
                          {f32({64, 512}), f32({512}), f32({512})})});
  ps.push_back({"relu_dropout_layer_norm_backward",
                kernelsOf(
                    [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) {
                      Tensor xx = x.detach().setRequiresGrad(), ww = w.detach().setRequiresGrad(),
                             bb = b.detach().setRequiresGrad();
                      layerNorm(dropout(relu(xx), 0.1), {512}, ww, bb).backward(g);
                      return std::vector<Tensor>{xx.grad(), ww.grad(), bb.grad()};
                    },
                    {f32({64, 512}), f32({512}), f32({512}), f32({64, 512})})});
  ps.push_back({"cross_entropy", kernelsOf([](const Tensor& x, const Tensor& t) { return crossEntropy(x, t); },
                                           {f32({64, 10}), type(DType::i64, {64})})});
  ps.push_back({"layer_norm_backward", kernelsOf(
                                           [](const Tensor& x, const Tensor& w, const Tensor& g) {
                                             Tensor xx = x.detach().setRequiresGrad(),
                                                    ww = w.detach().setRequiresGrad();
                                             layerNorm(xx, {256}, ww, Tensor()).backward(g);
                                             return std::vector<Tensor>{xx.grad(), ww.grad()};
                                           },
                                           {f32({32, 256}), f32({256}), f32({32, 256})})});
  return ps;
}

TEST(FusedReductionKernels, OneReductionKernelEach) {
  // One kernel per program, two for cross_entropy (the batch mean) and the
  // layer norm backwards (the weight gradient's column sums).
  for (const Program& p : programs()) {
    const size_t want =
        p.name == "cross_entropy" || p.name == "layer_norm_backward" || p.name == "relu_dropout_layer_norm_backward"
            ? 2
            : 1;
    EXPECT_EQ(p.kernels.size(), want) << p.name;
    for (const codegen::Kernel& k : p.kernels) EXPECT_TRUE(k.isReduction()) << p.name << "\n" << k.str();
  }
}

TEST(FusedReductionKernels, EveryFloatSumIsVectorizedInTheFixedSplit) {
  // Each pass that adds floats becomes 4 interleaved <8 x double> partial
  // sums on every CPU, whatever else the pass computes (exp, the layer
  // norm's deviations, an f16 conversion); in a kernel that walks rows
  // with a stride, a plain sequence (Note [Fixed summation order]).
  const std::regex vectorSum(R"(fadd reassoc <8 x double>)");
  for (const Program& p : programs()) {
    for (const codegen::Kernel& k : p.kernels) {
      int sums = 0;
      for (const codegen::ScalarInstr& in : k.body)
        sums += in.kind == codegen::ScalarInstr::Kind::reduce && in.reduceOp == codegen::ReduceOp::sum &&
                in.dtype == DType::f64;
      if (sums == 0) continue;
      const std::string raw = codegen::renderLlvmIr(k, false);
      const std::string opt = codegen::renderLlvmIr(k, true);
      const auto found = std::distance(std::sregex_iterator(opt.begin(), opt.end(), vectorSum), std::sregex_iterator());
      bool strided = false;
      for (const codegen::KernelParam& param : k.params)
        strided = strided || (!param.outer && param.inner == codegen::InnerStride::any);
      if (strided) {
        // The column sums of the weight gradient walk rows with a stride:
        // added in sequence, without `reassoc`.
        EXPECT_NE(raw.find("!{!\"llvm.loop.vectorize.width\", i32 1}"), std::string::npos) << p.name << "\n" << raw;
        EXPECT_EQ(raw.find("reassoc"), std::string::npos) << p.name;
        EXPECT_EQ(found, 0) << p.name;
        continue;
      }
      EXPECT_NE(raw.find("!{!\"llvm.loop.vectorize.width\", i32 8}"), std::string::npos) << p.name << "\n" << raw;
      EXPECT_NE(raw.find("!{!\"llvm.loop.interleave.count\", i32 4}"), std::string::npos) << p.name;
      // Per vectorized pass: 4 accumulating fadds and 3 combining the parts.
      EXPECT_GE(found, 7) << p.name << " " << k.name;
    }
  }
}

TEST(FusedReductionKernels, ExpensiveRowValuesAreStashedForLaterPasses) {
  // softmax: exp(x - max) is computed in the sum's pass and needed again by
  // the stores' pass: stashed (Note [Stashed row values]), for rows up to a
  // power-of-two bound that is part of the kernel's signature.
  const auto f32 = [](ir::Shape s) { return type(DType::f32, std::move(s)); };
  const auto softmaxOf = [](const Tensor& x) { return softmax(x, -1); };
  const codegen::Kernel k = kernelsOf(softmaxOf, {f32({64, 1000})}).at(0);
  EXPECT_EQ(k.maxRowLength, 1024);
  const codegen::KernelStages st = codegen::kernelStages(k);
  int stashed = 0;
  for (size_t i = 0; i < k.body.size(); ++i)
    if (st.stashed[i]) {
      ++stashed;
      EXPECT_EQ(k.body[i].op, Op::exp) << k.str();
    }
  EXPECT_EQ(stashed, 1) << k.str();
  EXPECT_NE(codegen::renderLlvmIr(k).find("%stash = alloca [4096 x i8], align 64"), std::string::npos);
  EXPECT_NE(k.signature().find("rows <= 1024"), std::string::npos);
  // Rows of 700 share the kernel of rows of 1000; rows too long recompute.
  EXPECT_EQ(kernelsOf(softmaxOf, {f32({8, 700})}).at(0).signature(), k.signature());
  const codegen::Kernel longRows = kernelsOf(softmaxOf, {f32({2, 20000})}).at(0);
  EXPECT_EQ(longRows.maxRowLength, 0);
  EXPECT_EQ(codegen::renderLlvmIr(longRows).find("stash"), std::string::npos);
  // layer_norm recomputes x - mean from the load: nothing worth a stash.
  const codegen::Kernel ln = kernelsOf([](const Tensor& x) { return layerNorm(x, {512}); }, {f32({4, 512})}).at(0);
  EXPECT_EQ(ln.maxRowLength, 0) << ln.str();
}

TEST(FusedReductionKernels, CostlySumOperandsAreComputedAtTheFullVectorWidth) {
  // Note [Sums at full width]: softmax's exp(x - max) is computed in a loop
  // of its own (no reduction in it, so it fills the host's vectors and is
  // interleaved), its values stored by row position and added by a loop
  // in the fixed split; layer_norm's cheap passes stay one loop each. The
  // kernels say the width they are vectorized for (Note [Vector width of
  // kiln's kernels]). (That the sums keep their bits: e2e FusedReductions.)
  const auto f32 = [](ir::Shape s) { return type(DType::f32, std::move(s)); };
  const codegen::Kernel k = kernelsOf([](const Tensor& x) { return softmax(x, -1); }, {f32({64, 1000})}).at(0);
  const std::string raw = codegen::renderLlvmIr(k, false);
  EXPECT_NE(raw.find("pass1.values.inner:"), std::string::npos) << raw;
  EXPECT_NE(raw.find("pass1.sums.inner:"), std::string::npos) << raw;
  EXPECT_NE(raw.find("%pass1.sum"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("pass0.values"), std::string::npos) << "amax's pass only loads";
  const codegen::CpuVectorTarget target = codegen::cpuVectorTarget();
  const std::string opt = codegen::renderLlvmIr(k, true);
  EXPECT_NE(opt.find("\"prefer-vector-width\"=\"" + std::to_string(target.vectorBits) + "\""), std::string::npos) << opt;
  // The exp at the full width: f32 vectors of vectorBits, which a loop
  // holding the f64 sum would halve.
  const std::string lanes = "<" + std::to_string(target.vectorBits / 32) + " x float>";
  const std::regex fullWidthRint("llvm\\.rint\\.v" + std::to_string(target.vectorBits / 32) + "f32");
  EXPECT_TRUE(std::regex_search(opt, fullWidthRint)) << lanes << "\n" << opt;
  // Still 4 x <8 x double> partial sums.
  EXPECT_NE(opt.find("fadd reassoc <8 x double>"), std::string::npos);

  const codegen::Kernel ln = kernelsOf([](const Tensor& x) { return layerNorm(x, {512}); }, {f32({4, 512})}).at(0);
  EXPECT_EQ(codegen::renderLlvmIr(ln, false).find(".values"), std::string::npos) << "no stash, nothing split";
}

TEST(FusedReductionKernels, AnInputReadAlongTheRowAndOncePerRowIsTwoParams) {
  // b: f32[5,1] is added to every element of x (along the row) and to the
  // row's sum (once per row): one buffer, two parameters.
  auto g = std::make_unique<ir::Graph>("twice");
  ir::Value* x = g->addInput(f32({5, 9}));
  ir::Value* b = g->addInput(f32({5, 1}));
  ir::Value* s = g->create(Op::sum, std::vector<ir::Value*>{bin(*g, Op::add, x, b)},
                           {{"dims", std::vector<int64_t>{1}}, {"keepdim", int64_t{1}}})
                     ->output();
  g->setOutputs({bin(*g, Op::add, s, b)});
  passes::PassManager("fuse-reductions").run(*g);
  ASSERT_EQ(ir::countKernels(*g), 1) << ir::printGraph(*g);
  codegen::LoweredKernel k = codegen::lowerReduction(*g->nodes().back());
  ASSERT_EQ(k.kernel.numParams(), 4) << k.kernel.str();
  EXPECT_FALSE(k.kernel.params[1].outer);
  EXPECT_EQ(k.kernel.params[1].inner, codegen::InnerStride::zero);
  EXPECT_TRUE(k.kernel.params[2].outer);
  EXPECT_EQ(k.bindings[1].index, 1);
  EXPECT_EQ(k.bindings[2].index, 1);
  runtime::Executable exe = codegen::compileGraph(*g, Device::cpu());
  Tensor xs = arange(0, 45).to(DType::f32).reshape({5, 9}), bs = fromVector({1, 2, 3, 4, 5}, {5, 1});
  auto out = exe.run({xs.contiguous().impl()->storage, bs.impl()->storage});
  const float* got = static_cast<const float*>(out[0]->hostData());
  for (int r = 0; r < 5; ++r) EXPECT_EQ(got[r], static_cast<float>(81 * r + 36 + 10 * (r + 1))) << r;
}

}  // namespace

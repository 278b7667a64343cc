// The kernels and run cases of gpu_kernel_cases.h.
#include "unit/codegen/gpu_kernel_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <set>

#include "codegen/codegen.h"
#include "frontend/kiln.h"
#include "passes/pass_manager.h"

namespace kiln::codegen::testing {

namespace {

using namespace instr;
using ir::Op;

// --- Elementwise kernels. ---

/// out = a chain of every elementwise f32 op over x, y (rank 1, contiguous).
Kernel everyOpChain() {
  Kernel k;
  k.name = "kiln_every_op";
  k.params = {{DType::f32, false, InnerStride::one},
              {DType::f32, false, InnerStride::one},
              {DType::f32, true, InnerStride::one}};
  const ir::Attributes tanhForm = {{"approximate", int64_t{1}}};
  k.body = {load(0),
            load(1),
            op(Op::add, {0, 1}),
            op(Op::sub, {2, 1}),
            op(Op::mul, {3, 0}),
            op(Op::div, {4, 1}),
            op(Op::maximum, {5, 0}),
            op(Op::minimum, {6, 1}),
            op(Op::neg, {7}),
            op(Op::relu, {8}),
            op(Op::exp, {9}),
            op(Op::log, {10}),
            op(Op::sqrt, {11}),
            op(Op::tanh, {12}),
            op(Op::sigmoid, {13}),
            op(Op::constant, {}, {{"value", 0.5}}),
            op(Op::mul, {14, 15}),
            constant(-1.0e-3),
            op(Op::add, {16, 17}),
            op(Op::abs, {18}),
            op(Op::rsqrt, {19}),
            op(Op::sin, {20}),
            op(Op::cos, {21}),
            op(Op::erf, {22}),
            op(Op::silu, {23}),
            op(Op::gelu, {24}),
            op(Op::gelu, {25}, tanhForm),
            op(Op::pow, {26, 0}),
            store(2, 27)};
  return k;
}

/// out[R,C] = x[R,C] + b[C], x read with inner stride class `xInner`.
Kernel biasAdd(InnerStride xInner) {
  Kernel k;
  k.name = std::string("kiln_add_bias_") + (xInner == InnerStride::one ? "1" : xInner == InnerStride::zero ? "0" : "n");
  k.rank = 2;
  k.params = {{DType::f32, false, xInner}, {DType::f32, false, InnerStride::one}, {DType::f32, true, InnerStride::one}};
  k.body = {load(0), load(1), op(Op::add, {0, 1}), store(2, 2)};
  return k;
}

/// A transposed input (inner stride any) times a row broadcast (inner stride zero), rank 3.
Kernel rank3() {
  Kernel k;
  k.name = "kiln_rank3";
  k.rank = 3;
  k.params = {{DType::f32, false, InnerStride::any},
              {DType::f32, false, InnerStride::zero},
              {DType::f32, true, InnerStride::one}};
  k.body = {load(0), load(1), op(Op::mul, {0, 1}), store(2, 2)};
  return k;
}

/// Mixed dtypes with f16 intermediates, a strided bf16 input and a bool output.
Kernel halfChain() {
  Kernel k;
  k.name = "kiln_half_chain";
  k.rank = 2;
  const DType h = DType::f16, f = DType::f32;
  k.params = {{f, false, InnerStride::one},
              {DType::i32, false, InnerStride::zero},
              {DType::bf16, false, InnerStride::any},
              {f, true, InnerStride::one},
              {h, true, InnerStride::one},
              {DType::boolean, true, InnerStride::one}};
  k.body = {load(0, f),
            load(1, DType::i32),
            load(2, DType::bf16),
            op(Op::cast, {0}, {{"dtype", h}}, h),
            constant(3.0, h),
            op(Op::mul, {3, 4}, {}, h),
            op(Op::exp, {5}, {}, h),
            op(Op::cast, {1}, {{"dtype", h}}, h),
            op(Op::add, {6, 7}, {}, h),
            op(Op::cast, {8}, {{"dtype", f}}, f),
            op(Op::cast, {2}, {{"dtype", f}}, f),
            op(Op::gt, {9, 10}, {}, DType::boolean),
            op(Op::where, {11, 9, 10}, {}, f),
            store(3, 12, f),
            store(4, 8, h),
            store(5, 11, DType::boolean)};
  return k;
}

/// y = dropout(relu(x), seed, offset) * x in `d`: rank 1 and vectorized,
/// or rank 2 with a transposed x, or with a strided index space.
Kernel reluDropoutMul(DType d, InnerStride xInner = InnerStride::one, InnerStride space = InnerStride::one) {
  Kernel k;
  k.name = fmt::format("kiln_dropout_{}_{}{}", dtypeName(d), xInner == InnerStride::any ? "x" : "",
                       space == InnerStride::any ? "s" : "");
  k.rank = xInner == InnerStride::any || space == InnerStride::any ? 2 : 1;
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

/// rand or randn (`draw`) of `d` on its own: seed and offset broadcast, the
/// element's index from the one index space (Note [Random fills]).
Kernel randomFill(Op draw, DType d) {
  Kernel k;
  k.name = fmt::format("kiln_{}_{}", ir::opName(draw), dtypeName(d));
  k.params = {{DType::i64, false, InnerStride::zero}, {DType::i64, false, InnerStride::zero}, {d, true, InnerStride::one}};
  k.indexSpaces = {InnerStride::one};
  k.body = {load(0, DType::i64), load(1, DType::i64), index(0), op(draw, {0, 1, 2}, {{"dtype", d}, {"shape", std::vector<int64_t>{}}}, d), store(2, 3, d)};
  return k;
}

/// A comparison with a bool output: four bytes at a time.
Kernel compareToBool() {
  Kernel k;
  k.name = "kiln_cmp_bool";
  k.params = {{DType::f32, false, InnerStride::one}, {DType::boolean, true, InnerStride::one}};
  k.body = {load(0), constant(0.5), op(Op::gt, {0, 1}, {}, DType::boolean), store(1, 2, DType::boolean)};
  return k;
}

/// Integer constants beyond 2^53 and the int64 limits, exact in every
/// dialect (Note [Integer constants are exact]): x == 2^60 + 2, x + INT64_MIN,
/// x * (2^53 + 1), and y + (2^60 + 2^36 + 1) rounded once to f32.
Kernel intConstants() {
  const DType i64 = DType::i64, b = DType::boolean;
  Kernel k;
  k.name = "kiln_int_constants";
  k.params = {{i64, false, InnerStride::one}, {DType::f32, false, InnerStride::one},
              {b, true, InnerStride::one},    {i64, true, InnerStride::one},
              {i64, true, InnerStride::one},  {DType::f32, true, InnerStride::one}};
  k.body = {load(0, i64),
            load(1),
            constant((int64_t{1} << 60) + 2, i64),
            op(Op::eq, {0, 2}, {}, b),
            constant(std::numeric_limits<int64_t>::min(), i64),
            op(Op::add, {0, 4}, {}, i64),
            constant((int64_t{1} << 53) + 1, i64),
            op(Op::mul, {0, 6}, {}, i64),
            constant((int64_t{1} << 60) + (int64_t{1} << 36) + 1, DType::f32),
            op(Op::add, {1, 8}),
            store(2, 3, b),
            store(3, 5, i64),
            store(4, 7, i64),
            store(5, 9)};
  return k;
}

// --- Reduction kernels. ---

/// sum of `d` as the lowering writes it: floats accumulate in f64, integers
/// and bool in i64; bool and i32 sums are i64.
Kernel sumKernel(DType d) {
  const DType acc = isFloatingPoint(d) ? DType::f64 : DType::i64;
  const DType out = d == DType::boolean || d == DType::i32 ? DType::i64 : d;
  return rowKernel(fmt::format("kiln_sum_{}", dtypeName(d)), d, out,
                   {load(0, d), op(Op::cast, {0}, {{"dtype", acc}}, acc), reduce(ReduceOp::sum, 1, acc),
                    op(Op::cast, {2}, {{"dtype", out}}, out), store(1, 3, out)});
}

/// Every reduction of `d` over one row in one kernel, as fuse-reductions
/// makes of reductions over the same rows: amax, amin, argmax (not on
/// bool) and the sum, each stored once per row.
Kernel allReductionsOf(DType d) {
  const DType acc = isFloatingPoint(d) ? DType::f64 : DType::i64;
  const DType sum = d == DType::boolean || d == DType::i32 ? DType::i64 : d;
  Kernel k;
  k.name = fmt::format("kiln_rows_{}", dtypeName(d));
  k.rank = 2;
  k.reduceRank = 1;
  k.params = {
      {d, false, InnerStride::one, false}, {d, true, InnerStride::zero, true}, {d, true, InnerStride::zero, true}};
  k.body = {load(0, d), reduce(ReduceOp::max, 0, d), reduce(ReduceOp::min, 0, d), store(1, 1, d), store(2, 2, d)};
  if (d != DType::boolean) {
    k.params.push_back({DType::i64, true, InnerStride::zero, true});
    k.body.push_back(reduce(ReduceOp::argmax, 0, DType::i64));
    k.body.push_back(store(3, static_cast<int>(k.body.size()) - 1, DType::i64));
  }
  // The sum last: its output is the last param.
  k.params.push_back({sum, true, InnerStride::zero, true});
  const int at = static_cast<int>(k.body.size());
  k.body.push_back(op(Op::cast, {0}, {{"dtype", acc}}, acc));
  k.body.push_back(reduce(ReduceOp::sum, at, acc));
  k.body.push_back(op(Op::cast, {at + 1}, {{"dtype", sum}}, sum));
  k.body.push_back(store(k.numParams() - 1, at + 2, sum));
  return k;
}

// --- Lowered kernels. ---

ir::TensorType type(DType d, ir::Shape s) { return {d, std::move(s), Device::cpu()}; }
ir::TensorType f32(ir::Shape s) { return type(DType::f32, std::move(s)); }

/// The kernels of `fn` traced with `inputs` and run through kiln::compile's pipeline.
template <class F>
void addLowered(std::vector<LoweredCase>& out, const std::string& program, F fn,
                const std::vector<ir::TensorType>& inputs) {
  Trace t = trace(fn, inputs, program);
  passes::PassManager(CompileOptions{}.pipeline).run(*t.graph);
  for (const ir::Node* n : t.graph->nodes()) {
    if (n->op() != Op::fusion && !isReductionNode(*n)) continue;
    for (LoweredKernel& k : lowerKernels(*n)) {
      LoweredCase c{program, std::move(k), {}, {}};
      for (const ir::Value* v : n->inputs()) c.inputs.push_back(v->type());
      for (const ir::Value* v : n->outputs()) c.results.push_back(v->type());
      out.push_back(std::move(c));
    }
  }
}

std::vector<Tensor> layerNormBackward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) {
  Tensor xx = x.detach().setRequiresGrad(), ww = w.detach().setRequiresGrad(), bb = b.detach().setRequiresGrad();
  layerNorm(dropout(relu(xx), 0.1), {300}, ww, bb).backward(g);
  return {xx.grad(), ww.grad(), bb.grad()};
}

}  // namespace

std::vector<Kernel> elementwiseKernels() {
  std::vector<Kernel> ks = {everyOpChain(),
                            biasAdd(InnerStride::one),
                            biasAdd(InnerStride::zero),
                            biasAdd(InnerStride::any),
                            rank3(),
                            halfChain(),
                            compareToBool(),
                            intConstants()};
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::f64}) ks.push_back(reluDropoutMul(d));
  ks.push_back(reluDropoutMul(DType::f32, InnerStride::any));
  ks.push_back(reluDropoutMul(DType::f32, InnerStride::one, InnerStride::any));
  for (auto [op, d] : {std::pair{Op::rand, DType::f32}, std::pair{Op::rand, DType::f64}, std::pair{Op::rand, DType::f16},
                       std::pair{Op::randn, DType::f32}, std::pair{Op::randn, DType::f64},
                       std::pair{Op::randn, DType::bf16}})
    ks.push_back(randomFill(op, d));
  return ks;
}

std::vector<Kernel> reductionKernels() {
  std::vector<Kernel> ks;
  for (DType d : kAllDTypes) {
    const std::string t(dtypeName(d));
    for (ReduceOp o : {ReduceOp::max, ReduceOp::min})
      ks.push_back(rowKernel(fmt::format("kiln_{}_{}", reduceOpName(o), t), d, d,
                             {load(0, d), reduce(o, 0, d), store(1, 1, d)}));
    if (d != DType::boolean)
      ks.push_back(rowKernel("kiln_argmax_" + t, d, DType::i64,
                             {load(0, d), reduce(ReduceOp::argmax, 0, DType::i64), store(1, 1, DType::i64)}));
    ks.push_back(sumKernel(d));
    ks.push_back(allReductionsOf(d));
  }
  // i32 and f32 sums in their own dtype (the kernel form allows them).
  ks.push_back(rowKernel("kiln_sum_i32_i32", DType::i32, DType::i32,
                         {load(0, DType::i32), reduce(ReduceOp::sum, 0, DType::i32), store(1, 1, DType::i32)}));
  ks.push_back(rowKernel("kiln_sum_f32_f32", DType::f32, DType::f32, {load(0), reduce(ReduceOp::sum, 0), store(1, 1)}));
  // var: two passes, the mean first.
  ks.push_back(rowKernel(
      "kiln_var", DType::f32, DType::f32,
      {load(0), op(Op::cast, {0}, {{"dtype", DType::f64}}, DType::f64), extent(DType::f64),
       reduce(ReduceOp::sum, 1, DType::f64), op(Op::div, {3, 2}, {}, DType::f64), op(Op::sub, {1, 4}, {}, DType::f64),
       op(Op::mul, {5, 5}, {}, DType::f64), reduce(ReduceOp::sum, 6, DType::f64), op(Op::div, {7, 2}, {}, DType::f64),
       op(Op::cast, {8}, {{"dtype", DType::f32}}, DType::f32), store(1, 9)}));
  // softmax: three passes, the last one storing along the row.
  Kernel softmax = rowKernel("kiln_softmax", DType::f32, DType::f32,
                             {load(0), reduce(ReduceOp::max, 0), op(Op::sub, {0, 1}), op(Op::exp, {2}),
                              reduce(ReduceOp::sum, 3), op(Op::div, {3, 4}), store(1, 5)});
  softmax.params[1] = {DType::f32, true, InnerStride::one, false};
  ks.push_back(softmax);
  // Two reduced dims, a strided row, and an outer input added in the epilogue.
  Kernel bias;
  bias.name = "kiln_sum_bias";
  bias.rank = 3;
  bias.reduceRank = 2;
  bias.params = {{DType::f32, false, InnerStride::any, false},
                 {DType::f32, false, InnerStride::zero, true},
                 {DType::f32, true, InnerStride::zero, true}};
  bias.body = {load(0), load(1), reduce(ReduceOp::sum, 0), op(Op::add, {2, 1}), store(2, 3)};
  ks.push_back(bias);
  return ks;
}

std::vector<LoweredCase> loweredCases() {
  std::vector<LoweredCase> out;
  addLowered(out, "softmax", [](const Tensor& x) { return softmax(x, -1); }, {f32({16, 300})});
  addLowered(out, "log_softmax", [](const Tensor& x) { return logSoftmax(x, 1); }, {f32({16, 300})});
  auto ln = [](const Tensor& x, const Tensor& w, const Tensor& b) { return layerNorm(x, {300}, w, b); };
  addLowered(out, "layer_norm", ln, {f32({16, 300}), f32({300}), f32({300})});
  addLowered(out, "layer_norm_f16", ln,
             {type(DType::f16, {16, 300}), type(DType::f16, {300}), type(DType::f16, {300})});
  addLowered(
      out, "relu_dropout_layer_norm",
      [](const Tensor& x, const Tensor& w, const Tensor& b) { return layerNorm(dropout(relu(x), 0.1), {300}, w, b); },
      {f32({16, 300}), f32({300}), f32({300})});
  addLowered(
      out, "relu_dropout_layer_norm_backward",
      [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) { return layerNormBackward(x, w, b, g); },
      {f32({16, 300}), f32({300}), f32({300}), f32({16, 300})});
  addLowered(out, "cross_entropy", [](const Tensor& x, const Tensor& t) { return crossEntropy(x, t); },
             {f32({16, 10}), type(DType::i64, {16})});
  addLowered(out, "column_sum", [](const Tensor& x) { return sum(x, {0}); }, {f32({300, 40})});
  addLowered(out, "layer_norm_backward",
             [](const Tensor& x, const Tensor& w, const Tensor& g) {
               Tensor xx = x.detach().setRequiresGrad(), ww = w.detach().setRequiresGrad();
               layerNorm(xx, {256}, ww, Tensor()).backward(g);
               return std::vector<Tensor>{xx.grad(), ww.grad()};
             },
             {f32({32, 256}), f32({256}), f32({32, 256})});
  addLowered(out, "transposed_mul", [](const Tensor& x, const Tensor& y) { return x.t().narrow(1, 1, 8) * y; },
             {f32({10, 6}), f32({6, 8})});
  // One copy kernel per piece, each writing its slice, one of them transposed.
  addLowered(out, "cat",
             [](const Tensor& x, const Tensor& y) {
               return cat({x, y.t()}, 0);
             },
             {f32({2, 3}), f32({3, 2})});
  return out;
}

std::vector<Kernel> kernelKinds() {
  std::vector<Kernel> ks = elementwiseKernels();
  for (Kernel& k : reductionKernels()) ks.push_back(std::move(k));
  std::set<std::string> names;
  for (LoweredCase& c : loweredCases())
    if (names.insert(c.lowered.kernel.name).second) ks.push_back(std::move(c.lowered.kernel));
  return ks;
}

std::vector<Kernel> allGpuKernels() {
  std::vector<Kernel> ks = kernelKinds();
  for (const OpCase& c : allOpCases()) ks.push_back(oneOpKernel(c));
  return ks;
}

}  // namespace kiln::codegen::testing

// Lowering of reduction nodes (and fusions of them) to reduction Kernels:
// which values vary along the row, the domain with the reduced dims
// innermost, each parameter's strides, and the instructions each reduction
// op expands to (see codegen/lowering_reduction.h).
#include "codegen/lowering_reduction.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "runtime/error.h"

namespace kiln::codegen {

namespace {
/// The nodes a kernel computes and the values that stand for its inputs and
/// results: a reduction node alone, or a fusion node's body.
struct Group {
  std::vector<const ir::Value*> inputs;   ///< one per input of the node
  std::vector<const ir::Node*> nodes;     ///< in order
  std::vector<const ir::Value*> outputs;  ///< one per result of the node
};

Group groupOf(const ir::Node& node) {
  Group g;
  if (node.op() == ir::Op::fusion) {
    const ir::Graph& body = *node.body();
    g.inputs.assign(body.inputs().begin(), body.inputs().end());
    const std::vector<ir::Node*> nodes = body.nodes();  // a copy: take begin and end of one
    g.nodes.assign(nodes.begin(), nodes.end());
    g.outputs.assign(body.outputs().begin(), body.outputs().end());
  } else {
    g.inputs.assign(node.inputs().begin(), node.inputs().end());
    g.nodes = {&node};
    g.outputs.assign(node.outputs().begin(), node.outputs().end());
  }
  return g;
}

InnerStride innerClass(int64_t stride) {
  return stride == 0 ? InnerStride::zero : stride == 1 ? InnerStride::one : InnerStride::any;
}

/// Strides over `domain` of a value of `shape` laid out with `strides`:
/// right-aligned, 0 along broadcast dims.
std::vector<int64_t> stridesOver(const ir::Shape& shape, const ir::Strides& strides, const ir::Shape& domain) {
  KILN_ASSERT(ir::broadcastShapes(shape, domain) == domain, "{} does not broadcast to {}", ir::shapeStr(shape),
              ir::shapeStr(domain));
  std::vector<int64_t> out(domain.size(), 0);
  const size_t lead = domain.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) out[lead + i] = strides[i];
  return out;
}

/// The instructions of a body, with the helpers the reduction ops expand with.
class BodyBuilder {
 public:
  int add(ScalarInstr s) {
    body.push_back(std::move(s));
    return static_cast<int>(body.size()) - 1;
  }
  DType dtypeOf(int v) const { return body[static_cast<size_t>(v)].dtype; }
  int op(ir::Op op, std::vector<int> operands, DType dtype) {
    return add(instr::op(op, std::move(operands), {}, dtype));
  }
  int castTo(int v, DType to) {
    if (dtypeOf(v) == to) return v;
    return add(instr::op(ir::Op::cast, {v}, {{"dtype", to}}, to));
  }

  /// Reduction node `n` of row value `x`: the instructions that compute its
  /// result, an outer value (docs/ops.md, "Reductions").
  int reduction(const ir::Node& n, int x) {
    const DType in = dtypeOf(x), out = n.output()->type().dtype;
    const ir::Op o = n.op();
    if (o == ir::Op::sum) {
      // Floats in f64, integers and bool in i64; one rounding at the end.
      const DType acc = isFloatingPoint(in) ? DType::f64 : DType::i64;
      return castTo(add(instr::reduce(ReduceOp::sum, castTo(x, acc), acc)), out);
    }
    if (o == ir::Op::mean) {
      const int s = add(instr::reduce(ReduceOp::sum, castTo(x, DType::f64), DType::f64));
      return castTo(op(ir::Op::div, {s, add(instr::extent(DType::f64))}, DType::f64), out);
    }
    if (o == ir::Op::amax) return add(instr::reduce(ReduceOp::max, x, in));
    if (o == ir::Op::amin) return add(instr::reduce(ReduceOp::min, x, in));
    if (o == ir::Op::argmax) return add(instr::reduce(ReduceOp::argmax, x, DType::i64));
    KILN_ASSERT(o == ir::Op::var, "no lowering for reduction {}", ir::opName(o));
    // Two passes in f64: the mean, then the squared deviations from it.
    const int x64 = castTo(x, DType::f64);
    const int n64 = add(instr::extent(DType::f64));
    const int mean = op(ir::Op::div, {add(instr::reduce(ReduceOp::sum, x64, DType::f64)), n64}, DType::f64);
    const int d = op(ir::Op::sub, {x64, mean}, DType::f64);
    const int m2 = add(instr::reduce(ReduceOp::sum, op(ir::Op::mul, {d, d}, DType::f64), DType::f64));
    const double correction = static_cast<double>(ir::intAttr(n.attrs(), "correction", "var", 1));
    const int dof = op(ir::Op::maximum,
                       {op(ir::Op::sub, {n64, add(instr::constant(correction, DType::f64))}, DType::f64),
                        add(instr::constant(0.0, DType::f64))},
                       DType::f64);
    return castTo(op(ir::Op::div, {m2, dof}, DType::f64), out);
  }

  std::vector<ScalarInstr> body;
};
}  // namespace

bool isReductionNode(const ir::Node& node) {
  if (ir::isReduction(node.op())) return true;
  if (node.op() != ir::Op::fusion || !node.body()) return false;
  for (const ir::Node* n : node.body()->nodes())
    if (ir::isReduction(n->op())) return true;
  return false;
}

LoweredKernel lowerReduction(const ir::Node& node, std::span<const ir::Layout> layouts) {
  KILN_ASSERT(isReductionNode(node), "lowerReduction of {}", ir::opName(node.op()));
  const Group g = groupOf(node);
  KILN_ASSERT(layouts.empty() || layouts.size() == g.inputs.size(), "{} layouts for {} inputs", layouts.size(),
              g.inputs.size());

  // Every reduction of the group reduces the same dims of the same domain.
  const ir::Node* first = nullptr;
  for (const ir::Node* n : g.nodes)
    if (ir::isReduction(n->op()) && !first) first = n;
  const ir::Shape domain = first->input(0)->type().shape;
  const ir::ReductionShape rs = ir::reductionShape(first->op(), first->input(0)->type(), first->attrs());
  for (const ir::Node* n : g.nodes) {
    if (!ir::isReduction(n->op())) continue;
    const ir::ReductionShape other = ir::reductionShape(n->op(), n->input(0)->type(), n->attrs());
    KILN_ASSERT(n->input(0)->type().shape == domain && other.dims == rs.dims && other.keepdim == rs.keepdim,
                "a fusion of reductions over different domains");
  }
  const ir::Shape outerShape = ir::reducedShape(domain, rs.dims, rs.keepdim);
  const int rank = static_cast<int>(domain.size());
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int d : rs.dims) reduced[static_cast<size_t>(d)] = true;

  // Which values are outer (one per output row): reduction results, and
  // ops that depend on one and whose shape has no extent along the reduced
  // dims (keepdim: size 1 there; else the reductions' result shape). Every
  // other op is a row value. An input is outer when only outer ops read it
  // (an epilogue operand such as a bias added to a sum).
  auto isConstant = [](const ir::Value* v) { return v->node() && v->node()->op() == ir::Op::constant; };
  auto outerShaped = [&](const ir::Shape& s) {
    if (!rs.keepdim) return ir::broadcastShapes(s, outerShape) == outerShape;
    if (s.size() > domain.size()) return false;
    const size_t lead = domain.size() - s.size();
    for (size_t i = 0; i < s.size(); ++i)
      if (reduced[lead + i] && s[i] != 1) return false;
    return true;
  };
  std::unordered_map<const ir::Value*, bool> outer, derived;
  for (const ir::Node* n : g.nodes) {
    bool d = ir::isReduction(n->op());
    for (const ir::Value* v : n->inputs()) d = d || derived[v];
    derived[n->output()] = d;
    outer[n->output()] = ir::isReduction(n->op()) || (d && outerShaped(n->output()->type().shape));
  }
  // Then, to a fixed point: an op with a row operand is a row value (when
  // the reduced dims have size 1 a row value has an outer shape), and an
  // input read by a row value is read along the row.
  const std::unordered_set<const ir::Node*> members(g.nodes.begin(), g.nodes.end());
  for (bool changed = true; changed;) {
    changed = false;
    for (const ir::Value* in : g.inputs) {
      bool o = true, used = false;
      for (const ir::Use& use : in->uses()) {
        if (!members.count(use.user)) continue;  // a top-level input's other readers
        used = true;
        o = o && outer[use.user->output()] && !ir::isReduction(use.user->op());
      }
      changed = changed || outer[in] != (o && used);
      outer[in] = o && used;
    }
    for (const ir::Node* n : g.nodes) {
      if (!outer[n->output()] || ir::isReduction(n->op())) continue;
      for (const ir::Value* v : n->inputs())
        if (!outer[v] && !isConstant(v)) {
          outer[n->output()] = false;
          changed = true;
        }
    }
  }

  // Parameters: the inputs, then the results; strides over the domain (an
  // outer value's shape is the reductions' result shape, whose dims are the
  // domain's kept dims).
  std::vector<int> keptDims;
  for (int d = 0; d < rank; ++d)
    if (!reduced[d] || rs.keepdim) keptDims.push_back(d);
  auto outerStrides = [&](const ir::Shape& shape, const ir::Strides& strides) {
    const std::vector<int64_t> over = stridesOver(shape, strides, outerShape);
    std::vector<int64_t> out(static_cast<size_t>(rank), 0);
    for (size_t i = 0; i < keptDims.size(); ++i)
      if (!reduced[static_cast<size_t>(keptDims[i])]) out[static_cast<size_t>(keptDims[i])] = over[i];
    return out;
  };
  LoweredKernel result;
  Kernel& k = result.kernel;
  std::vector<std::vector<int64_t>> strides;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::TensorType& t = g.inputs[i]->type();
    const ir::Layout layout = layouts.empty() ? ir::contiguousLayout(t.shape) : layouts[i];
    const bool o = outer.at(g.inputs[i]);
    k.params.push_back({t.dtype, false, InnerStride::one, o});
    strides.push_back(o ? outerStrides(t.shape, layout.strides) : stridesOver(t.shape, layout.strides, domain));
    result.bindings.push_back({false, static_cast<int>(i), layout.offset});
  }
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    const ir::TensorType& t = g.outputs[j]->type();
    const bool o = outer.at(g.outputs[j]);
    KILN_ASSERT(t.shape == (o ? outerShape : domain), "fusion result {} is neither a row nor an outer value", t.str());
    k.params.push_back({t.dtype, true, InnerStride::one, o});
    const ir::Strides contiguous = ir::contiguousStrides(t.shape);
    strides.push_back(o ? outerStrides(t.shape, contiguous) : contiguous);
    result.bindings.push_back({true, static_cast<int>(j), 0});
  }

  // The domain: kept dims, then reduced dims, each group coalesced alone.
  std::vector<int64_t> outerSizes, rowSizes;
  std::vector<std::vector<int64_t>> outerStr(strides.size()), rowStr(strides.size());
  for (int d = 0; d < rank; ++d) {
    (reduced[d] ? rowSizes : outerSizes).push_back(domain[static_cast<size_t>(d)]);
    for (size_t p = 0; p < strides.size(); ++p) (reduced[d] ? rowStr : outerStr)[p].push_back(strides[p][d]);
  }
  coalesce(outerSizes, outerStr);
  coalesce(rowSizes, rowStr);
  k.rank = static_cast<int>(outerSizes.size() + rowSizes.size());
  k.reduceRank = static_cast<int>(rowSizes.size());
  for (size_t p = 0; p < k.params.size(); ++p) {
    KILN_ASSERT(!k.params[p].outer || std::all_of(rowStr[p].begin(), rowStr[p].end(), [](int64_t s) { return s == 0; }),
                "outer param {} varies along the row", p);
    k.params[p].inner = k.params[p].outer ? InnerStride::zero : innerClass(rowStr[p].back());
  }

  // The body: a load per input, the nodes in order, the stores.
  BodyBuilder b;
  std::unordered_map<const ir::Value*, int> index;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    index[g.inputs[i]] = b.add(instr::load(static_cast<int>(i), g.inputs[i]->type().dtype));
  std::string opsName;
  for (const ir::Node* n : g.nodes) {
    KILN_ASSERT(n->numOutputs() == 1, "{} with {} results in a reduction kernel", ir::opName(n->op()), n->numOutputs());
    const DType dtype = n->output()->type().dtype;
    if (n->op() == ir::Op::constant) {
      index[n->output()] = b.add(instr::constant(ir::floatAttr(n->attrs(), "value", "constant"), dtype));
      continue;
    }
    if (opsName.size() < 40) opsName += "_" + std::string(ir::opName(n->op()));
    if (ir::isReduction(n->op())) {
      index[n->output()] = b.reduction(*n, index.at(n->input(0)));
      continue;
    }
    KILN_ASSERT(n->info().kind == ir::OpKind::elementwise, "{} in a reduction kernel", ir::opName(n->op()));
    // Reduction kernels have no index spaces yet (codegen/kernel.h); issue 5's
    // fuse-reductions, which builds such fusions, adds them.
    KILN_ASSERT(!ir::usesElementIndex(n->op()), "{} in a reduction kernel is not supported yet", ir::opName(n->op()));
    std::vector<int> operands;
    for (const ir::Value* v : n->inputs()) {
      // A row value reading an outer one reads its row's element: right for
      // keepdim results (size 1 along the reduced dims) and constants only.
      KILN_ASSERT(outer.at(n->output()) || !outer.at(v) || rs.keepdim || isConstant(v),
                  "{} reads a reduction result without keepdim along the row", ir::opName(n->op()));
      operands.push_back(index.at(v));
    }
    index[n->output()] = b.add(instr::op(n->op(), std::move(operands), n->attrs(), dtype));
  }
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    const int param = static_cast<int>(g.inputs.size() + j);
    b.add(instr::store(param, index.at(g.outputs[j]), g.outputs[j]->type().dtype));
  }
  k.body = std::move(b.body);
  k.name = fmt::format("kiln{}_{:08x}", opsName, k.hash() & 0xffffffffu);

  LaunchArgs& launch = result.launch;
  launch.numel = 1;
  for (int64_t s : outerSizes) launch.numel *= s;
  launch.args = outerSizes;
  launch.args.insert(launch.args.end(), rowSizes.begin(), rowSizes.end());
  for (size_t p = 0; p < strides.size(); ++p) {
    launch.args.insert(launch.args.end(), outerStr[p].begin(), outerStr[p].end());
    launch.args.insert(launch.args.end(), rowStr[p].begin(), rowStr[p].end());
  }
  return result;
}

std::vector<LoweredKernel> lowerKernels(const ir::Node& node, std::span<const ir::Layout> inputs) {
  if (isReductionNode(node)) return {lowerReduction(node, inputs)};
  return lowerFusionKernels(node, inputs);
}

int64_t reductionGrain(const Kernel& kernel, const LaunchArgs& launch) {
  int64_t row = 1;
  for (int d = kernel.outerRank(); d < kernel.rank; ++d)
    row *= std::max<int64_t>(launch.args[static_cast<size_t>(d)], 1);
  const int64_t rows = (32768 + row - 1) / row;
  return std::max<int64_t>(64, (rows + 63) / 64 * 64);
}

}  // namespace kiln::codegen

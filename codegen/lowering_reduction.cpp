// Lowering of reduction nodes (and fusions of them) to reduction Kernels:
// which values vary along the row, the domain with the reduced dims
// innermost, each parameter's strides, and the instructions each reduction
// op expands to (see codegen/lowering_reduction.h).
#include "codegen/lowering_reduction.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <unordered_map>
#include <unordered_set>

#include "ir/reduction_fusion.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {
/// Rows up to this long get a bound for a stash (Kernel::maxRowLength).
constexpr int64_t kMaxStashedRow = 16384;

/// A block argument seen through view ops: where its elements sit in that
/// input's buffer.
struct View {
  int input = -1;
  ir::Shape shape;
  ir::Layout layout;
};

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
  const ir::ReductionGroup g = ir::reductionGroupOf(node);
  KILN_ASSERT(layouts.empty() || layouts.size() == g.inputs.size(), "{} layouts for {} inputs", layouts.size(),
              g.inputs.size());
  // What each value is (ir/reduction_fusion.h); the verifier has checked
  // the rules, so a broken one here is a kiln bug.
  ir::ReductionGroupInfo info;
  if (auto error = ir::analyzeReductionGroup(g, &info))
    KILN_ASSERT(false, "lowering a fusion of reductions that breaks its rules: {}", error->message);
  const ir::RowDomain& rows = info.rows;
  const ir::Shape& domain = rows.domain;
  const int rank = static_cast<int>(domain.size());
  const std::vector<bool>& reduced = rows.reduced;
  std::vector<int> keptDims;
  for (int d = 0; d < rank; ++d)
    if (!reduced[static_cast<size_t>(d)]) keptDims.push_back(d);

  // Views: block arguments and view ops over them, with where their
  // elements sit in the input's buffer. A view of a constant is that constant.
  std::unordered_map<const ir::Value*, View> views;
  std::unordered_map<const ir::Value*, const ir::Value*> constantOf;  // constants and their views -> the constant
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::Shape& shape = g.inputs[i]->type().shape;
    views[g.inputs[i]] = View{static_cast<int>(i), shape, layouts.empty() ? ir::contiguousLayout(shape) : layouts[i]};
  }
  for (const ir::Node* n : g.nodes) {
    if (n->op() == ir::Op::constant) constantOf[n->output()] = n->output();
    if (!ir::isViewOp(n->op()) || !info.isView.count(n->output())) continue;
    if (auto c = constantOf.find(n->input(0)); c != constantOf.end()) {
      constantOf[n->output()] = c->second;
      continue;
    }
    const View& in = views.at(n->input(0));
    std::optional<ir::Layout> moved = ir::movedLayout(n->op(), n->attrs(), in.shape, in.layout);
    KILN_ASSERT(moved, "{} in a fusion of reductions is not a view of its input", ir::opName(n->op()));
    views[n->output()] = View{in.input, n->output()->type().shape, std::move(*moved)};
  }

  // Strides over the domain of a value per row of shape `context` (K or Q)
  // laid out with `strides` over `shape`: 0 along the reduced dims.
  auto outerStrides = [&](const ir::Shape& shape, const ir::Strides& strides, const ir::Shape& context) {
    const std::vector<int64_t> over = stridesOver(shape, strides, context);
    std::vector<int64_t> out(static_cast<size_t>(rank), 0);
    if (context.size() == domain.size()) {
      for (int d : keptDims) out[static_cast<size_t>(d)] = over[static_cast<size_t>(d)];
    } else {
      for (size_t i = 0; i < keptDims.size(); ++i) out[static_cast<size_t>(keptDims[i])] = over[i];
    }
    return out;
  };

  // Parameters: one per distinct (view, strides, offset, row or outer) the
  // body reads, so an input read along the row and once per row (a bias of
  // shape [R,1] added to x and to sum(x)) is two parameters; then the results.
  struct Param {
    DType dtype;
    bool outer;
    std::vector<int64_t> strides;
    ParamBinding binding;
    bool operator==(const Param&) const = default;
  };
  std::vector<Param> params;
  auto paramFor = [&](const View& v, DType dtype, const ir::Node* reader) {
    // With K == D a view has one class (ir::ReductionGroupInfo::viewReadAlongRow).
    const bool along = info.readsAlongRow(reader);
    Param p{dtype,
            !along,
            along ? stridesOver(v.shape, v.layout.strides, domain)
                  : outerStrides(v.shape, v.layout.strides, reader->output()->type().shape),
            {false, v.input, v.layout.offset}};
    auto found = std::find(params.begin(), params.end(), p);
    if (found != params.end()) return static_cast<int>(found - params.begin());
    params.push_back(std::move(p));
    return static_cast<int>(params.size()) - 1;
  };
  for (const ir::Node* n : g.nodes)
    if (n->info().kind == ir::OpKind::elementwise || ir::isReduction(n->op()))
      for (const ir::Value* v : n->inputs())
        if (auto it = views.find(v); it != views.end()) paramFor(it->second, v->type().dtype, n);
  std::stable_sort(params.begin(), params.end(),
                   [](const Param& a, const Param& b) { return a.binding.index < b.binding.index; });
  const int numLoads = static_cast<int>(params.size());
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    const ir::TensorType& t = g.outputs[j]->type();
    const bool o = info.isOuter(g.outputs[j]);
    const ir::Strides contiguous = ir::contiguousStrides(t.shape);
    params.push_back(
        {t.dtype, o, o ? outerStrides(t.shape, contiguous, t.shape) : contiguous, {true, static_cast<int>(j), 0}});
  }

  // Index spaces (codegen/kernel.h): one per distinct result shape whose
  // element index an op reads (dropout, a row value), the contiguous
  // strides of that shape over the domain, so the index is the element's
  // row-major position in the op's result however the domain is coalesced.
  std::vector<std::vector<int64_t>> spaces;
  std::unordered_map<const ir::Node*, int> spaceOf;
  for (const ir::Node* n : g.nodes) {
    if (n->info().kind != ir::OpKind::elementwise || !ir::usesElementIndex(n->op())) continue;
    KILN_ASSERT(info.readsAlongRow(n), "{} of a value per row in a reduction kernel", ir::opName(n->op()));
    const ir::Shape& shape = n->output()->type().shape;
    std::vector<int64_t> strides = stridesOver(shape, ir::contiguousStrides(shape), domain);
    auto found = std::find(spaces.begin(), spaces.end(), strides);
    if (found == spaces.end()) found = spaces.insert(spaces.end(), std::move(strides));
    spaceOf[n] = static_cast<int>(found - spaces.begin());
  }

  LoweredKernel result;
  Kernel& k = result.kernel;
  for (const Param& p : params) {
    k.params.push_back({p.dtype, p.binding.output, InnerStride::one, p.outer});
    result.bindings.push_back(p.binding);
  }

  // The domain: kept dims, then reduced dims, each group coalesced alone
  // (parameters, then index spaces, take part).
  std::vector<std::vector<int64_t>> strided;
  for (const Param& p : params) strided.push_back(p.strides);
  strided.insert(strided.end(), spaces.begin(), spaces.end());
  std::vector<int64_t> outerSizes, rowSizes;
  std::vector<std::vector<int64_t>> outerStr(strided.size()), rowStr(strided.size());
  for (int d = 0; d < rank; ++d) {
    (reduced[d] ? rowSizes : outerSizes).push_back(domain[static_cast<size_t>(d)]);
    for (size_t p = 0; p < strided.size(); ++p)
      (reduced[d] ? rowStr : outerStr)[p].push_back(strided[p][static_cast<size_t>(d)]);
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
  for (size_t s = 0; s < spaces.size(); ++s) k.indexSpaces.push_back(innerClass(rowStr[params.size() + s].back()));

  // The body: a load per parameter read, the nodes in order, the stores.
  BodyBuilder b;
  for (int p = 0; p < numLoads; ++p) b.add(instr::load(p, params[static_cast<size_t>(p)].dtype));
  std::unordered_map<const ir::Value*, int> index;
  auto operand = [&](const ir::Value* v, const ir::Node* reader) {
    if (auto c = constantOf.find(v); c != constantOf.end()) return index.at(c->second);
    if (auto it = views.find(v); it != views.end()) return paramFor(it->second, v->type().dtype, reader);
    return index.at(v);
  };
  std::unordered_map<int, int> spaceInstr;  // index space -> its index instruction
  std::string opsName;
  for (const ir::Node* n : g.nodes) {
    KILN_ASSERT(n->numOutputs() == 1, "{} with {} results in a reduction kernel", ir::opName(n->op()), n->numOutputs());
    const DType dtype = n->output()->type().dtype;
    if (n->op() == ir::Op::constant) {
      index[n->output()] = b.add(instr::constant(ir::floatAttr(n->attrs(), "value", "constant"), dtype));
      continue;
    }
    if (n->info().kind == ir::OpKind::movement) {
      // Views are read where their readers are; a reshape of a value per
      // row is the same values.
      if (!info.isView.count(n->output())) index[n->output()] = index.at(n->input(0));
      continue;
    }
    if (opsName.size() < 40) opsName += "_" + std::string(ir::opName(n->op()));
    if (ir::isReduction(n->op())) {
      index[n->output()] = b.reduction(*n, operand(n->input(0), n));
      continue;
    }
    KILN_ASSERT(n->info().kind == ir::OpKind::elementwise, "{} in a reduction kernel", ir::opName(n->op()));
    std::vector<int> operands;
    for (const ir::Value* v : n->inputs()) operands.push_back(operand(v, n));
    if (auto space = spaceOf.find(n); space != spaceOf.end()) {
      // The element's index, as the op's last operand (one instruction per space).
      auto [it, fresh] = spaceInstr.emplace(space->second, -1);
      if (fresh) it->second = b.add(instr::index(space->second));
      operands.push_back(it->second);
    }
    index[n->output()] = b.add(instr::op(n->op(), std::move(operands), n->attrs(), dtype));
  }
  KILN_ASSERT(static_cast<int>(params.size()) == numLoads + static_cast<int>(g.outputs.size()),
              "a parameter appeared after the loads");
  for (size_t j = 0; j < g.outputs.size(); ++j)
    b.add(instr::store(numLoads + static_cast<int>(j), index.at(g.outputs[j]), g.outputs[j]->type().dtype));
  k.body = std::move(b.body);
  // Rows short enough to stash the values later passes need again (Note
  // [Stashed row values] in codegen/kernel.cpp) bound the kernel's row
  // length by a power of two, so kernels for rows of similar lengths share.
  int64_t rowLength = 1;
  for (int64_t size : rowSizes) rowLength *= size;
  const KernelStages stages = kernelStages(k);
  if (rowLength <= kMaxStashedRow &&
      std::find(stages.stashed.begin(), stages.stashed.end(), true) != stages.stashed.end())
    k.maxRowLength = std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(rowLength, 1)));
  k.name = fmt::format("kiln{}_{:08x}", opsName, k.hash() & 0xffffffffu);

  LaunchArgs& launch = result.launch;
  launch.numel = 1;
  for (int64_t s : outerSizes) launch.numel *= s;
  launch.args = outerSizes;
  launch.args.insert(launch.args.end(), rowSizes.begin(), rowSizes.end());
  for (size_t p = 0; p < strided.size(); ++p) {
    launch.args.insert(launch.args.end(), outerStr[p].begin(), outerStr[p].end());
    launch.args.insert(launch.args.end(), rowStr[p].begin(), rowStr[p].end());
  }
  return result;
}

std::vector<LoweredKernel> lowerKernels(const ir::Node& node, std::span<const ir::Layout> inputs,
                                        std::span<const ir::Layout> outputs) {
  if (isReductionNode(node)) {
    KILN_ASSERT(outputs.empty(), "a reduction written through given strides");
    return {lowerReduction(node, inputs)};
  }
  return lowerFusionKernels(node, inputs, outputs);
}

int64_t reductionGrain(const Kernel& kernel, const LaunchArgs& launch) {
  int64_t row = 1;
  for (int d = kernel.outerRank(); d < kernel.rank; ++d)
    row *= std::max<int64_t>(launch.args[static_cast<size_t>(d)], 1);
  const int64_t rows = (32768 + row - 1) / row;
  return std::max<int64_t>(64, (rows + 63) / 64 * 64);
}

}  // namespace kiln::codegen

// The kernel builder's phases (codegen/kernel_builder.h): views, strides
// over the domain, parameters and index spaces, the body's instructions
// (reductions expanded as docs/ops.md, "Reductions", says), coalescing,
// naming and launch arguments.
#include "codegen/kernel_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "runtime/error.h"

namespace kiln::codegen {

namespace {
/// Rows up to this long get a bound for a stash (Kernel::maxRowLength).
constexpr int64_t kMaxStashedRow = 16384;

InnerStride innerClass(int64_t stride) {
  return stride == 0 ? InnerStride::zero : stride == 1 ? InnerStride::one : InnerStride::any;
}

/// Strides over `target` of a value of `shape` laid out with `strides`:
/// right-aligned, 0 along broadcast dims.
std::vector<int64_t> stridesOn(const ir::Shape& shape, const ir::Strides& strides, const ir::Shape& target) {
  KILN_ASSERT(ir::broadcastShapes(shape, target) == target, "fusion operand {} does not broadcast to {}",
              ir::shapeStr(shape), ir::shapeStr(target));
  std::vector<int64_t> out(target.size(), 0);
  const size_t lead = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) out[lead + i] = strides[i];
  return out;
}
}  // namespace

BodyViews::BodyViews(std::span<const ir::Value* const> inputs, std::span<const ir::Layout> layouts,
                     std::span<const ir::Node* const> nodes) {
  KILN_ASSERT(layouts.empty() || layouts.size() == inputs.size(), "{} layouts for {} inputs", layouts.size(),
              inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Shape& shape = inputs[i]->type().shape;
    ir::Layout layout = layouts.empty() ? ir::contiguousLayout(shape) : layouts[i];
    KILN_ASSERT(layout.strides.size() == shape.size(), "layout of rank {} for fusion input {} of shape {}",
                layout.strides.size(), i, ir::shapeStr(shape));
    views_[inputs[i]] = View{static_cast<int>(i), shape, std::move(layout)};
  }
  for (const ir::Node* n : nodes) {
    if (n->op() == ir::Op::constant) constants_[n->output()] = n;
    if (!ir::isViewOp(n->op())) continue;
    if (auto c = constants_.find(n->input(0)); c != constants_.end()) {
      constants_[n->output()] = c->second;  // a fill moved is the same fill
      continue;
    }
    auto it = views_.find(n->input(0));
    if (it == views_.end()) continue;  // a movement of a computed value
    std::optional<ir::Layout> moved = ir::movedLayout(n->op(), n->attrs(), it->second.shape, it->second.layout);
    KILN_ASSERT(moved, "{} in a fusion body is not a view of its input", ir::opName(n->op()));
    views_[n->output()] = View{it->second.input, n->output()->type().shape, std::move(*moved)};
  }
}

const View* BodyViews::find(const ir::Value* v) const {
  auto it = views_.find(v);
  return it == views_.end() ? nullptr : &it->second;
}

const ir::Node* BodyViews::constant(const ir::Value* v) const {
  auto it = constants_.find(v);
  return it == constants_.end() ? nullptr : it->second;
}

KernelBuilder::KernelBuilder(ir::Shape domain) : domain_(std::move(domain)), reduced_(domain_.size(), false) {
  for (size_t d = 0; d < domain_.size(); ++d) keptDims_.push_back(static_cast<int>(d));
}

KernelBuilder::KernelBuilder(ir::Shape domain, std::vector<bool> reduced)
    : domain_(std::move(domain)), reduction_(true), reduced_(std::move(reduced)) {
  KILN_ASSERT(reduced_.size() == domain_.size(), "{} reduced flags for a domain of rank {}", reduced_.size(),
              domain_.size());
  for (size_t d = 0; d < domain_.size(); ++d)
    if (!reduced_[d]) keptDims_.push_back(static_cast<int>(d));
}

std::vector<int64_t> KernelBuilder::stridesOver(const ir::Shape& shape, const ir::Strides& strides) const {
  return stridesOn(shape, strides, domain_);
}

std::vector<int64_t> KernelBuilder::perRowStrides(const ir::Shape& shape, const ir::Strides& strides,
                                                  const ir::Shape& context) const {
  const std::vector<int64_t> over = stridesOn(shape, strides, context);
  std::vector<int64_t> out(domain_.size(), 0);
  if (context.size() == domain_.size()) {
    for (int d : keptDims_) out[static_cast<size_t>(d)] = over[static_cast<size_t>(d)];
  } else {
    for (size_t i = 0; i < keptDims_.size(); ++i) out[static_cast<size_t>(keptDims_[i])] = over[i];
  }
  return out;
}

int KernelBuilder::input(ParamSpec p) {
  auto found = std::find(params_.begin(), params_.end(), p);
  if (found != params_.end()) return static_cast<int>(found - params_.begin());
  KILN_ASSERT(numLoads_ < 0, "a view read by the body has no parameter");
  params_.push_back(std::move(p));
  return static_cast<int>(params_.size()) - 1;
}

void KernelBuilder::loadInputs() {
  KILN_ASSERT(numLoads_ < 0 && body_.empty(), "loadInputs twice, or after other instructions");
  std::stable_sort(params_.begin(), params_.end(),
                   [](const ParamSpec& a, const ParamSpec& b) { return a.binding.index < b.binding.index; });
  numLoads_ = static_cast<int>(params_.size());
  for (int p = 0; p < numLoads_; ++p) add(instr::load(p, params_[static_cast<size_t>(p)].dtype));
}

int KernelBuilder::output(ParamSpec p) {
  KILN_ASSERT(numLoads_ >= 0 && p.binding.output, "a result parameter before the loads, or bound to an input");
  params_.push_back(std::move(p));
  return static_cast<int>(params_.size()) - 1;
}

int KernelBuilder::add(ScalarInstr s) {
  body_.push_back(std::move(s));
  return static_cast<int>(body_.size()) - 1;
}

int KernelBuilder::castTo(int v, DType to) {
  if (dtypeOf(v) == to) return v;
  return add(instr::op(ir::Op::cast, {v}, {{"dtype", to}}, to));
}

int KernelBuilder::constant(const ir::Node& c) {
  const DType dtype = c.output()->type().dtype;
  return add(instr::constant(ir::constantValue(c.attrs(), dtype), dtype));
}

int KernelBuilder::elementIndex(const ir::Shape& shape) {
  std::vector<int64_t> strides = stridesOver(shape, ir::contiguousStrides(shape));
  auto found = std::find(spaces_.begin(), spaces_.end(), strides);
  if (found == spaces_.end()) found = spaces_.insert(spaces_.end(), std::move(strides));
  auto [it, fresh] = spaceInstr_.emplace(static_cast<int>(found - spaces_.begin()), -1);
  if (fresh) it->second = add(instr::index(it->first));
  return it->second;
}

int KernelBuilder::reduction(const ir::Node& n, int x) {
  KILN_ASSERT(isReduction(), "{} in an elementwise kernel", ir::opName(n.op()));
  const DType in = dtypeOf(x), out = n.output()->type().dtype;
  auto op = [&](ir::Op o, std::vector<int> operands) { return add(instr::op(o, std::move(operands), {}, DType::f64)); };
  const ir::Op o = n.op();
  if (o == ir::Op::sum) {
    // Floats in f64, integers and bool in i64; one rounding at the end.
    const DType acc = isFloatingPoint(in) ? DType::f64 : DType::i64;
    return castTo(add(instr::reduce(ReduceOp::sum, castTo(x, acc), acc)), out);
  }
  if (o == ir::Op::mean) {
    const int s = add(instr::reduce(ReduceOp::sum, castTo(x, DType::f64), DType::f64));
    return castTo(op(ir::Op::div, {s, add(instr::extent(DType::f64))}), out);
  }
  if (o == ir::Op::amax) return add(instr::reduce(ReduceOp::max, x, in));
  if (o == ir::Op::amin) return add(instr::reduce(ReduceOp::min, x, in));
  if (o == ir::Op::argmax) return add(instr::reduce(ReduceOp::argmax, x, DType::i64));
  KILN_ASSERT(o == ir::Op::var, "no lowering for reduction {}", ir::opName(o));
  // Two passes in f64: the mean, then the squared deviations from it.
  const int x64 = castTo(x, DType::f64);
  const int n64 = add(instr::extent(DType::f64));
  const int mean = op(ir::Op::div, {add(instr::reduce(ReduceOp::sum, x64, DType::f64)), n64});
  const int d = op(ir::Op::sub, {x64, mean});
  const int m2 = add(instr::reduce(ReduceOp::sum, op(ir::Op::mul, {d, d}), DType::f64));
  const double correction = static_cast<double>(ir::intAttr(n.attrs(), "correction", "var", 1));
  const int dof = op(ir::Op::maximum, {op(ir::Op::sub, {n64, add(instr::constant(correction, DType::f64))}),
                                       add(instr::constant(0.0, DType::f64))});
  return castTo(op(ir::Op::div, {m2, dof}), out);
}

/// The domain split into kept dims and reduced dims (an elementwise kernel
/// keeps all), each group coalesced alone over the parameters' and index
/// spaces' strides.
struct KernelBuilder::Coalesced {
  std::vector<int64_t> outerSizes, rowSizes;
  std::vector<std::vector<int64_t>> outerStrides, rowStrides;  ///< per parameter, then per index space
};

KernelBuilder::Coalesced KernelBuilder::coalesced() const {
  std::vector<std::vector<int64_t>> strided;
  for (const ParamSpec& p : params_) strided.push_back(p.strides);
  strided.insert(strided.end(), spaces_.begin(), spaces_.end());
  Coalesced c;
  c.outerStrides.resize(strided.size());
  c.rowStrides.resize(strided.size());
  for (size_t d = 0; d < domain_.size(); ++d) {
    const bool row = reduced_[d];
    (row ? c.rowSizes : c.outerSizes).push_back(domain_[d]);
    for (size_t p = 0; p < strided.size(); ++p) (row ? c.rowStrides : c.outerStrides)[p].push_back(strided[p][d]);
  }
  coalesce(c.outerSizes, c.outerStrides);
  if (isReduction()) coalesce(c.rowSizes, c.rowStrides);
  return c;
}

LoweredKernel KernelBuilder::finish(std::string_view opsName) {
  KILN_ASSERT(numLoads_ >= 0, "a kernel without loads made");
  LoweredKernel result;
  Kernel& k = result.kernel;
  for (const ParamSpec& p : params_) {
    k.params.push_back({p.dtype, p.binding.output, InnerStride::one, p.outer});
    result.bindings.push_back(p.binding);
  }
  const Coalesced c = coalesced();
  // The strides of the innermost dim: the row's in a reduction kernel.
  const std::vector<std::vector<int64_t>>& inner = isReduction() ? c.rowStrides : c.outerStrides;
  k.rank = static_cast<int>(c.outerSizes.size() + c.rowSizes.size());
  k.reduceRank = static_cast<int>(c.rowSizes.size());
  for (size_t p = 0; p < k.params.size(); ++p) {
    const std::vector<int64_t>& row = c.rowStrides[p];
    KILN_ASSERT(!k.params[p].outer || std::all_of(row.begin(), row.end(), [](int64_t s) { return s == 0; }),
                "outer param {} varies along the row", p);
    k.params[p].inner = k.params[p].outer ? InnerStride::zero : innerClass(inner[p].back());
  }
  for (size_t s = 0; s < spaces_.size(); ++s) k.indexSpaces.push_back(innerClass(inner[params_.size() + s].back()));
  k.body = std::move(body_);
  if (k.isReduction()) {
    // Rows short enough to stash the values later passes need again (Note
    // [Stashed row values] in codegen/kernel.cpp) bound the kernel's row
    // length by a power of two, so kernels for rows of similar lengths share.
    int64_t rowLength = 1;
    for (int64_t size : c.rowSizes) rowLength *= size;
    const KernelStages stages = kernelStages(k);
    if (rowLength <= kMaxStashedRow &&
        std::find(stages.stashed.begin(), stages.stashed.end(), true) != stages.stashed.end())
      k.maxRowLength = std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(rowLength, 1)));
  }
  k.name = fmt::format("kiln{}_{:08x}", opsName, k.hash() & 0xffffffffu);

  LaunchArgs& launch = result.launch;
  launch.numel = 1;
  for (int64_t s : c.outerSizes) launch.numel *= s;
  launch.args = c.outerSizes;
  launch.args.insert(launch.args.end(), c.rowSizes.begin(), c.rowSizes.end());
  for (size_t p = 0; p < c.outerStrides.size(); ++p) {
    launch.args.insert(launch.args.end(), c.outerStrides[p].begin(), c.outerStrides[p].end());
    launch.args.insert(launch.args.end(), c.rowStrides[p].begin(), c.rowStrides[p].end());
  }
  return result;
}

namespace {
/// The walk of lowerBody: the parameter each view operand is read through,
/// and the instruction of each value.
class BodyLowering {
 public:
  BodyLowering(KernelBuilder& b, const BodyViews& views, const ir::ReductionGroupInfo* rows)
      : b_(b), views_(views), rows_(rows) {}

  /// The parameter `reader` (nullptr: a store of the body's result) reads
  /// view `view` of `v` through: along the row, or once per row.
  ParamSpec paramFor(const View& view, const ir::Value* v, const ir::Node* reader) const {
    // With K == D a view has one class (ir::ReductionGroupInfo::viewReadAlongRow).
    const bool along = !rows_ || !reader || rows_->readsAlongRow(reader);
    return {v->type().dtype,
            !along,
            along ? b_.stridesOver(view.shape, view.layout.strides)
                  : b_.perRowStrides(view.shape, view.layout.strides, reader->output()->type().shape),
            {false, view.input, view.layout.offset}};
  }

  /// The instruction of `v` as `reader` reads it (a load's index is its parameter's).
  int operand(const ir::Value* v, const ir::Node* reader) {
    if (const ir::Node* c = views_.constant(v)) return index_.at(c->output());
    if (const View* view = views_.find(v)) return b_.input(paramFor(*view, v, reader));
    return index_.at(v);
  }

  /// The parameters, in the order of the fusion's inputs (then of first
  /// use), then the loads and the result parameters (written through
  /// `layouts`, else contiguously).
  void params(std::span<const ir::Node* const> nodes, std::span<const ir::Value* const> outputs,
              std::span<const ir::Layout> layouts) {
    for (const ir::Node* n : nodes)
      if (n->info().kind == ir::OpKind::elementwise || ir::isReduction(n->op()))
        for (const ir::Value* v : n->inputs())
          if (const View* view = views_.find(v)) b_.input(paramFor(*view, v, n));
    for (const ir::Value* out : outputs)
      if (const View* view = views_.find(out)) b_.input(paramFor(*view, out, nullptr));  // a copy
    b_.loadInputs();
    KILN_ASSERT(layouts.empty() || (!rows_ && layouts.size() == outputs.size()),
                "{} result layouts for {} results of a {} kernel", layouts.size(), outputs.size(),
                rows_ ? "reduction" : "elementwise");
    for (size_t j = 0; j < outputs.size(); ++j) {
      const ir::TensorType& t = outputs[j]->type();
      if (!layouts.empty()) {
        b_.output({t.dtype, false, layouts[j].strides, {true, static_cast<int>(j), layouts[j].offset}});
        continue;
      }
      const bool outer = rows_ && rows_->isOuter(outputs[j]);
      const ir::Strides contiguous = ir::contiguousStrides(t.shape);
      b_.output({t.dtype,
                 outer,
                 outer ? b_.perRowStrides(t.shape, contiguous, t.shape) : contiguous,
                 {true, static_cast<int>(j), 0}});
    }
  }

  void node(const ir::Node& n) {
    KILN_ASSERT(n.numOutputs() == 1, "{} in a fusion body with {} results", ir::opName(n.op()), n.numOutputs());
    if (n.op() == ir::Op::constant) {
      index_[n.output()] = b_.constant(n);
      return;
    }
    if (ir::isViewOp(n.op())) {
      // Views are read where their readers are; a reshape of a value per
      // row (a fusion of reductions) is the same values.
      if (views_.find(n.output()) || views_.constant(n.output())) return;
      KILN_ASSERT(rows_, "{} of a computed value in a fusion body", ir::opName(n.op()));
      index_[n.output()] = index_.at(n.input(0));
      return;
    }
    if (opsName_.size() < 40) opsName_ += "_" + std::string(ir::opName(n.op()));
    if (ir::isReduction(n.op())) {
      index_[n.output()] = b_.reduction(n, operand(n.input(0), &n));
      return;
    }
    KILN_ASSERT(n.info().kind == ir::OpKind::elementwise, "{} in a fusion body", ir::opName(n.op()));
    std::vector<int> operands;
    for (const ir::Value* v : n.inputs()) operands.push_back(operand(v, &n));
    if (ir::usesElementIndex(n.op())) {
      // The element's index, as the op's last operand.
      KILN_ASSERT(!rows_ || rows_->readsAlongRow(&n), "{} of a value per row in a reduction kernel",
                  ir::opName(n.op()));
      operands.push_back(b_.elementIndex(n.output()->type().shape));
    }
    index_[n.output()] = b_.add(instr::op(n.op(), std::move(operands), n.attrs(), n.output()->type().dtype));
  }

  std::string opsName() const { return opsName_; }

 private:
  KernelBuilder& b_;
  const BodyViews& views_;
  const ir::ReductionGroupInfo* rows_;
  std::unordered_map<const ir::Value*, int> index_;
  std::string opsName_;
};
}  // namespace

std::string lowerBody(KernelBuilder& builder, const BodyViews& views, std::span<const ir::Node* const> nodes,
                      std::span<const ir::Value* const> outputs, std::span<const ir::Layout> outputLayouts,
                      const ir::ReductionGroupInfo* rows) {
  BodyLowering walk(builder, views, rows);
  walk.params(nodes, outputs, outputLayouts);
  for (const ir::Node* n : nodes) walk.node(*n);
  for (size_t j = 0; j < outputs.size(); ++j)
    builder.add(instr::store(builder.numLoads() + static_cast<int>(j), walk.operand(outputs[j], nullptr),
                             outputs[j]->type().dtype));
  return walk.opsName();
}

}  // namespace kiln::codegen

// Lowering of fusion nodes to Kernels: views through movement ops, domain,
// parameter strides, coalescing, and the body as scalar instructions.
#include "codegen/lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "runtime/error.h"

namespace kiln::codegen {

namespace {
InnerStride innerClass(int64_t stride) {
  return stride == 0 ? InnerStride::zero : stride == 1 ? InnerStride::one : InnerStride::any;
}

/// A body value that is a fusion input seen through movement ops: where its
/// elements sit in that input's buffer.
struct View {
  int input = -1;
  ir::Shape shape;
  ir::Layout layout;
};

/// The views of a body: its inputs, and the results of movement ops over
/// them. A movement op over a constant is that constant (a fill moved is the
/// same fill); over a computed value it cannot be lowered, and the fusion
/// pass never puts one there.
std::unordered_map<const ir::Value*, View> bodyViews(const ir::Graph& body, std::span<const ir::Layout> inputs) {
  std::unordered_map<const ir::Value*, View> views;
  for (int i = 0; i < body.numInputs(); ++i) {
    const ir::Shape& shape = body.input(i)->type().shape;
    ir::Layout layout = inputs.empty() ? ir::contiguousLayout(shape) : inputs[i];
    KILN_ASSERT(layout.strides.size() == shape.size(), "layout of rank {} for fusion input {} of shape {}",
                layout.strides.size(), i, ir::shapeStr(shape));
    views[body.input(i)] = View{i, shape, std::move(layout)};
  }
  for (const ir::Node* n : body.nodes()) {
    if (!ir::isViewOp(n->op())) continue;
    auto it = views.find(n->input(0));
    if (it == views.end()) {
      const ir::Node* producer = n->input(0)->node();
      KILN_ASSERT(producer && (producer->op() == ir::Op::constant || ir::isViewOp(producer->op())),
                  "{} of a computed value in a fusion body", ir::opName(n->op()));
      continue;
    }
    std::optional<ir::Layout> moved = ir::movedLayout(n->op(), n->attrs(), it->second.shape, it->second.layout);
    KILN_ASSERT(moved, "{} in a fusion body is not a view of its input", ir::opName(n->op()));
    views[n->output()] = View{it->second.input, n->output()->type().shape, std::move(*moved)};
  }
  return views;
}

/// One kernel parameter before coalescing: its strides over the domain.
struct Param {
  DType dtype;
  bool output;
  std::vector<int64_t> strides;
  ParamBinding binding;
  friend bool operator==(const Param&, const Param&) = default;
};

/// The view's strides over `domain`: right-aligned, 0 along broadcast dimensions.
std::vector<int64_t> stridesOver(const View& v, const ir::Shape& domain) {
  std::vector<int64_t> out(domain.size(), 0);
  const size_t lead = domain.size() - v.shape.size();
  for (size_t i = 0; i < v.shape.size(); ++i)
    if (v.shape[i] != 1) out[lead + i] = v.layout.strides[i];
  return out;
}

/// Builds a kernel over `domain` from its parameters (inputs first), its
/// index spaces (strides over the domain) and a body; coalesces (index
/// spaces take part like parameters) and fills in the launch arguments.
LoweredKernel finish(const ir::Shape& domain, const std::vector<Param>& params,
                     const std::vector<std::vector<int64_t>>& indexSpaces, std::vector<ScalarInstr> body,
                     const std::string& opsName) {
  LoweredKernel result;
  Kernel& k = result.kernel;
  std::vector<std::vector<int64_t>> strides;
  for (const Param& p : params) {
    k.params.push_back({p.dtype, p.output, InnerStride::one});
    strides.push_back(p.strides);
    result.bindings.push_back(p.binding);
  }
  strides.insert(strides.end(), indexSpaces.begin(), indexSpaces.end());
  std::vector<int64_t> sizes = domain;
  coalesce(sizes, strides);
  k.rank = static_cast<int>(sizes.size());
  for (size_t p = 0; p < k.params.size(); ++p) k.params[p].inner = innerClass(strides[p].back());
  for (size_t s = 0; s < indexSpaces.size(); ++s)
    k.indexSpaces.push_back(innerClass(strides[k.params.size() + s].back()));
  k.body = std::move(body);
  k.name = fmt::format("kiln{}_{:08x}", opsName, k.hash() & 0xffffffffu);

  LaunchArgs& launch = result.launch;
  launch.numel = 1;
  for (int64_t s : sizes) launch.numel *= s;
  launch.args = sizes;
  for (const auto& s : strides) launch.args.insert(launch.args.end(), s.begin(), s.end());
  return result;
}

/// The kernel of a fusion whose body is elementwise ops over views of its
/// inputs (or nothing: a copy).
LoweredKernel lowerElementwise(const ir::Node& fusion, std::span<const ir::Layout> inputs,
                               std::span<const ir::Layout> outputs) {
  const ir::Graph& body = *fusion.body();
  const ir::Shape domain = fusion.output(0)->type().shape;
  for (const ir::Value* out : fusion.outputs())
    KILN_ASSERT(out->type().shape == domain, "fusion results over different domains");
  const auto views = bodyViews(body, inputs);

  // The loads: one per distinct view read, in the order of the fusion's
  // inputs (then of first use), so a plain chain loads input i as param i.
  std::vector<Param> params;
  // The parameter reading view `v`, or -1 when `v` is not a view; `add`
  // makes it when it is new.
  auto paramOf = [&](const ir::Value* v, bool add) -> int {
    auto it = views.find(v);
    if (it == views.end()) return -1;
    const View& view = it->second;
    KILN_ASSERT(ir::broadcastShapes(view.shape, domain) == domain, "fusion operand {} does not broadcast to {}",
                ir::shapeStr(view.shape), ir::shapeStr(domain));
    Param p{v->type().dtype, false, stridesOver(view, domain), {false, view.input, view.layout.offset}};
    auto found = std::find(params.begin(), params.end(), p);
    if (found != params.end()) return static_cast<int>(found - params.begin());
    KILN_ASSERT(add, "a view read by the body has no parameter");
    params.push_back(std::move(p));
    return static_cast<int>(params.size()) - 1;
  };
  for (const ir::Node* n : body.nodes())
    if (n->info().kind == ir::OpKind::elementwise)
      for (const ir::Value* v : n->inputs()) paramOf(v, true);
  for (const ir::Value* out : body.outputs()) paramOf(out, true);
  std::stable_sort(params.begin(), params.end(),
                   [](const Param& a, const Param& b) { return a.binding.index < b.binding.index; });
  const int numLoads = static_cast<int>(params.size());
  for (int j = 0; j < fusion.numOutputs(); ++j) {
    const ir::Layout out = outputs.empty() ? ir::contiguousLayout(domain) : outputs[j];
    params.push_back({fusion.output(j)->type().dtype, true, out.strides, {true, j, out.offset}});
  }

  // Index spaces: one per distinct result shape whose element index an op
  // reads (Note [Dropout draws]): the contiguous strides of that shape over
  // the domain, so the index is the element's row-major position in the op's
  // result however the domain is coalesced, and repeats where the result is
  // broadcast into a larger domain.
  std::vector<std::vector<int64_t>> indexSpaces;
  std::unordered_map<int, int> spaceInstr;  // index space -> its index instruction
  auto indexSpaceOf = [&](const ir::Node* n) {
    const ir::Shape& shape = n->output()->type().shape;
    KILN_ASSERT(ir::broadcastShapes(shape, domain) == domain, "{} of {} in a fusion over {}", ir::opName(n->op()),
                ir::shapeStr(shape), ir::shapeStr(domain));
    std::vector<int64_t> strides = stridesOver(View{-1, shape, ir::contiguousLayout(shape)}, domain);
    auto found = std::find(indexSpaces.begin(), indexSpaces.end(), strides);
    if (found != indexSpaces.end()) return static_cast<int>(found - indexSpaces.begin());
    indexSpaces.push_back(std::move(strides));
    return static_cast<int>(indexSpaces.size()) - 1;
  };

  // The body: the loads, then the nodes in order, then the stores.
  std::vector<ScalarInstr> instrs;
  for (int p = 0; p < numLoads; ++p) instrs.push_back(instr::load(p, params[p].dtype));
  std::unordered_map<const ir::Value*, int> index;
  auto valueOf = [&](const ir::Value* v) {
    const int p = paramOf(v, false);
    return p >= 0 ? p : index.at(v);
  };
  std::string opsName;
  for (const ir::Node* n : body.nodes()) {
    KILN_ASSERT(n->numOutputs() == 1, "{} in a fusion body with {} results", ir::opName(n->op()), n->numOutputs());
    if (ir::isViewOp(n->op())) {
      if (!views.count(n->output())) index[n->output()] = index.at(n->input(0));  // a constant moved
      continue;
    }
    ScalarInstr s;
    s.dtype = n->output()->type().dtype;
    if (n->op() == ir::Op::constant) {
      s.kind = ScalarInstr::Kind::constant;
      s.value = ir::floatAttr(n->attrs(), "value", "constant");
    } else {
      KILN_ASSERT(n->info().kind == ir::OpKind::elementwise, "{} in a fusion body", ir::opName(n->op()));
      s.kind = ScalarInstr::Kind::op;
      s.op = n->op();
      s.attrs = n->attrs();
      for (const ir::Value* v : n->inputs()) s.operands.push_back(valueOf(v));
      if (ir::usesElementIndex(n->op())) {
        const int space = indexSpaceOf(n);
        auto it = spaceInstr.find(space);
        if (it == spaceInstr.end()) {
          instrs.push_back(instr::index(space));
          it = spaceInstr.emplace(space, static_cast<int>(instrs.size()) - 1).first;
        }
        s.operands.push_back(it->second);
      }
      if (opsName.size() < 40) opsName += "_" + std::string(ir::opName(n->op()));
    }
    instrs.push_back(std::move(s));
    index[n->output()] = static_cast<int>(instrs.size()) - 1;
  }
  for (size_t j = 0; j < body.outputs().size(); ++j) {
    const ir::Value* out = body.outputs()[j];
    instrs.push_back(instr::store(numLoads + static_cast<int>(j), valueOf(out), out->type().dtype));
  }
  return finish(domain, params, indexSpaces, std::move(instrs), opsName.empty() ? "_copy" : opsName);
}

/// The kernels of a fusion whose result is a cat: each input copied into
/// its slice of the result.
std::vector<LoweredKernel> lowerCat(const ir::Node& fusion, std::span<const ir::Layout> inputs) {
  const ir::Graph& body = *fusion.body();
  KILN_ASSERT(fusion.numOutputs() == 1 && body.outputs().size() == 1, "a cat fusion with {} results",
              fusion.numOutputs());
  const ir::Node* cat = body.outputs()[0]->node();
  const ir::Shape& shape = cat->output()->type().shape;
  const ir::Strides outStrides = ir::contiguousStrides(shape);
  const int64_t dim = ir::intAttr(cat->attrs(), "dim", "cat");
  const auto views = bodyViews(body, inputs);
  std::vector<LoweredKernel> kernels;
  int64_t at = 0;
  for (const ir::Value* v : cat->inputs()) {
    const ir::Shape& piece = v->type().shape;
    const DType dtype = v->type().dtype;
    if (ir::numel(piece) > 0) {
      std::vector<Param> params;
      std::vector<ScalarInstr> instrs;
      if (auto it = views.find(v); it != views.end()) {
        params.push_back(
            {dtype, false, stridesOver(it->second, piece), {false, it->second.input, it->second.layout.offset}});
        instrs.push_back(instr::load(0, dtype));
      } else {
        const ir::Node* c = v->node();
        while (c && ir::isViewOp(c->op())) c = c->input(0)->node();
        KILN_ASSERT(c && c->op() == ir::Op::constant, "cat of a computed value in a fusion body");
        instrs.push_back(instr::constant(ir::floatAttr(c->attrs(), "value", "constant"), dtype));
      }
      params.push_back({dtype, true, outStrides, {true, 0, at * outStrides[dim]}});
      instrs.push_back(instr::store(static_cast<int>(params.size()) - 1, 0, dtype));
      kernels.push_back(finish(piece, params, {}, std::move(instrs), "_cat"));
    }
    at += piece[dim];
  }
  return kernels;
}
}  // namespace

void coalesce(std::vector<int64_t>& domain, std::vector<std::vector<int64_t>>& strides) {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> out(strides.size());
  bool empty = false;
  for (size_t d = 0; d < domain.size(); ++d) {
    if (domain[d] == 0) empty = true;
    if (domain[d] == 1) continue;  // size-1 dimensions take no steps
    bool merge = !sizes.empty();
    for (size_t p = 0; p < strides.size() && merge; ++p) merge = out[p].back() == strides[p][d] * domain[d];
    if (merge) {
      sizes.back() *= domain[d];
      for (size_t p = 0; p < strides.size(); ++p) out[p].back() = strides[p][d];
    } else {
      sizes.push_back(domain[d]);
      for (size_t p = 0; p < strides.size(); ++p) out[p].push_back(strides[p][d]);
    }
  }
  if (empty || sizes.empty()) {
    // A scalar domain is one element; an empty one none. Either is rank 1.
    sizes = {empty ? 0 : 1};
    for (auto& s : out) s = {0};
  }
  domain = std::move(sizes);
  strides = std::move(out);
}

std::vector<LoweredKernel> lowerFusionKernels(const ir::Node& fusion, std::span<const ir::Layout> inputs,
                                              std::span<const ir::Layout> outputs) {
  KILN_ASSERT(fusion.op() == ir::Op::fusion && fusion.body(), "lowerFusion of a {}", ir::opName(fusion.op()));
  KILN_ASSERT(fusion.numOutputs() > 0, "fusion without results");
  KILN_ASSERT(inputs.empty() || static_cast<int>(inputs.size()) == fusion.numInputs(),
              "{} layouts for a fusion of {} inputs", inputs.size(), fusion.numInputs());
  KILN_ASSERT(outputs.empty() || static_cast<int>(outputs.size()) == fusion.numOutputs(),
              "{} layouts for a fusion of {} results", outputs.size(), fusion.numOutputs());
  const ir::Graph& body = *fusion.body();
  const ir::Node* last = body.outputs().empty() ? nullptr : body.outputs()[0]->node();
  if (last && last->op() == ir::Op::cat) {
    KILN_ASSERT(outputs.empty(), "a cat written through given strides");
    return lowerCat(fusion, inputs);
  }
  return {lowerElementwise(fusion, inputs, outputs)};
}

LoweredKernel lowerFusion(const ir::Node& fusion, std::span<const ir::Layout> inputs) {
  std::vector<LoweredKernel> kernels = lowerFusionKernels(fusion, inputs);
  KILN_ASSERT(kernels.size() == 1, "lowerFusion of a fusion with {} kernels", kernels.size());
  return std::move(kernels[0]);
}

}  // namespace kiln::codegen

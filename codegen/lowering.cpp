// Lowering of fusion nodes to Kernels: domain, operand strides, coalescing,
// and the body as scalar instructions.
#include "codegen/lowering.h"

#include <fmt/format.h>

#include <unordered_map>

#include "runtime/error.h"

namespace kiln::codegen {

namespace {
/// Strides of a contiguous tensor of `shape` read over `domain` (NumPy
/// broadcasting: right-aligned, size-1 and missing dimensions get stride 0).
std::vector<int64_t> broadcastStrides(const ir::Shape& shape, const ir::Shape& domain) {
  std::vector<int64_t> strides(domain.size(), 0);
  int64_t stride = 1;
  const size_t offset = domain.size() - shape.size();
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1) strides[offset + i] = stride;
    stride *= shape[i];
  }
  return strides;
}

InnerStride innerClass(int64_t stride) {
  return stride == 0 ? InnerStride::zero : stride == 1 ? InnerStride::one : InnerStride::any;
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

LoweredKernel lowerFusion(const ir::Node& fusion) {
  KILN_ASSERT(fusion.op() == ir::Op::fusion && fusion.body(), "lowerFusion of a {}", ir::opName(fusion.op()));
  const ir::Graph& body = *fusion.body();
  KILN_ASSERT(fusion.numOutputs() > 0, "fusion without results");
  const ir::Shape domain = fusion.output(0)->type().shape;
  for (const ir::Value* out : fusion.outputs())
    KILN_ASSERT(out->type().shape == domain, "fusion results over different domains");

  LoweredKernel result;
  Kernel& k = result.kernel;
  std::vector<std::vector<int64_t>> strides;
  for (const ir::Value* in : fusion.inputs()) {
    KILN_ASSERT(ir::broadcastShapes(in->type().shape, domain) == domain, "fusion input does not broadcast to the domain");
    k.params.push_back({in->type().dtype, false, InnerStride::one});
    strides.push_back(broadcastStrides(in->type().shape, domain));
  }
  for (const ir::Value* out : fusion.outputs()) {
    k.params.push_back({out->type().dtype, true, InnerStride::one});
    strides.push_back(broadcastStrides(domain, domain));
  }
  std::vector<int64_t> sizes = domain;
  coalesce(sizes, strides);
  k.rank = static_cast<int>(sizes.size());
  for (size_t p = 0; p < k.params.size(); ++p) k.params[p].inner = innerClass(strides[p].back());

  // The body: loads of the inputs, then the nodes in order, then the stores.
  std::unordered_map<const ir::Value*, int> index;
  auto add = [&](ScalarInstr i) {
    k.body.push_back(std::move(i));
    return static_cast<int>(k.body.size()) - 1;
  };
  for (int i = 0; i < body.numInputs(); ++i) {
    index[body.input(i)] = add(instr::load(i, body.input(i)->type().dtype));
  }
  std::string opsName;
  for (const ir::Node* n : body.nodes()) {
    KILN_ASSERT(n->numOutputs() == 1, "{} in a fusion body with {} results", ir::opName(n->op()), n->numOutputs());
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
      for (const ir::Value* v : n->inputs()) s.operands.push_back(index.at(v));
      if (opsName.size() < 40) opsName += "_" + std::string(ir::opName(n->op()));
    }
    index[n->output()] = add(std::move(s));
  }
  for (size_t j = 0; j < body.outputs().size(); ++j) {
    const ir::Value* out = body.outputs()[j];
    add(instr::store(body.numInputs() + static_cast<int>(j), index.at(out), out->type().dtype));
  }
  k.name = fmt::format("kiln{}_{:08x}", opsName, k.hash() & 0xffffffffu);

  LaunchArgs& launch = result.launch;
  launch.numel = 1;
  for (int64_t s : sizes) launch.numel *= s;
  launch.args = sizes;
  for (const auto& s : strides) launch.args.insert(launch.args.end(), s.begin(), s.end());
  return result;
}

}  // namespace kiln::codegen

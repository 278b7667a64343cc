// Lowering of fusion nodes to Kernels: an elementwise body (or a copy) as
// one kernel, a cat as one copy kernel per input, both through the kernel
// builder (codegen/kernel_builder.h); and coalescing.
#include "codegen/lowering.h"

#include "codegen/kernel_builder.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {
/// A fusion body's inputs and nodes, as the kernel builder reads them.
struct Body {
  explicit Body(const ir::Graph& body)
      : inputs(body.inputs().begin(), body.inputs().end()), outputs(body.outputs().begin(), body.outputs().end()) {
    for (const ir::Node* n : body.nodes()) nodes.push_back(n);
  }
  std::vector<const ir::Value*> inputs;
  std::vector<const ir::Node*> nodes;
  std::vector<const ir::Value*> outputs;
};

/// The kernel of a fusion whose body is elementwise ops over views of its
/// inputs (or nothing: a copy).
LoweredKernel lowerElementwise(const ir::Node& fusion, std::span<const ir::Layout> inputs,
                               std::span<const ir::Layout> outputs) {
  const ir::Shape domain = fusion.output(0)->type().shape;
  for (const ir::Value* out : fusion.outputs())
    KILN_ASSERT(out->type().shape == domain, "fusion results over different domains");
  const Body body(*fusion.body());
  KernelBuilder builder(domain);
  const std::string opsName =
      lowerBody(builder, BodyViews(body.inputs, inputs, body.nodes), body.nodes, body.outputs, outputs, nullptr);
  return builder.finish(opsName.empty() ? "_copy" : opsName);
}

/// The kernels of a fusion whose result is a cat: each input copied into
/// its slice of the result.
std::vector<LoweredKernel> lowerCat(const ir::Node& fusion, std::span<const ir::Layout> inputs) {
  const Body body(*fusion.body());
  KILN_ASSERT(fusion.numOutputs() == 1 && body.outputs.size() == 1, "a cat fusion with {} results",
              fusion.numOutputs());
  const ir::Node* cat = body.outputs[0]->node();
  const ir::Shape& shape = cat->output()->type().shape;
  const ir::Strides outStrides = ir::contiguousStrides(shape);
  const int64_t dim = ir::intAttr(cat->attrs(), "dim", "cat");
  const BodyViews views(body.inputs, inputs, body.nodes);
  std::vector<LoweredKernel> kernels;
  int64_t at = 0;
  for (const ir::Value* v : cat->inputs()) {
    const ir::Shape& piece = v->type().shape;
    const DType dtype = v->type().dtype;
    if (ir::numel(piece) > 0) {
      KernelBuilder builder(piece);
      int value = 0;  // the load of the only parameter
      if (const View* view = views.find(v)) {
        builder.input({dtype,
                       false,
                       builder.stridesOver(view->shape, view->layout.strides),
                       {false, view->input, view->layout.offset}});
        builder.loadInputs();
      } else {
        const ir::Node* c = views.constant(v);
        KILN_ASSERT(c, "cat of a computed value in a fusion body");
        builder.loadInputs();
        value = builder.constant(*c);
      }
      const int out = builder.output({dtype, false, outStrides, {true, 0, at * outStrides[dim]}});
      builder.add(instr::store(out, value, dtype));
      kernels.push_back(builder.finish("_cat"));
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

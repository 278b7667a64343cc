// Lowering of reduction nodes (and fusions of them) to reduction Kernels
// through the kernel builder (codegen/kernel_builder.h): which values vary
// along the row comes from ir/reduction_fusion.h, the row split and the
// instructions each reduction op expands to from the builder (see
// codegen/lowering_reduction.h).
#include "codegen/lowering_reduction.h"

#include <algorithm>

#include "codegen/kernel_builder.h"
#include "ir/reduction_fusion.h"
#include "runtime/error.h"

namespace kiln::codegen {

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
  // The domain is D; the builder moves the reduced dims innermost. Each
  // view of an input is read through its strides: as a row parameter where
  // row values or reductions read it, as an outer one where values per row
  // do, so one input can be both (a bias of shape [R,1] added to x and to
  // sum(x) is two parameters).
  KernelBuilder builder(info.rows.domain, info.rows.reduced);
  const std::string opsName = lowerBody(builder, BodyViews(g.inputs, layouts, g.nodes), g.nodes, g.outputs, {}, &info);
  return builder.finish(opsName);
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

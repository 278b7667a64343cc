// fold-batchnorm: folds a per-channel affine after a convolution — batch
// norm in eval mode, (conv(x, w) - mean) · rsqrt(var + eps) · γ + β — into
// the convolution's weight and one bias add:
//
//   conv(x, w) · S + T  ->  conv(x, w · S[o]) + T
//
// with S and T computed from the per-channel values (O elements, not the
// activation's N·O·H·W), as PyTorch's fuse_conv_bn_eval does.
//
// The pattern, from a conv2d up: its result read once, by a chain of
// elementwise nodes each read once (the last may be read by anything), each
// one of add(y, t), add(t, y), sub(y, t), mul(y, t), mul(t, y) or div(y, t)
// where t does not broadcast y (t's elements vary along the channel dim
// only: a [1, O, 1, 1], [O, 1, 1] or one-element tensor) and is of y's
// dtype; at least one mul or div (adds alone are a bias, which the
// convolution's epilogue takes as it is). In training batch norm's mean
// reads the convolution's result too, so the pattern does not match there.
//
// Not bit for bit: the products round in another order, so the pass is not
// in the default pipeline (compiled results equal eager ones); add it to
// CompileOptions::pipeline before fuse-reductions for an inference program
// (docs/convolution.md, "Fusion"). On the CPU the affine left unfolded
// costs no pass over memory either: it runs as the convolution's epilogue.
#include <fmt/format.h>

#include <optional>
#include <vector>

#include "passes/passes.h"
#include "runtime/error.h"

namespace kiln::passes {

namespace {
using ir::Node;
using ir::Op;
using ir::Value;

/// Whether `t`, an operand of an op on `y` (a conv2d result [N, O, H, W] or
/// an elementwise result of that shape), varies along the channel dim only.
bool perChannel(const Value* t, const Value* y) {
  const ir::TensorType& tt = t->type();
  const ir::TensorType& yt = y->type();
  if (tt.dtype != yt.dtype || tt.device != yt.device || tt.rank() > 4) return false;
  if (ir::broadcastShapes(tt.shape, yt.shape) != yt.shape) return false;
  for (int d = 0; d < tt.rank(); ++d) {
    const int dim = 4 - tt.rank() + d;  // aligned from the right
    if (dim != 1 && tt.shape[static_cast<size_t>(d)] != 1) return false;
  }
  return true;
}

struct Step {
  Node* node;
  Value* t;  ///< the per-channel operand
};

/// The chain of affine steps after conv `c`, or nothing.
std::optional<std::vector<Step>> chainAfter(const ir::Graph& graph, Node* c) {
  std::vector<Step> chain;
  Value* y = c->output();
  bool scaled = false;
  while (!graph.isOutput(y) && y->uses().size() == 1) {
    Node* n = y->uses()[0].user;
    const bool first = n->input(0) == y;
    if (n->numInputs() != 2 || n->input(0) == n->input(1) || n->output()->type().shape != y->type().shape) break;
    Value* t = n->input(first ? 1 : 0);
    const bool ok = n->op() == Op::add || n->op() == Op::mul || ((n->op() == Op::sub || n->op() == Op::div) && first);
    if (!ok || !perChannel(t, y)) break;
    scaled = scaled || n->op() == Op::mul || n->op() == Op::div;
    chain.push_back({n, t});
    y = n->output();
  }
  if (!scaled) return std::nullopt;
  return chain;
}
}  // namespace

bool runFoldBatchNorm(ir::Graph& graph, PassContext& context) {
  bool changed = false;
  std::vector<Node*> convs;  // first: the rewrite erases nodes after each
  for (Node* n : graph.nodes())
    if (n->op() == Op::conv2d) convs.push_back(n);
  for (Node* c : convs) {
    const std::optional<std::vector<Step>> chain = chainAfter(graph, c);
    if (!chain) continue;
    Node* last = chain->back().node;
    auto make = [&](Op op, Value* a, Value* b) {
      return graph.create(op, std::vector<Value*>{a, b}, {}, last)->output();
    };
    Value *scale = nullptr, *shift = nullptr;  // y · scale + shift, null: 1 and 0
    for (const Step& s : *chain) {
      const Op op = s.node->op();
      if (op == Op::add || op == Op::sub) {
        shift = shift           ? make(op, shift, s.t)
                : op == Op::add ? s.t
                                : graph.create(Op::neg, std::vector<Value*>{s.t}, {}, last)->output();
      } else {
        scale = scale ? make(op, scale, s.t)
                : op == Op::mul
                    ? s.t
                    : make(Op::div,
                           graph.createConstant(1.0, ir::TensorType{s.t->type().dtype, {}, s.t->type().device}, last)
                               ->output(),
                           s.t);
        if (shift) shift = make(op, shift, s.t);
      }
    }
    // The weight [O, C/G, KH, KW] times the scale per output channel.
    Value* w = c->input(1);
    const int64_t perOut = scale->type().numel();
    Value* column =
        graph.create(Op::reshape, std::vector<Value*>{scale}, {{"shape", std::vector<int64_t>{perOut, 1, 1, 1}}}, last)
            ->output();
    Value* folded = make(Op::mul, w, column);
    Value* y = graph.create(Op::conv2d, std::vector<Value*>{c->input(0), folded}, c->attrs(), last)->output();
    if (shift) y = make(Op::add, y, shift);
    graph.replaceAllUsesWith(last->output(), y);
    for (auto it = chain->rbegin(); it != chain->rend(); ++it) graph.erase(it->node);
    graph.erase(c);
    context.remark(fmt::format("folded {} per-channel step{} into conv2d {} (weight {})", chain->size(),
                               chain->size() == 1 ? "" : "s", y->type().str(), w->type().str()));
    context.count("convolutions-folded");
    changed = true;
  }
  return changed;
}

}  // namespace kiln::passes

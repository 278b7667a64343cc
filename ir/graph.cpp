// Graph, Node and Value edits that keep use lists consistent.
#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/layout.h"
#include "runtime/error.h"

namespace kiln::ir {

namespace {
void removeUse(Value* value, Use use) {
  auto& uses = const_cast<std::vector<Use>&>(value->uses());
  auto it = std::find(uses.begin(), uses.end(), use);
  KILN_ASSERT(it != uses.end(), "use list out of step");
  uses.erase(it);
}

/// Copies nodes of a graph into the body of a fusion that replaces the
/// `inside` ones, mapping each value of the graph to the body's.
struct BodyCopier {
  BodyCopier(const std::unordered_set<const Node*>& inside, const std::unordered_set<const Node*>& lazy)
      : inside(inside), lazy(lazy) {}

  const std::unordered_set<const Node*>& inside;
  /// Copied where first read: constants always, and the lazy copies.
  const std::unordered_set<const Node*>& lazy;
  std::unique_ptr<Graph> body = std::make_unique<Graph>("fused");
  std::unordered_map<const Value*, Value*> mapped;
  std::vector<Value*> externals;  ///< the fusion's inputs

  /// The body's value for `v`, read by `reader`: a copied node's, or a new
  /// block argument.
  Value* operand(Value* v, const Node* reader) {
    Node* producer = v->node();
    if (auto it = mapped.find(v); it != mapped.end()) {
      // A copy outside the group that reads a member's value would make the
      // kernel compute that value at other indices; the passes never ask.
      KILN_ASSERT(inside.count(reader) || !producer || !inside.count(producer),
                  "{} copied into a fusion body reads a value the fusion computes", opName(reader->op()));
      return it->second;
    }
    KILN_ASSERT(!producer || !inside.count(producer), "group member used before it is defined");
    if (producer && (producer->op() == Op::constant || lazy.count(producer))) {
      copy(producer);
      return mapped.at(v);
    }
    externals.push_back(v);
    return mapped[v] = body->addInput(v->type());
  }

  void copy(Node* n) {
    if (n->numOutputs() > 0 && mapped.count(n->output(0))) return;  // copied where first read
    KILN_ASSERT(!n->body(), "outline of a node with a body");
    std::vector<Value*> inputs;
    for (Value* v : n->inputs()) inputs.push_back(operand(v, n));
    std::vector<TensorType> types;
    for (Value* out : n->outputs()) types.push_back(out->type());
    Node* c = body->appendRaw(n->op(), inputs, std::move(types), n->attrs());
    for (int i = 0; i < n->numOutputs(); ++i) mapped[n->output(i)] = c->output(i);
  }
};
}  // namespace

void Node::setBody(std::unique_ptr<Graph> body) { body_ = std::move(body); }

void Node::replaceInput(int i, Value* value) {
  KILN_ASSERT(i >= 0 && i < numInputs(), "input {} out of range", i);
  removeUse(inputs_[i], {this, i});
  inputs_[i] = value;
  value->uses_.push_back({this, i});
}

Graph::~Graph() {
  // Drop nodes last to first so that no use list points at a freed node.
  while (!nodes_.empty()) nodes_.pop_back();
}

Value* Graph::addInput(TensorType type, std::string name) {
  inputs_.push_back(std::unique_ptr<Value>(new Value(this, nullptr, numInputs(), std::move(type))));
  inputs_.back()->setName(std::move(name));
  inputPtrs_.push_back(inputs_.back().get());
  return inputPtrs_.back();
}

Node* Graph::appendRaw(Op op, std::span<Value* const> inputs, std::vector<TensorType> resultTypes, Attributes attrs,
                       Node* before) {
  auto owned = std::unique_ptr<Node>(new Node(this, op));
  Node* node = owned.get();
  node->attrs_ = std::move(attrs);
  for (Value* v : inputs) {
    KILN_ASSERT(v != nullptr, "null input to {}", opName(op));
    node->inputs_.push_back(v);
    v->uses_.push_back({node, static_cast<int>(node->inputs_.size()) - 1});
  }
  for (size_t i = 0; i < resultTypes.size(); ++i) {
    node->outputs_.push_back(
        std::unique_ptr<Value>(new Value(this, node, static_cast<int>(i), std::move(resultTypes[i]))));
    node->outputPtrs_.push_back(node->outputs_.back().get());
  }
  auto where = before ? before->pos_ : nodes_.end();
  node->pos_ = nodes_.insert(where, std::move(owned));
  return node;
}

Node* Graph::create(Op op, std::span<Value* const> inputs, Attributes attrs, Node* before) {
  std::vector<TensorType> types;
  for (Value* v : inputs) types.push_back(v->type());
  TensorType result = inferType(op, types, attrs);
  return appendRaw(op, inputs, {std::move(result)}, std::move(attrs), before);
}

Node* Graph::createConstant(Number value, TensorType type, Node* before) {
  const Number v = constantValue(value, type.dtype);
  AttrValue attr =
      std::holds_alternative<int64_t>(v) ? AttrValue(std::get<int64_t>(v)) : AttrValue(std::get<double>(v));
  return appendRaw(Op::constant, {}, {std::move(type)}, {{"value", std::move(attr)}}, before);
}

void Graph::erase(Node* node) {
  KILN_ASSERT(node->owner_ == this, "erase of a node from another graph");
  for (Value* out : node->outputs())
    KILN_ASSERT(!out->hasUses() && !isOutput(out), "erase of a {} whose result is still used", opName(node->op()));
  for (int i = 0; i < node->numInputs(); ++i) removeUse(node->inputs_[i], {node, i});
  nodes_.erase(node->pos_);
}

void Graph::replaceAllUsesWith(Value* from, Value* to) {
  if (from == to) return;
  auto uses = from->uses();  // copy: replaceInput edits the list
  for (const Use& u : uses) u.user->replaceInput(u.index, to);
  for (Value*& out : outputs_)
    if (out == from) out = to;
}

void Graph::setOutputs(std::vector<Value*> outputs) { outputs_ = std::move(outputs); }

bool Graph::isOutput(const Value* value) const {
  return std::find(outputs_.begin(), outputs_.end(), value) != outputs_.end();
}

Node* Graph::outline(std::span<Node* const> members, const OutlineOptions& options) {
  std::unordered_map<const Node*, int> position;
  for (const auto& n : nodes_) position.emplace(n.get(), static_cast<int>(position.size()));
  const std::unordered_set<const Node*> inside(members.begin(), members.end());
  const std::unordered_set<const Node*> copies(options.copies.begin(), options.copies.end());
  for (const Node* n : inside)
    KILN_ASSERT(position.count(n) && !copies.count(n), "outline of a node of another graph, or of a member as a copy");
  // The body in graph order: the members, and the copies unless they go
  // where first read.
  std::vector<Node*> order(members.begin(), members.end());
  if (!options.copiesAtFirstUse) order.insert(order.end(), options.copies.begin(), options.copies.end());
  std::sort(order.begin(), order.end(), [&](Node* a, Node* b) { return position.at(a) < position.at(b); });
  const std::unordered_set<const Node*> none;
  BodyCopier copier(inside, options.copiesAtFirstUse ? copies : none);
  for (Node* n : order) copier.copy(n);

  std::vector<Value*> results = options.results;
  if (results.empty())
    for (Node* m : order) {
      if (!inside.count(m)) continue;
      for (Value* out : m->outputs()) {
        bool escapes = isOutput(out);
        for (const Use& use : out->uses()) escapes = escapes || !inside.count(use.user);
        if (escapes) results.push_back(out);
      }
    }
  Node* fusion = nullptr;
  if (!results.empty()) {
    std::vector<Value*> bodyResults;
    std::vector<TensorType> types;
    for (Value* r : results) {
      bodyResults.push_back(copier.mapped.at(r));
      types.push_back(r->type());
    }
    copier.body->setOutputs(std::move(bodyResults));
    fusion = appendRaw(Op::fusion, copier.externals, std::move(types), {}, options.before);
    fusion->setBody(std::move(copier.body));
    for (size_t i = 0; i < results.size(); ++i) replaceAllUsesWith(results[i], fusion->output(static_cast<int>(i)));
  }
  // Last first: uses between members go with their readers.
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (inside.count(*it)) erase(*it);
  return fusion;
}

void Graph::reorder(const std::vector<Node*>& order) {
  KILN_ASSERT(order.size() == nodes_.size(), "reorder with {} nodes of {}", order.size(), nodes_.size());
  // Check the whole order before moving a node: a refused order must leave
  // the graph as it was (nodes spliced out would die with `sorted`).
  std::unordered_set<const Node*> placed;
  for (Node* n : order) {
    KILN_ASSERT(n->owner_ == this && !placed.count(n), "reorder with a foreign or repeated node");
    for (Value* in : n->inputs())
      KILN_ASSERT(!in->node() || placed.count(in->node()), "reorder puts {} before its input", opName(n->op()));
    placed.insert(n);
  }
  std::list<std::unique_ptr<Node>> sorted;
  for (Node* n : order) {
    sorted.splice(sorted.end(), nodes_, n->pos_);
    n->pos_ = std::prev(sorted.end());
  }
  nodes_.swap(sorted);  // swap keeps the iterators in pos_ valid
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

bool readOnlyByLibraryCalls(const Value* v) {
  if (v->graph()->isOutput(v)) return false;
  return std::all_of(v->uses().begin(), v->uses().end(), [](const Use& use) {
    const Node* reader = use.user;
    return reader->info().kind == OpKind::library ||
           (isViewOp(reader->op()) && readOnlyByLibraryCalls(reader->output()));
  });
}

namespace {
/// A cat's kernels: one copy per input with elements (codegen/lowering.cpp, lowerCat).
int catKernels(const Node& cat) {
  return static_cast<int>(
      std::count_if(cat.inputs().begin(), cat.inputs().end(), [](const Value* in) { return in->type().numel() > 0; }));
}
}  // namespace

int countKernels(const Graph& graph) {
  int kernels = 0;
  for (const Node* n : graph.nodes()) {
    if (n->op() == Op::constant) continue;
    if (isViewOp(n->op()) && readOnlyByLibraryCalls(n->output())) continue;
    if (n->op() == Op::cat) {
      kernels += catKernels(*n);
      continue;
    }
    const Node* last = n->body() && !n->body()->outputs().empty() ? n->body()->outputs()[0]->node() : nullptr;
    kernels += last && last->op() == Op::cat ? catKernels(*last) : 1;
  }
  return kernels;
}

}  // namespace kiln::ir

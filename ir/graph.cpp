// Graph, Node and Value edits that keep use lists consistent.
#include "ir/graph.h"

#include <algorithm>
#include <unordered_set>

#include "runtime/error.h"

namespace kiln::ir {

namespace {
void removeUse(Value* value, Use use) {
  auto& uses = const_cast<std::vector<Use>&>(value->uses());
  auto it = std::find(uses.begin(), uses.end(), use);
  KILN_ASSERT(it != uses.end(), "use list out of step");
  uses.erase(it);
}
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
    node->outputs_.push_back(std::unique_ptr<Value>(new Value(this, node, static_cast<int>(i), std::move(resultTypes[i]))));
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

Node* Graph::createConstant(double value, TensorType type, Node* before) {
  return appendRaw(Op::constant, {}, {std::move(type)}, {{"value", value}}, before);
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

int countKernels(const Graph& graph) {
  int kernels = 0;
  for (const auto& n : graph.nodes())
    if (n->op() != Op::constant) ++kernels;
  return kernels;
}

}  // namespace kiln::ir

// The SSA graph: Graph owns Nodes in topological order; a Value is a graph
// input or a node result and knows its uses (DESIGN.md §4).
//
// Edits go through Graph and Node methods, which keep use lists right:
//
//   // Given:   %3 = mul(%1, %2)
//   // Execute: node3->replaceInput(1, v4)
//   // Result:  %3 = mul(%1, %4)
//
//   // Given:   %2 = relu(%1); %3 = exp(%2)
//   // Execute: graph.replaceAllUsesWith(v2, v1); graph.erase(node2)
//   // Result:  %3 = exp(%1)
//
// A fusion node owns its body, a Graph whose inputs stand for the node's
// inputs in order and whose outputs are the node's results in order.
// Graph::outline makes one from a set of nodes (both fusion passes use it):
//
//   // Given:   %0 = constant() {value = 2.0} : f32[]@cpu
//   //          %1 = mul(%x, %0) : f32[4]@cpu
//   //          %2 = exp(%1) : f32[4]@cpu
//   //          %3 = add(%2, %y) : f32[4]@cpu
//   //          return %1, %3
//   // Execute: graph.outline(std::vector<Node*>{node1, node2, node3})
//   // Result:  %0 = constant() {value = 2.0} : f32[]@cpu
//   //          %1, %2 = fusion(%x, %y) : f32[4]@cpu, f32[4]@cpu {
//   //          ^(%3: f32[4]@cpu, %4: f32[4]@cpu):
//   //            %5 = constant() {value = 2.0} : f32[]@cpu
//   //            %6 = mul(%3, %5) : f32[4]@cpu
//   //            %7 = exp(%6) : f32[4]@cpu
//   //            %8 = add(%7, %4) : f32[4]@cpu
//   //            return %6, %8
//   //          }
//   //          return %1, %2
//
// (as printGraph numbers it; tests/unit/ir/graph_outline_test.cpp). The
// constant is copied into the body (an immediate) and left where it was for
// other readers; mul's value is a result because the graph returns it.
#pragma once

#include <list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/types.h"

namespace kiln::ir {

class Graph;
class Node;

struct Use {
  Node* user;
  int index;  ///< which input of `user`
  friend bool operator==(const Use&, const Use&) = default;
};

class Value {
 public:
  const TensorType& type() const { return type_; }
  /// The node that defines this value; nullptr for a graph input.
  Node* node() const { return node_; }
  /// Index among the defining node's results, or among the graph's inputs.
  int index() const { return index_; }
  Graph* graph() const { return graph_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool hasUses() const { return !uses_.empty(); }
  /// Name hint for printing ("x"); empty means the printer numbers it.
  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }

 private:
  friend class Graph;
  friend class Node;
  Value(Graph* graph, Node* node, int index, TensorType type)
      : graph_(graph), node_(node), index_(index), type_(std::move(type)) {}

  Graph* graph_;
  Node* node_;
  int index_;
  TensorType type_;
  std::string name_;
  std::vector<Use> uses_;
};

class Node {
 public:
  Op op() const { return op_; }
  const OpInfo& info() const { return opInfo(op_); }
  std::span<Value* const> inputs() const { return inputs_; }
  Value* input(int i) const { return inputs_[i]; }
  int numInputs() const { return static_cast<int>(inputs_.size()); }
  std::span<Value* const> outputs() const { return outputPtrs_; }
  Value* output(int i = 0) const { return outputPtrs_[i]; }
  int numOutputs() const { return static_cast<int>(outputPtrs_.size()); }
  const Attributes& attrs() const { return attrs_; }
  Attributes& attrs() { return attrs_; }
  Graph* owner() const { return owner_; }
  /// The body of a fusion node; nullptr otherwise.
  Graph* body() const { return body_.get(); }
  void setBody(std::unique_ptr<Graph> body);

  /// Points input `i` at `value`, updating both use lists.
  void replaceInput(int i, Value* value);

 private:
  friend class Graph;
  Node(Graph* owner, Op op) : owner_(owner), op_(op) {}

  Graph* owner_;
  Op op_;
  std::vector<Value*> inputs_;
  std::vector<std::unique_ptr<Value>> outputs_;
  std::vector<Value*> outputPtrs_;
  Attributes attrs_;
  std::unique_ptr<Graph> body_;
  std::list<std::unique_ptr<Node>>::iterator pos_;
};

/// What Graph::outline puts into a fusion besides its members, and where
/// the fusion goes.
struct OutlineOptions {
  /// Nodes outside the group whose copies join the body (the view chains
  /// that feed it): the body computes them again instead of reading their
  /// results, and they stay in the graph for other readers.
  std::vector<Node*> copies;
  /// Where the copies go in the body: false, among the members in graph
  /// order; true, each just before the first body node that reads it. The
  /// body's order fixes the order of the fusion's inputs (and so of a
  /// kernel's parameters): fuse-elementwise uses the first, fuse-reductions
  /// the second.
  bool copiesAtFirstUse = false;
  /// The fusion's results; when empty, the members' results that a node
  /// outside the members reads or the graph returns, in graph order.
  std::vector<Value*> results;
  /// The node the fusion goes before; the end of the graph when null.
  Node* before = nullptr;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }

  Value* addInput(TensorType type, std::string name = "");
  std::span<Value* const> inputs() const { return inputPtrs_; }
  Value* input(int i) const { return inputPtrs_[i]; }
  int numInputs() const { return static_cast<int>(inputPtrs_.size()); }

  /// Appends a node before `before` (at the end when null) with the given
  /// result types; no type checks (see create()).
  Node* appendRaw(Op op, std::span<Value* const> inputs, std::vector<TensorType> resultTypes, Attributes attrs = {},
                  Node* before = nullptr);
  /// Appends a node whose result type comes from the registry's rules;
  /// throws kiln::Error when the inputs break them.
  Node* create(Op op, std::span<Value* const> inputs, Attributes attrs = {}, Node* before = nullptr);
  /// Appends a scalar constant of `type` holding `value` in the form of
  /// its dtype (ir::constantValue: an int for integer and bool dtypes).
  Node* createConstant(Number value, TensorType type, Node* before = nullptr);

  /// Removes a node whose results have no uses.
  void erase(Node* node);
  /// Points every use of `from` (graph outputs included) at `to`.
  void replaceAllUsesWith(Value* from, Value* to);

  void setOutputs(std::vector<Value*> outputs);
  std::span<Value* const> outputs() const { return outputs_; }
  /// Whether `value` is one of the graph's outputs.
  bool isOutput(const Value* value) const;

  /// Replaces `members` (nodes of this graph without bodies) by one fusion
  /// node whose body holds copies of them in graph order, of
  /// `options.copies`, and of each constant they read; every other value
  /// they read becomes an input of the fusion (in the order the body first
  /// reads them). Each result of the fusion takes over every use of the
  /// value it stands for, and the members are erased. When there is no
  /// result (nothing outside reads a member) the members are erased and
  /// nullptr returned: a fusion needs a result. See the example above.
  Node* outline(std::span<Node* const> members, const OutlineOptions& options = {});

  /// Rearranges the nodes into `order`, which must hold each node once and be
  /// a topological order (asserted).
  void reorder(const std::vector<Node*>& order);

  /// Nodes in topological order. Do not erase while iterating; collect first.
  std::vector<Node*> nodes() const;
  int numNodes() const { return static_cast<int>(nodes_.size()); }

 private:
  std::string name_;
  std::vector<std::unique_ptr<Value>> inputs_;
  std::vector<Value*> inputPtrs_;
  std::list<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> outputs_;
};

/// Whether `v` is read only by library calls, directly or through more view
/// ops, and is not returned: such a view is an alias of its input's buffer,
/// no kernel (Note [Library calls read views] in codegen/compile_graph.h).
bool readOnlyByLibraryCalls(const Value* v);

/// The kernels and library calls a compiled program of `graph` launches
/// (what codegen::compileGraph(graph).numKernels() counts, for a graph after
/// fusion): a fusion node or a reduction is one kernel, a library call one
/// call; a cat, or a fusion whose result is a cat, is one copy kernel per
/// input that is not empty; a constant (folded into its readers) and a view
/// read only by library calls are none. On a graph before fusion, every
/// other node counts as one kernel, as it would be fused alone.
int countKernels(const Graph& graph);

}  // namespace kiln::ir

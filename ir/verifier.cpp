// The IR verifier of ir/verifier.h. Checks run node by node in order, so the
// first error reported is the first in the printed text; fusion bodies are
// checked where their node stands. A node's kind is checked before its body is
// entered, so a fusion inside a body is an error, never a deeper recursion.
#include "ir/verifier.h"

#include <fmt/format.h>

#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/printer.h"
#include "ir/reduction_fusion.h"
#include "runtime/error.h"

namespace kiln::ir {

namespace {

std::string plural(size_t n, std::string_view word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

class Verifier {
 public:
  Verifier(const Graph& root, const SourceLocations* locations) : root_(root), locations_(locations) {}

  void run() { graph(root_, fmt::format("graph @{}", root_.name()), false); }

 private:
  // `label` names the graph in messages: "graph @g", or "graph @g, body of node 3".
  void graph(const Graph& g, const std::string& label, bool isBody) {
    const std::vector<Node*> nodes = g.nodes();
    std::unordered_map<const Node*, int> index;
    for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i]] = static_cast<int>(i);
    std::unordered_set<const Node*> defined;
    for (size_t i = 0; i < nodes.size(); ++i) {
      node(g, nodes[i], fmt::format("{}, node {}", label, i), label, static_cast<int>(i), isBody, defined);
      defined.insert(nodes[i]);
    }

    const std::string where = isBody ? "this fusion body" : "this graph";
    const auto outputs = g.outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Value* v = outputs[i];
      if (!v) returnError(g, label, fmt::format("return value {} is null", i));
      if (v->graph() != &g || (v->node() && !index.count(v->node())))
        returnError(g, label, fmt::format("return value {} is not defined in {}", i, where));
    }

    // Use lists: every use of a value of g is a distinct input slot that
    // reads it, and every input slot is among them.
    std::set<std::pair<const Node*, int>> uses;
    auto checkUses = [&](const Value* v, const std::string& what, const Node* definer) {
      auto fail = [&](const std::string& message) {
        if (definer) nodeError(definer, fmt::format("{}, node {}", label, index.at(definer)), message);
        graphError(g, label, message);
      };
      for (const Use& u : v->uses()) {
        auto it = index.find(u.user);
        if (it == index.end()) fail(fmt::format("{} has a use by a node that is not in {}", what, where));
        if (u.index < 0 || u.index >= u.user->numInputs() || u.user->input(u.index) != v)
          fail(fmt::format("{} lists a use by input {} of node {} ({}), which does not read it", what, u.index,
                           it->second, opName(u.user->op())));
        if (!uses.emplace(u.user, u.index).second)
          fail(fmt::format("{} lists its use by input {} of node {} twice", what, u.index, it->second));
      }
    };
    for (int i = 0; i < g.numInputs(); ++i) checkUses(g.input(i), fmt::format("input {}", i), nullptr);
    for (const Node* n : nodes)
      for (int r = 0; r < n->numOutputs(); ++r)
        checkUses(n->output(r), fmt::format("{}: result {}", opName(n->op()), r), n);
    for (const Node* n : nodes)
      for (int k = 0; k < n->numInputs(); ++k)
        if (!uses.count({n, k}))
          nodeError(n, fmt::format("{}, node {}", label, index.at(n)),
                    fmt::format("{}: operand {} is missing from its value's use list", opName(n->op()), k));
  }

  void node(const Graph& g, const Node* n, const std::string& label, const std::string& graphLabel, int i, bool isBody,
            const std::unordered_set<const Node*>& defined) {
    const OpInfo& info = n->info();
    const std::string_view name = info.name;
    for (int k = 0; k < n->numInputs(); ++k) {
      const Value* v = n->input(k);
      if (v->graph() != &g)
        nodeError(n, label,
                  isBody ? fmt::format("{}: operand {} is defined outside this fusion body; a body sees only its "
                                       "block arguments and its own values",
                                       name, k)
                         : fmt::format("{}: operand {} is defined in another graph", name, k));
      if (v->node() && !defined.count(v->node()))
        nodeError(n, label, fmt::format("{}: operand {} is used before its definition", name, k));
    }
    if (info.arity >= 0 && n->numInputs() != info.arity)
      nodeError(n, label, fmt::format("{}: expected {}, got {}", name, plural(info.arity, "input"), n->numInputs()));
    if (n->op() == Op::fusion) {
      if (n->numOutputs() < 1) nodeError(n, label, "fusion: expected at least 1 result, got 0");
    } else if (n->numOutputs() != 1) {
      nodeError(n, label, fmt::format("{}: expected 1 result, got {}", name, n->numOutputs()));
    }
    if (n->op() != Op::fusion && n->body()) nodeError(n, label, fmt::format("{}: only fusion nodes have a body", name));

    if (n->op() == Op::constant) {
      auto it = n->attrs().find("value");
      if (it == n->attrs().end()) nodeError(n, label, "constant: missing attribute 'value'");
      const int64_t* i = std::get_if<int64_t>(&it->second);
      if (!i && !std::holds_alternative<double>(it->second))
        nodeError(n, label,
                  fmt::format("constant: attribute 'value' must be an int or a float, got {}", attrStr(it->second)));
      // An int is exact (Note [Integer constants are exact]): one that the
      // dtype cannot hold is a mistake, not something to wrap silently.
      const DType dtype = n->output()->type().dtype;
      if (i &&
          ((dtype == DType::i32 && *i != static_cast<int32_t>(*i)) || (dtype == DType::boolean && *i != 0 && *i != 1)))
        nodeError(n, label, fmt::format("constant: value {} does not fit {}", *i, dtypeName(dtype)));
      return;
    }
    if (n->op() == Op::fusion) return fusion(n, label, fmt::format("{}, body of node {}", graphLabel, i));

    std::vector<TensorType> types;
    for (const Value* v : n->inputs()) types.push_back(v->type());
    TensorType inferred;
    try {
      inferred = inferType(n->op(), types, n->attrs());
    } catch (const Error& e) {
      nodeError(n, label, e.what());
    }
    if (n->output()->type() != inferred) {
      std::string operands;
      for (size_t k = 0; k < types.size(); ++k) operands += (k ? " and " : "") + types[k].str();
      nodeError(n, label,
                fmt::format("{}: result type is {}, but the registry infers {} from {}", name,
                            n->output()->type().str(), inferred.str(), operands.empty() ? "no operands" : operands));
    }
  }

  void fusion(const Node* n, const std::string& label, const std::string& bodyLabel) {
    const Graph* body = n->body();
    if (!body) nodeError(n, label, "fusion: has no body");
    const std::vector<Node*> inner = body->nodes();
    bool reductions = false;
    for (size_t j = 0; j < inner.size(); ++j) {
      const OpKind kind = inner[j]->info().kind;
      reductions = reductions || kind == OpKind::reduction;
      if (kind != OpKind::elementwise && kind != OpKind::constant && kind != OpKind::movement &&
          kind != OpKind::reduction)
        nodeError(n, label,
                  fmt::format("fusion: body node {} is {}; a fusion body holds only elementwise ops, movement ops, "
                              "reductions and constants",
                              j, opName(inner[j]->op())));
    }
    if (body->numInputs() != n->numInputs())
      nodeError(n, label,
                fmt::format("fusion: body has {} for {}", plural(body->numInputs(), "block argument"),
                            plural(n->numInputs(), "operand")));
    for (int i = 0; i < n->numInputs(); ++i)
      if (body->input(i)->type() != n->input(i)->type())
        nodeError(n, label,
                  fmt::format("fusion: block argument {} has type {}, but operand {} has type {}", i,
                              body->input(i)->type().str(), i, n->input(i)->type().str()));
    graph(*body, bodyLabel, true);
    const auto results = body->outputs();
    if (static_cast<int>(results.size()) != n->numOutputs())
      nodeError(n, label,
                fmt::format("fusion: body returns {} for {}", plural(results.size(), "value"),
                            plural(n->numOutputs(), "result")));
    for (int i = 0; i < n->numOutputs(); ++i)
      if (results[i]->type() != n->output(i)->type())
        nodeError(n, label,
                  fmt::format("fusion: body result {} has type {}, but result {} has type {}", i,
                              results[i]->type().str(), i, n->output(i)->type().str()));
    // A fusion node is one kernel on one device, used inputs or not.
    std::vector<const TensorType*> all;
    for (const Value* v : n->inputs()) all.push_back(&v->type());
    for (const Value* v : n->outputs()) all.push_back(&v->type());
    for (const TensorType* t : all)
      if (t->device != all[0]->device)
        nodeError(
            n, label,
            fmt::format("fusion: expected all tensors on the same device, got {} and {}", all[0]->str(), t->str()));
    // A body with reductions follows the rules of ir/reduction_fusion.h,
    // which lowering relies on; checked once its nodes are known to be valid.
    if (reductions)
      if (auto error = analyzeReductionGroup(reductionGroupOf(*n), nullptr)) {
        if (error->node < 0) returnError(*body, bodyLabel, "fusion of reductions: " + error->message);
        nodeError(inner[static_cast<size_t>(error->node)], fmt::format("{}, node {}", bodyLabel, error->node),
                  error->message);
      }
  }

  [[noreturn]] void nodeError(const Node* n, const std::string& label, std::string_view message) const {
    const std::string line = printedLine(n);
    throw Error(fmt::format("{}{}: {}{}", locations_ ? locations_->prefix(n) : "", label, message,
                            line.empty() ? "" : "\n  " + line));
  }

  [[noreturn]] void graphError(const Graph& g, const std::string& label, std::string_view message) const {
    std::string prefix;
    if (locations_)
      if (auto it = locations_->graphs.find(&g); it != locations_->graphs.end())
        prefix = locations_->str(it->second) + ": ";
    throw Error(fmt::format("{}{}: {}", prefix, label, message));
  }

  [[noreturn]] void returnError(const Graph& g, const std::string& label, std::string_view message) const {
    throw Error(fmt::format("{}{}: {}", locations_ ? locations_->returnPrefix(&g) : "", label, message));
  }

  /// The line the printer writes for `target`, without its indent; "" when
  /// the graph cannot be printed (a null output).
  std::string printedLine(const Node* target) const {
    if (!printable(root_)) return "";
    int line = 1;  // after the header
    if (!find(root_, target, line)) return "";
    const std::string text = printGraph(root_);
    size_t begin = 0;
    for (int i = 0; i < line && begin != std::string::npos; ++i) {
      begin = text.find('\n', begin);
      if (begin != std::string::npos) ++begin;
    }
    if (begin == std::string::npos) return "";
    begin = text.find_first_not_of(' ', begin);
    return text.substr(begin, text.find('\n', begin) - begin);
  }

  // Walks the nodes in the order and layout of ir/printer.cpp: one line per
  // node; a body adds its "^(...):" line, its lines, and the closing "}".
  static bool find(const Graph& g, const Node* target, int& line) {
    for (const Node* n : g.nodes()) {
      if (n == target) return true;
      ++line;
      if (const Graph* body = n->body()) {
        ++line;
        if (find(*body, target, line)) return true;
        ++line;
      }
    }
    ++line;  // return
    return false;
  }

  static bool printable(const Graph& g) {
    for (const Value* v : g.outputs())
      if (!v) return false;
    for (const Node* n : g.nodes())
      if (n->body() && !printable(*n->body())) return false;
    return true;
  }

  const Graph& root_;
  const SourceLocations* locations_;
};

}  // namespace

void verify(const Graph& graph, const SourceLocations* locations) { Verifier(graph, locations).run(); }

}  // namespace kiln::ir

// Graphviz output of tools/irdump/dot.h. Values are edges; nodes are ops,
// graph inputs and outputs. A fusion node's body ops sit in a cluster, and
// the edges into and out of the cluster go to the body ops that read the
// node's operands and to the node's results' consumers.
#include "tools/irdump/dot.h"

#include <fmt/format.h>

#include <unordered_map>

namespace kiln::tools {

namespace {
class DotWriter {
 public:
  std::string write(const ir::Graph& g) {
    out_ = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n", g.name());
    for (int i = 0; i < g.numInputs(); ++i) {
      std::string id = fmt::format("in{}", i);
      out_ += fmt::format("  {} [label=\"{}\\n{}\", shape=ellipse];\n", id, g.input(i)->name().empty() ? id : "%" + g.input(i)->name(), g.input(i)->type().str());
      source_[g.input(i)] = id;
    }
    for (const ir::Node* n : g.nodes()) node(*n, "  ");
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      out_ += fmt::format("  out{} [label=\"result {}\", shape=ellipse];\n", i, i);
      out_ += fmt::format("  {} -> out{};\n", source_.at(g.outputs()[i]), i);
    }
    return out_ + "}\n";
  }

 private:
  void node(const ir::Node& n, const std::string& indent) {
    if (n.op() == ir::Op::fusion) {
      const ir::Graph& body = *n.body();
      out_ += fmt::format("{}subgraph cluster_{} {{\n{}  label=\"fusion\"; style=rounded; color=blue;\n", indent, next_, indent);
      ++next_;
      for (int i = 0; i < body.numInputs(); ++i) source_[body.input(i)] = source_.at(n.input(i));
      for (const ir::Node* inner : body.nodes()) node(*inner, indent + "  ");
      out_ += indent + "}\n";
      for (int i = 0; i < n.numOutputs(); ++i) source_[n.output(i)] = source_.at(body.outputs()[i]);
      return;
    }
    std::string id = fmt::format("n{}", next_++);
    std::string label(ir::opName(n.op()));
    for (const auto& [key, value] : n.attrs()) label += fmt::format("\\n{} = {}", key, ir::attrStr(value));
    std::string escaped;
    for (char c : label) escaped += c == '"' ? std::string("\\\"") : std::string(1, c);
    out_ += fmt::format("{}{} [label=\"{}\\n{}\"];\n", indent, id, escaped, n.output()->type().str());
    for (const ir::Value* in : n.inputs()) out_ += fmt::format("{}{} -> {};\n", indent, source_.at(in), id);
    for (const ir::Value* out : n.outputs()) source_[out] = id;
  }

  std::string out_;
  std::unordered_map<const ir::Value*, std::string> source_;
  int next_ = 0;
};
}  // namespace

std::string toDot(const ir::Graph& graph) { return DotWriter().write(graph); }

}  // namespace kiln::tools

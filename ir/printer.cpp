// The IR text printer of ir/printer.h.
#include "ir/printer.h"

#include <fmt/format.h>

#include <set>
#include <unordered_map>

namespace kiln::ir {

namespace {
class Printer {
 public:
  std::string graph(const Graph& g) {
    out_ += fmt::format("graph @{}(", g.name());
    for (int i = 0; i < g.numInputs(); ++i)
      out_ += fmt::format("{}{}: {}", i ? ", " : "", name(g.input(i)), g.input(i)->type().str());
    out_ += ") -> (";
    for (size_t i = 0; i < g.outputs().size(); ++i) out_ += fmt::format("{}{}", i ? ", " : "", g.outputs()[i]->type().str());
    out_ += ") {\n";
    body(g, 1);
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  void body(const Graph& g, int depth) {
    const std::string indent(2 * depth, ' ');
    for (const Node* n : g.nodes()) {
      out_ += indent;
      for (int i = 0; i < n->numOutputs(); ++i) out_ += fmt::format("{}{}", i ? ", " : "", name(n->output(i)));
      out_ += fmt::format(" = {}(", opName(n->op()));
      for (int i = 0; i < n->numInputs(); ++i) out_ += fmt::format("{}{}", i ? ", " : "", name(n->input(i)));
      out_ += ")";
      if (!n->attrs().empty()) {
        out_ += " {";
        bool first = true;
        for (const auto& [key, value] : n->attrs()) {
          out_ += fmt::format("{}{} = {}", first ? "" : ", ", key, attrStr(value));
          first = false;
        }
        out_ += "}";
      }
      out_ += " : ";
      for (int i = 0; i < n->numOutputs(); ++i) out_ += fmt::format("{}{}", i ? ", " : "", n->output(i)->type().str());
      if (const Graph* b = n->body()) {
        out_ += " {\n" + indent + "^(";
        for (int i = 0; i < b->numInputs(); ++i)
          out_ += fmt::format("{}{}: {}", i ? ", " : "", name(b->input(i)), b->input(i)->type().str());
        out_ += "):\n";
        body(*b, depth + 1);
        out_ += indent + "}";
      }
      out_ += "\n";
    }
    out_ += indent + "return";
    for (size_t i = 0; i < g.outputs().size(); ++i) out_ += fmt::format("{}{}", i ? ", " : " ", name(g.outputs()[i]));
    out_ += "\n";
  }

  std::string name(const Value* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    std::string n;
    if (!v->name().empty()) {
      n = "%" + v->name();
      for (int k = 1; used_.count(n); ++k) n = fmt::format("%{}_{}", v->name(), k);
    } else {
      do n = fmt::format("%{}", next_++);
      while (used_.count(n));
    }
    used_.insert(n);
    return names_[v] = n;
  }

  std::string out_;
  std::unordered_map<const Value*, std::string> names_;
  std::set<std::string> used_;
  int next_ = 0;
};
}  // namespace

std::string printGraph(const Graph& graph) { return Printer().graph(graph); }

}  // namespace kiln::ir

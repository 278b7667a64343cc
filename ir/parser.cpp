// The IR text parser of ir/parser.h: recursive descent over the tokens of
// ir/lexer.h, one function per rule of the grammar in docs/ir.md.
//
// Names. Every name is defined once per top-level graph, fusion bodies
// included, as the printer writes them. A graph sees its inputs and the
// values defined above the use; a fusion body sees only its block arguments
// and its own values (an outer name is an error that says so). A parsed value
// keeps its name as a name hint, except a numbered name that the printer would
// give it anyway (`%4` where the printer's counter stands at 4): that one stays
// unnamed, so that a pass that removes values lets the printer renumber, and
// printing the parsed graph gives back the text it was read from.
#include "ir/parser.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/lexer.h"
#include "runtime/error.h"

namespace kiln::ir {

std::string SourceLocations::str(Location loc) const { return fmt::format("{}:{}:{}", file, loc.line, loc.col); }

std::string SourceLocations::prefix(const Node* node) const {
  auto it = nodes.find(node);
  return it == nodes.end() ? std::string() : str(it->second) + ": ";
}

std::string SourceLocations::returnPrefix(const Graph* graph) const {
  auto it = returns.find(graph);
  return it == returns.end() ? std::string() : str(it->second) + ": ";
}

namespace {

std::string plural(size_t n, std::string_view word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

class Parser {
 public:
  Parser(std::string_view text, std::string_view file, int firstLine) : lex_(text, file, firstLine) {
    result_.locations.file = std::string(file);
  }

  ParseResult module() {
    all();
    return std::move(result_);
  }

  std::unique_ptr<Graph> single() {
    all();
    if (result_.graphs.empty()) fail(lex_.peek(), "expected a graph");
    if (result_.graphs.size() > 1) {
      const Graph* second = result_.graphs[1].get();
      lex_.error(result_.locations.graphs.at(second),
                 fmt::format("expected one graph, found a second one (@{})", second->name()));
    }
    return std::move(result_.graphs[0]);
  }

 private:
  /// The values visible in a graph or a fusion body.
  struct Scope {
    int id;
    const Scope* parent;
    std::unordered_map<std::string_view, Value*> values;
  };
  /// Where a name was defined, and in which scope.
  struct Def {
    Location loc;
    int scope;
  };

  void all() {
    while (!lex_.at(TokKind::eof)) {
      if (!lex_.atIdent("graph")) fail(lex_.peek(), "expected 'graph' or end of input");
      result_.graphs.push_back(graph());
    }
  }

  [[noreturn]] void fail(const Token& found, std::string_view expected) {
    lex_.error(found.loc, fmt::format("{}, found {}", expected, Lexer::describe(found)));
  }

  Token expect(TokKind kind, std::string_view expected) {
    if (!lex_.at(kind)) fail(lex_.peek(), expected);
    return lex_.next();
  }

  bool accept(TokKind kind) {
    if (!lex_.at(kind)) return false;
    lex_.next();
    return true;
  }

  // graph @name(%x: type, ...) -> (type, ...) { statement* return values }
  std::unique_ptr<Graph> graph() {
    const Token keyword = lex_.next();
    const Token name = expect(TokKind::graphName, "expected a graph name ('@name') after 'graph'");
    if (auto it = graphNames_.find(name.text); it != graphNames_.end())
      lex_.error(name.loc, fmt::format("redefinition of graph {} (first defined at {})", name.text,
                                       result_.locations.str(it->second)));
    graphNames_.emplace(name.text, name.loc);
    auto g = std::make_unique<Graph>(std::string(name.text.substr(1)));
    result_.locations.graphs[g.get()] = keyword.loc;
    defs_.clear();
    next_ = candidate_ = 0;
    Scope scope{nextScope_++, nullptr, {}};
    const std::string where = fmt::format("graph {}", name.text);

    expect(TokKind::lparen, fmt::format("expected '(' after {}", where));
    arguments(*g, scope, where);
    expect(TokKind::arrow, fmt::format("expected '->' after the inputs of {}", where));
    expect(TokKind::lparen, fmt::format("expected '(' after '->' in {}", where));
    std::vector<TensorType> declared;
    if (!accept(TokKind::rparen)) {
      do declared.push_back(type(fmt::format("a result type of {}", where)));
      while (accept(TokKind::comma));
      expect(TokKind::rparen, fmt::format("expected ')' after the result types of {}", where));
    }
    expect(TokKind::lbrace, fmt::format("expected '{{' after the header of {}", where));
    const Location ret = block(*g, scope, where, 0);
    const auto outputs = g->outputs();
    if (outputs.size() != declared.size())
      lex_.error(ret, fmt::format("{} returns {} but its header declares {}", where, plural(outputs.size(), "value"),
                                  plural(declared.size(), "result type")));
    for (size_t i = 0; i < declared.size(); ++i)
      if (outputs[i]->type() != declared[i])
        lex_.error(ret, fmt::format("return value {} of {} has type {}, but its header declares {}", i, where,
                                    outputs[i]->type().str(), declared[i].str()));
    expect(TokKind::rbrace, fmt::format("expected '}}' after the return of {}", where));
    return g;
  }

  // (%x: type, ...) after the '(' : a graph's inputs or a body's block arguments.
  void arguments(Graph& g, Scope& scope, std::string_view where) {
    if (accept(TokKind::rparen)) return;
    do {
      const Token name = expect(TokKind::valueName, fmt::format("expected an input name ('%name') in {}", where));
      checkNew(name);
      expect(TokKind::colon, fmt::format("expected ':' after {}", name.text));
      Value* v = g.addInput(type(fmt::format("the type of {}", name.text)));
      define(scope, name, v);
    } while (accept(TokKind::comma));
    expect(TokKind::rparen, fmt::format("expected ')' after the inputs of {}", where));
  }

  // statement* 'return' [values]; returns where the return is. The caller
  // reads the closing '}'.
  Location block(Graph& g, Scope& scope, std::string_view where, int depth) {
    while (lex_.at(TokKind::valueName)) statement(g, scope, depth);
    if (!lex_.atIdent("return")) fail(lex_.peek(), fmt::format("expected an op line or 'return' in {}", where));
    const Location ret = lex_.next().loc;
    result_.locations.returns[&g] = ret;
    std::vector<Value*> outputs;
    if (lex_.at(TokKind::valueName)) {
      do {
        const Token v =
            expect(TokKind::valueName, fmt::format("expected a value ('%name') in the return of {}", where));
        outputs.push_back(lookup(scope, v, fmt::format("in the return of {}", where)));
      } while (accept(TokKind::comma));
    }
    g.setOutputs(std::move(outputs));
    return ret;
  }

  // %r, ... = op(%a, ...) [{attrs}] : type, ... [{ ^(%b: type, ...): block }]
  void statement(Graph& g, Scope& scope, int depth) {
    std::vector<Token> results{lex_.next()};
    while (accept(TokKind::comma))
      results.push_back(expect(TokKind::valueName, "expected a result name ('%name') after ','"));
    for (size_t i = 0; i < results.size(); ++i) {
      checkNew(results[i]);
      for (size_t j = 0; j < i; ++j)
        if (results[j].text == results[i].text)
          lex_.error(results[i].loc, fmt::format("redefinition of {} (first defined at {})", results[i].text,
                                                 result_.locations.str(results[j].loc)));
    }
    expect(TokKind::equal, fmt::format("expected '=' after {}", results.back().text));
    const Token opTok = expect(TokKind::ident, "expected an op name after '='");
    const std::optional<Op> op = parseOp(opTok.text);
    if (!op) lex_.error(opTok.loc, fmt::format("unknown op '{}'", opTok.text));
    const std::string_view name = opName(*op);

    expect(TokKind::lparen, fmt::format("expected '(' after {}", name));
    std::vector<Value*> inputs;
    if (!accept(TokKind::rparen)) {
      do {
        const Token v = expect(TokKind::valueName, fmt::format("expected an operand ('%name') of {}", name));
        inputs.push_back(lookup(scope, v, fmt::format("(operand {} of {})", inputs.size(), name)));
      } while (accept(TokKind::comma));
      expect(TokKind::rparen, fmt::format("expected ')' after operands of {}", name));
    }
    Attributes attrs;
    if (lex_.at(TokKind::lbrace)) attrs = attributes(name);
    expect(TokKind::colon, fmt::format("expected ':' and the result types of {}", name));
    std::vector<TensorType> types;
    do types.push_back(type(fmt::format("a result type of {}", name)));
    while (accept(TokKind::comma));
    if (types.size() != results.size())
      lex_.error(results[0].loc, fmt::format("{} has {} but {}", name, plural(results.size(), "result"),
                                             plural(types.size(), "result type")));

    Node* node = g.appendRaw(*op, inputs, std::move(types), std::move(attrs));
    result_.locations.nodes[node] = results[0].loc;
    for (size_t i = 0; i < results.size(); ++i) define(scope, results[i], node->output(static_cast<int>(i)));

    if (!lex_.at(TokKind::lbrace)) return;
    if (*op != Op::fusion)
      lex_.error(lex_.peek().loc, fmt::format("{} cannot have a body; only fusion nodes do", name));
    if (depth + 1 > kMaxNesting)
      lex_.error(lex_.peek().loc, fmt::format("fusion bodies nested deeper than {} levels", kMaxNesting));
    lex_.next();
    const std::string where = fmt::format("the body of fusion {}", results[0].text);
    const Token caret = expect(TokKind::caret, fmt::format("expected '^' and the block arguments of {}", where));
    auto body = std::make_unique<Graph>("fused");
    result_.locations.graphs[body.get()] = caret.loc;
    Scope inner{nextScope_++, &scope, {}};
    expect(TokKind::lparen, "expected '(' after '^'");
    arguments(*body, inner, where);
    expect(TokKind::colon, fmt::format("expected ':' after the block arguments of {}", where));
    block(*body, inner, where, depth + 1);
    expect(TokKind::rbrace, fmt::format("expected '}}' after the return of {}", where));
    node->setBody(std::move(body));
  }

  // {key = value, ...}
  Attributes attributes(std::string_view op) {
    lex_.next();  // '{'
    Attributes attrs;
    if (accept(TokKind::rbrace)) return attrs;
    do {
      const Token key = expect(TokKind::ident, fmt::format("expected an attribute name in the attributes of {}", op));
      expect(TokKind::equal, fmt::format("expected '=' after attribute {}", key.text));
      AttrValue value = attrValue(key.text);
      if (!attrs.emplace(std::string(key.text), std::move(value)).second)
        lex_.error(key.loc, fmt::format("duplicate attribute '{}' on {}", key.text, op));
    } while (accept(TokKind::comma));
    expect(TokKind::rbrace, fmt::format("expected ',' or '}}' after the attributes of {}", op));
    return attrs;
  }

  // 3 | 1.0e-05 | nan | inf | -inf | "text" | [1, 2] | f32
  AttrValue attrValue(std::string_view key) {
    const std::string expected =
        fmt::format("expected a value for attribute {} (an integer, float, string, [int list] or dtype)", key);
    const Token t = lex_.next();
    switch (t.kind) {
      case TokKind::integer: return integer(t);
      case TokKind::floating: return floating(t);
      case TokKind::string: return t.str;
      case TokKind::ident:
        if (t.text == "nan") return std::numeric_limits<double>::quiet_NaN();
        if (t.text == "inf") return std::numeric_limits<double>::infinity();
        if (auto d = parseDType(t.text)) return *d;
        fail(t, expected);
      case TokKind::lbracket: {
        std::vector<int64_t> list;
        if (accept(TokKind::rbracket)) return list;
        do {
          const Token e = lex_.next();
          if (e.kind != TokKind::integer) fail(e, fmt::format("expected an integer in the list of attribute {}", key));
          list.push_back(integer(e));
        } while (accept(TokKind::comma));
        expect(TokKind::rbracket, fmt::format("expected ',' or ']' in the list of attribute {}", key));
        return list;
      }
      default: fail(t, expected);
    }
  }

  int64_t integer(const Token& t) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size())
      lex_.error(t.loc, fmt::format("integer {} out of range (int64)", t.text));
    return v;
  }

  double floating(const Token& t) {
    if (t.text == "-inf") return -std::numeric_limits<double>::infinity();
    double v = 0;
    auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size())
      lex_.error(t.loc, fmt::format("float {} out of range (f64)", t.text));
    return v;
  }

  // dtype '[' dims ']' '@' device, as in f32[4,8]@cpu and f32[]@cuda:0.
  TensorType type(std::string_view what) {
    const Token d = lex_.peek();
    if (d.kind != TokKind::ident) fail(d, fmt::format("expected {} (a type like f32[4]@cpu)", what));
    const std::optional<DType> dtype = parseDType(d.text);
    if (!dtype)
      lex_.error(d.loc, fmt::format("unknown dtype '{}'; expected f32, f16, bf16, f64, i32, i64 or bool", d.text));
    lex_.next();
    expect(TokKind::lbracket, fmt::format("expected '[' after dtype {}", d.text));
    Shape shape;
    int64_t elements = 1;
    if (!accept(TokKind::rbracket)) {
      do {
        const Token t = lex_.next();
        if (t.kind != TokKind::integer) fail(t, "expected a dimension (an integer) in a shape");
        const int64_t dim = integer(t);
        if (dim < 0) lex_.error(t.loc, fmt::format("negative dimension {} in a shape", dim));
        if (dim > 0 && elements > std::numeric_limits<int64_t>::max() / dim)
          lex_.error(t.loc, "shape has more than 2^63-1 elements");
        elements *= dim;
        shape.push_back(dim);
      } while (accept(TokKind::comma));
      expect(TokKind::rbracket, "expected ',' or ']' in a shape");
    }
    const Device device = lex_.lexDevice(fmt::format("{}{}", d.text, shapeStr(shape)));
    return {*dtype, std::move(shape), device};
  }

  /// Rejects a name defined before anywhere in this graph, bodies included.
  void checkNew(const Token& name) {
    if (auto it = defs_.find(name.text); it != defs_.end())
      lex_.error(name.loc, fmt::format("redefinition of {} (first defined at {})", name.text,
                                       result_.locations.str(it->second.loc)));
  }

  /// Makes `v` visible as `name` in `scope`, named as the printer would print it.
  void define(Scope& scope, const Token& name, Value* v) {
    checkNew(name);
    // The printer numbers an unnamed value with the first number from its
    // counter whose name is not taken; such a name need not be kept.
    if (name.text == fmt::format("%{}", candidate_)) {
      next_ = candidate_ + 1;
      candidate_ = next_;
    } else {
      v->setName(std::string(name.text.substr(1)));
    }
    defs_.emplace(name.text, Def{name.loc, scope.id});
    scope.values.emplace(name.text, v);
    while (defs_.count(fmt::format("%{}", candidate_))) ++candidate_;
  }

  Value* lookup(const Scope& scope, const Token& name, std::string_view context) {
    if (auto it = scope.values.find(name.text); it != scope.values.end()) return it->second;
    auto def = defs_.find(name.text);
    if (def == defs_.end()) lex_.error(name.loc, fmt::format("unknown value {} {}", name.text, context));
    const std::string at = result_.locations.str(def->second.loc);
    for (const Scope* s = scope.parent; s; s = s->parent)
      if (s->id == def->second.scope)
        lex_.error(name.loc, fmt::format("{} is defined outside this fusion body (at {}); a body sees only its block "
                                         "arguments and its own values",
                                         name.text, at));
    lex_.error(name.loc,
               fmt::format("{} is defined inside a fusion body (at {}) and is not visible here", name.text, at));
  }

  Lexer lex_;
  ParseResult result_;
  std::unordered_map<std::string_view, Location> graphNames_;
  // Per top-level graph: every name defined in it, and the printer's counter.
  std::unordered_map<std::string_view, Def> defs_;
  int next_ = 0;
  int candidate_ = 0;  ///< the first number from next_ on whose name is free
  int nextScope_ = 0;
};

}  // namespace

ParseResult parseSource(std::string_view text, std::string_view filename, int firstLine) {
  return Parser(text, filename, firstLine).module();
}

std::vector<std::unique_ptr<Graph>> parseModule(std::string_view text, std::string_view filename, int firstLine) {
  return parseSource(text, filename, firstLine).graphs;
}

std::unique_ptr<Graph> parseGraph(std::string_view text, std::string_view filename, int firstLine) {
  return Parser(text, filename, firstLine).single();
}

std::vector<SourceChunk> splitInputFile(std::string_view text) {
  std::vector<SourceChunk> chunks;
  size_t chunkStart = 0, pos = 0;
  int chunkLine = 1, line = 1;
  while (true) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view content = text.substr(pos, eol - pos);
    while (!content.empty() && (content[0] == ' ' || content[0] == '\t')) content.remove_prefix(1);
    if (content.starts_with("// -----")) {
      chunks.push_back({text.substr(chunkStart, pos - chunkStart), chunkLine});
      chunkStart = std::min(eol + 1, text.size());
      chunkLine = line + 1;
    }
    if (eol == text.size()) break;
    pos = eol + 1;
    ++line;
  }
  chunks.push_back({text.substr(chunkStart), chunkLine});
  return chunks;
}

}  // namespace kiln::ir

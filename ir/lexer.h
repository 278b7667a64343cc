// The tokenizer of the IR text format (docs/ir.md), used by ir/parser.cpp.
// It reads one token ahead on demand, tracks line and column for messages,
// skips blanks and `//` comments, decodes string escapes, and reads a
// device (`@cpu`, `@cuda:0`) as raw text when the parser asks for one, since
// `cuda:0` would otherwise lex as a name, a colon and a number.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/parser.h"
#include "runtime/device.h"

namespace kiln::ir {

enum class TokKind {
  eof,
  ident,      ///< graph, return, add, f32, nan, an attribute key
  valueName,  ///< %x, %0
  graphName,  ///< @name
  integer,    ///< 3, -1
  floating,   ///< 1.0e-05, -inf (nan and inf alone are idents)
  string,     ///< "text" (decoded into Token::str)
  lparen,
  rparen,
  lbrace,
  rbrace,
  lbracket,
  rbracket,
  comma,
  colon,
  equal,
  arrow,  ///< ->
  caret,  ///< ^
};

struct Token {
  TokKind kind = TokKind::eof;
  std::string_view text;  ///< as written, quotes and % included
  Location loc;
  std::string str;  ///< a string literal's decoded contents
};

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view file, int firstLine);

  const Token& peek();
  Token next();
  bool at(TokKind kind) { return peek().kind == kind; }
  bool atIdent(std::string_view word) { return peek().kind == TokKind::ident && peek().text == word; }

  /// Reads `@cpu`, `@cuda` or `@cuda:N` right after a shape (blanks
  /// allowed before the '@'); `type` is the type so far, for messages.
  Device lexDevice(std::string_view type);

  const std::string& file() const { return file_; }
  /// Throws kiln::Error "file:line:col: message".
  [[noreturn]] void error(Location loc, std::string_view message) const;
  /// How a token reads in "found ..." ('%y', end of input), shortened.
  static std::string describe(const Token& token);

 private:
  Token lex();
  void skipTrivia();
  char cur() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  char ahead(size_t n) const { return pos_ + n < text_.size() ? text_[pos_ + n] : '\0'; }
  bool done() const { return pos_ >= text_.size(); }
  void advance();
  Location here() const { return {line_, col_}; }
  Token lexNumber(Location start);
  Token lexString(Location start);

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
  int line_;
  int col_ = 1;
  std::optional<Token> peeked_;
};

}  // namespace kiln::ir

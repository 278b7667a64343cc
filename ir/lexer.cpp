// The IR tokenizer of ir/lexer.h. Characters are classified by hand, not with
// <cctype>, so that bytes above 0x7f (allowed only inside strings) never reach
// locale-dependent functions.
#include "ir/lexer.h"

#include <fmt/format.h>

#include <charconv>

#include "runtime/error.h"

namespace kiln::ir {

namespace {
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isIdentStart(char c) { return isLetter(c) || c == '_'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c) || c == '.'; }
/// What may follow '%' or '@' in a name.
bool isNameChar(char c) { return isIdentChar(c) || c == '$'; }
int hexValue(char c) {
  if (isDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
/// A character for a message: itself when printable ASCII, else \xHH.
std::string charStr(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  return fmt::format("\\x{:02x}", u);
}
}  // namespace

Lexer::Lexer(std::string_view text, std::string_view file, int firstLine)
    : text_(text), file_(file), line_(firstLine) {}

void Lexer::error(Location loc, std::string_view message) const {
  throw Error(fmt::format("{}:{}:{}: {}", file_, loc.line, loc.col, message));
}

std::string Lexer::describe(const Token& token) {
  if (token.kind == TokKind::eof) return "end of input";
  std::string text;
  for (char c : token.text) text += charStr(c);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return "'" + text + "'";
}

void Lexer::advance() {
  if (text_[pos_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skipTrivia() {
  while (!done()) {
    const char c = cur();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance();
    } else if (c == '/' && ahead(1) == '/') {
      while (!done() && cur() != '\n') advance();
    } else {
      return;
    }
  }
}

const Token& Lexer::peek() {
  if (!peeked_) peeked_ = lex();
  return *peeked_;
}

Token Lexer::next() {
  Token t = peek();
  peeked_.reset();
  return t;
}

Token Lexer::lex() {
  skipTrivia();
  const Location start = here();
  const size_t begin = pos_;
  auto make = [&](TokKind kind) { return Token{kind, text_.substr(begin, pos_ - begin), start, {}}; };
  if (done()) return make(TokKind::eof);
  const char c = cur();
  auto single = [&](TokKind kind) {
    advance();
    return make(kind);
  };
  switch (c) {
    case '(': return single(TokKind::lparen);
    case ')': return single(TokKind::rparen);
    case '{': return single(TokKind::lbrace);
    case '}': return single(TokKind::rbrace);
    case '[': return single(TokKind::lbracket);
    case ']': return single(TokKind::rbracket);
    case ',': return single(TokKind::comma);
    case ':': return single(TokKind::colon);
    case '=': return single(TokKind::equal);
    case '^': return single(TokKind::caret);
    case '"': return lexString(start);
    default: break;
  }
  if (c == '%' || c == '@') {
    advance();
    if (!isNameChar(cur())) error(start, fmt::format("expected a name after '{}'", c));
    while (isNameChar(cur())) advance();
    return make(c == '%' ? TokKind::valueName : TokKind::graphName);
  }
  if (c == '-') {
    if (ahead(1) == '>') {
      advance();
      advance();
      return make(TokKind::arrow);
    }
    if (isDigit(ahead(1))) return lexNumber(start);
    if (text_.substr(pos_ + 1).starts_with("inf") && !isIdentChar(ahead(4))) {
      for (int i = 0; i < 4; ++i) advance();
      return make(TokKind::floating);
    }
    error(start, "unexpected character '-'");
  }
  if (isDigit(c)) return lexNumber(start);
  if (isIdentStart(c)) {
    while (isIdentChar(cur())) advance();
    return make(TokKind::ident);
  }
  error(start, fmt::format("unexpected character '{}'", charStr(c)));
}

// [-] digits [. digits*] [(e|E) [+|-] digits]; anything name-like glued to it
// makes it a bad number rather than two tokens.
Token Lexer::lexNumber(Location start) {
  const size_t begin = pos_;
  bool floating = false;
  if (cur() == '-') advance();
  while (isDigit(cur())) advance();
  if (cur() == '.') {
    floating = true;
    advance();
    while (isDigit(cur())) advance();
  }
  if ((cur() == 'e' || cur() == 'E') &&
      (isDigit(ahead(1)) || ((ahead(1) == '+' || ahead(1) == '-') && isDigit(ahead(2))))) {
    floating = true;
    advance();
    if (cur() == '+' || cur() == '-') advance();
    while (isDigit(cur())) advance();
  }
  if (isIdentChar(cur())) {
    while (isIdentChar(cur())) advance();
    error(start, fmt::format("bad number '{}'", text_.substr(begin, pos_ - begin)));
  }
  return Token{floating ? TokKind::floating : TokKind::integer, text_.substr(begin, pos_ - begin), start, {}};
}

// "..." with escapes \" \\ \n \t \r \xHH; a raw newline or control character
// is an error (the printer escapes them).
Token Lexer::lexString(Location start) {
  const size_t begin = pos_;
  std::string value;
  advance();  // the opening quote
  while (true) {
    if (done() || cur() == '\n') error(start, "unterminated string");
    const char c = cur();
    const auto u = static_cast<unsigned char>(c);
    if (c == '"') {
      advance();
      break;
    }
    if (c == '\\') {
      const Location escape = here();
      advance();
      if (done() || cur() == '\n') error(start, "unterminated string");
      const char e = cur();
      switch (e) {
        case '"':
        case '\\': value += e; break;
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'x': {
          const int hi = hexValue(ahead(1)), lo = hi < 0 ? -1 : hexValue(ahead(2));
          if (lo < 0) error(escape, "expected two hex digits after '\\x' in string");
          value += static_cast<char>(hi * 16 + lo);
          advance();
          advance();
          break;
        }
        default: error(escape, fmt::format("unknown escape '\\{}' in string", charStr(e)));
      }
      advance();
      continue;
    }
    if (u < 0x20 || u == 0x7f) error(here(), fmt::format("control character {} in string; escape it", charStr(c)));
    value += c;
    advance();
  }
  return Token{TokKind::string, text_.substr(begin, pos_ - begin), start, std::move(value)};
}

Device Lexer::lexDevice(std::string_view type) {
  KILN_ASSERT(!peeked_, "lexDevice with a token pending");
  while (cur() == ' ' || cur() == '\t') advance();
  if (cur() != '@')
    error(peek().loc, fmt::format("expected '@' and a device after {}, found {}", type, describe(peek())));
  const Location start = here();
  advance();
  const size_t begin = pos_;
  while (isNameChar(cur()) || cur() == ':') advance();
  const std::string_view name = text_.substr(begin, pos_ - begin);
  if (name == "cpu") return Device::cpu();
  for (DeviceType t : {DeviceType::cuda, DeviceType::opencl}) {
    const std::string_view kind = deviceTypeName(t);
    if (name == kind) return Device(t, 0);
    if (!name.starts_with(kind) || name.size() <= kind.size() || name[kind.size()] != ':') continue;
    const std::string_view digits = name.substr(kind.size() + 1);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (!digits.empty() && isDigit(digits[0]) && ec == std::errc() && end == digits.data() + digits.size())
      return Device(t, index);
  }
  error(start, fmt::format("unknown device '{}' in {}; expected cpu, cuda:N or opencl:N", name, type));
}

}  // namespace kiln::ir

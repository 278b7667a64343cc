// Printing and reading typed attributes.
#include "ir/attributes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::ir {

namespace {
// Floats print with enough digits to round-trip exactly, always with a '.'
// or an exponent so that the parser can tell them from ints.
std::string floatStr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  // DESIGN.md §4 spells 1e-05 as 1.0e-05: a mantissa always has a '.'.
  const size_t e = s.find_first_of("eE");
  const std::string mantissa = s.substr(0, e);
  if (mantissa.find('.') == std::string::npos) s.insert(e == std::string::npos ? s.size() : e, ".0");
  return s;
}

// The escapes the parser reads back (ir/lexer.cpp): \" \\ \n \t \r and \xHH
// for other control characters, so that a string stays on one line. Bytes
// above 0x7f (UTF-8) are written as they are.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}
}  // namespace

std::string attrStr(const AttrValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const { return floatStr(v); }
    std::string operator()(const std::string& v) const { return quoted(v); }
    std::string operator()(const std::vector<int64_t>& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
    std::string operator()(DType v) const { return std::string(dtypeName(v)); }
  };
  return std::visit(Visitor{}, value);
}

double floatAttr(const Attributes& attrs, const char* name, std::string_view op) {
  auto it = attrs.find(name);
  KILN_CHECK(it != attrs.end(), "{}: missing attribute '{}'", op, name);
  if (const double* v = std::get_if<double>(&it->second)) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  fail("{}: attribute '{}' must be a float, got {}", op, name, attrStr(it->second));
}

Number numberAttr(const Attributes& attrs, const char* name, std::string_view op) {
  auto it = attrs.find(name);
  KILN_CHECK(it != attrs.end(), "{}: missing attribute '{}'", op, name);
  if (const double* v = std::get_if<double>(&it->second)) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  fail("{}: attribute '{}' must be an int or a float, got {}", op, name, attrStr(it->second));
}

Number constantValue(const Number& value, DType dtype) {
  const int64_t* i = std::get_if<int64_t>(&value);
  const double f = i ? 0.0 : std::get<double>(value);
  switch (dtype) {
    case DType::i32:
      return i ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(*i))) : floatToIntSaturating(f, dtype);
    case DType::i64: return i ? *i : floatToIntSaturating(f, dtype);
    case DType::boolean: return int64_t{i ? *i != 0 : f != 0};
    case DType::f64: return i ? static_cast<double>(*i) : f;
    case DType::f32:
    case DType::f16:
    case DType::bf16: return i ? static_cast<double>(static_cast<float>(*i)) : f;
  }
  return value;
}

Number constantValue(const Attributes& attrs, DType dtype) {
  return constantValue(numberAttr(attrs, "value", "constant"), dtype);
}

const std::vector<int64_t>& intListAttr(const Attributes& attrs, const char* name, std::string_view op) {
  auto it = attrs.find(name);
  KILN_CHECK(it != attrs.end(), "{}: missing attribute '{}'", op, name);
  const auto* v = std::get_if<std::vector<int64_t>>(&it->second);
  KILN_CHECK(v, "{}: attribute '{}' must be an int list, got {}", op, name, attrStr(it->second));
  return *v;
}

int64_t intAttr(const Attributes& attrs, const char* name, std::string_view op, std::optional<int64_t> fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end() && fallback) return *fallback;
  KILN_CHECK(it != attrs.end(), "{}: missing attribute '{}'", op, name);
  const auto* v = std::get_if<int64_t>(&it->second);
  KILN_CHECK(v, "{}: attribute '{}' must be an int, got {}", op, name, attrStr(it->second));
  return *v;
}

}  // namespace kiln::ir

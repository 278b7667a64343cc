// loadFixture(path): the PyTorch reference values of one op, read from a
// tests/reference/fixtures/<op>.json file that tests/reference/make_fixtures.py
// wrote (format: tests/reference/README.md), so that tests compare kiln with
// PyTorch without Python. The reader takes the JSON those files use (objects,
// arrays, strings without escapes other than \" and \\, numbers, null) and
// checks their shape: a malformed file throws std::runtime_error naming the
// file, the place and what is wrong, never a wrong value.
#pragma once

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln::testutil {

/// An operand or result: a tensor (its shape, and each element's bit pattern
/// in the case's dtype, row-major, with its decimal for messages) or a
/// scalar operand (a C++/Python number).
struct FixtureTensor {
  bool isScalar = false;
  double scalar = 0;
  std::vector<int64_t> shape;
  std::vector<uint64_t> bits;
  std::vector<std::string> text;
};

struct FixtureCase {
  std::string name, op, dtype, expr;  ///< expr: the PyTorch expression that made it
  std::vector<FixtureTensor> inputs;
  FixtureTensor output;
  FixtureTensor upstream;                           ///< the gradient fed to backward
  std::vector<std::optional<FixtureTensor>> grads;  ///< per input; none for a scalar
};

struct Fixture {
  std::string path, op, torch, cpuCapability, date;
  std::vector<FixtureCase> cases;
};

namespace fixtures_detail {

struct Json {
  enum Kind { null, number, string, array, object } kind = null;
  double num = 0;
  std::string str;
  std::vector<Json> items;
  std::map<std::string, Json> fields;
};

class Reader {
 public:
  Reader(std::string path, std::string text) : path_(std::move(path)), s_(std::move(text)) {}

  /// The whole text as one JSON document.
  Json document() {
    Json doc = value();
    if (skip(), pos_ != s_.size()) fail("line " + line() + ": trailing characters after the document");
    return doc;
  }

  /// A tensor in the format of the op fixtures ({"shape", "data"}) of
  /// `dtype`, for files of other layouts (tests/reference/optim/).
  FixtureTensor tensorOf(const Json& j, const std::string& dtype, const std::string& where) {
    return tensor(j, dtype, where);
  }

  Fixture read() {
    Json doc = document();
    where_ = "top";
    if (get(doc, "format", Json::number).num != 1) fail("unknown format version");
    Fixture f{path_,
              get(doc, "op", Json::string).str,
              get(doc, "torch", Json::string).str,
              get(doc, "cpu_capability", Json::string).str,
              get(doc, "date", Json::string).str,
              {}};
    for (const Json& c : get(doc, "cases", Json::array).items) {
      FixtureCase fc;
      where_ = "case " + std::to_string(f.cases.size());
      fc.name = get(c, "name", Json::string).str;
      const std::string at = where_ += " (" + fc.name + ")";
      fc.op = get(c, "op", Json::string).str, fc.dtype = get(c, "dtype", Json::string).str;
      fc.expr = get(c, "expr", Json::string).str;
      if (fc.op != f.op) fail(at + ": op \"" + fc.op + "\" in the file of op \"" + f.op + "\"");
      for (const Json& i : get(c, "inputs", Json::array).items)
        fc.inputs.push_back(tensor(i, fc.dtype, at + " input " + std::to_string(fc.inputs.size())));
      fc.output = tensor(get(c, "output", Json::object), fc.dtype, at + " output");
      const Json& g = get(c, "grads", Json::object);
      fc.upstream = tensor(get(g, "upstream", Json::object), fc.dtype, at + " upstream");
      for (const Json& i : get(g, "inputs", Json::array).items)
        fc.grads.push_back(i.kind == Json::null ? std::nullopt : std::optional(tensor(i, fc.dtype, at + " grad")));
      if (fc.grads.size() != fc.inputs.size()) fail(at + ": one grad per input expected");
      f.cases.push_back(std::move(fc));
    }
    return f;
  }

  [[noreturn]] void fail(const std::string& what) const { throw std::runtime_error("fixture " + path_ + ": " + what); }

 private:
  // The JSON subset, by recursive descent.
  std::string line() const { return std::to_string(1 + std::count(s_.begin(), s_.begin() + pos_, '\n')); }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expect(char c) {
    if (skip(), pos_ >= s_.size()) fail("line " + line() + ": unexpected end of file");
    if (s_[pos_++] != c) fail("line " + line() + ": expected '" + c + "'");
  }
  bool take(char c) { return skip(), pos_ < s_.size() && s_[pos_] == c ? (++pos_, true) : false; }
  std::string str() {
    std::string out;
    for (expect('"'); pos_ < s_.size() && s_[pos_] != '"'; out += s_[pos_++])
      if (s_[pos_] == '\\' && (++pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\\')))
        fail("line " + line() + ": unsupported escape in a string");
    expect('"');
    return out;
  }
  Json value() {
    Json v;
    if (skip(), pos_ >= s_.size()) fail("line " + line() + ": unexpected end of file");
    const char c = s_[pos_];
    if (c == '{' || c == '[') {
      v.kind = c == '{' ? Json::object : Json::array, ++pos_;
      const char close = c == '{' ? '}' : ']';
      if (take(close)) return v;
      do {
        if (c == '[') {
          v.items.push_back(value());
        } else {
          std::string key = str();
          expect(':');
          v.fields[key] = value();
        }
      } while (take(','));
      expect(close);
    } else if (c == '"') {
      v.kind = Json::string, v.str = str();
    } else if (s_.compare(pos_, 4, "null") == 0) {
      pos_ += 4;
    } else {
      char* end = nullptr;
      v.kind = Json::number, v.num = std::strtod(s_.c_str() + pos_, &end);
      if ((c != '-' && !std::isdigit(static_cast<unsigned char>(c))) || end == s_.c_str() + pos_ ||
          !std::isfinite(v.num))
        fail("line " + line() + ": unexpected '" + c + "'");
      pos_ = static_cast<size_t>(end - s_.c_str());
    }
    return v;
  }

  /// obj[key], which must exist and be of `kind`.
  const Json& get(const Json& obj, const std::string& key, Json::Kind kind) const {
    auto it = obj.fields.find(key);
    if (it == obj.fields.end()) fail(where_ + ": missing key \"" + key + "\"");
    if (it->second.kind != kind) fail(where_ + ": \"" + key + "\" has the wrong type");
    return it->second;
  }

  /// {"shape": [...], "data": ["<hex bits> <decimal>", ...]} or {"scalar": n}.
  FixtureTensor tensor(const Json& j, const std::string& dtype, const std::string& where) {
    FixtureTensor t;
    const std::string outer = std::exchange(where_, where);
    if (j.kind != Json::object) fail(where_ + ": expected an object");
    if ((t.isScalar = j.fields.count("scalar"))) t.scalar = get(j, "scalar", Json::number).num;
    int64_t numel = 1;
    for (const Json& d : t.isScalar ? std::vector<Json>{} : get(j, "shape", Json::array).items) {
      if (d.kind != Json::number || d.num < 0 || d.num != std::floor(d.num)) fail(where_ + ": bad shape");
      t.shape.push_back(static_cast<int64_t>(d.num)), numel *= t.shape.back();
    }
    const size_t digits = dtype == "f64" ? 16 : dtype == "f32" ? 8 : dtype == "f16" || dtype == "bf16" ? 4 : 0;
    if (digits == 0) fail(where_ + ": unknown dtype \"" + dtype + "\"");
    for (const Json& e : t.isScalar ? std::vector<Json>{} : get(j, "data", Json::array).items) {
      const std::string index = where_ + ": element " + std::to_string(t.bits.size());
      bool ok = e.kind == Json::string && e.str.find(' ') == digits && e.str.size() > digits + 1;
      for (size_t k = 0; ok && k < digits; ++k) ok = std::isxdigit(static_cast<unsigned char>(e.str[k]));
      if (!ok)
        fail(index + " is not " + std::to_string(digits) + " hex digits, a space and a decimal: \"" + e.str + "\"");
      t.bits.push_back(std::strtoull(e.str.substr(0, digits).c_str(), nullptr, 16));
      t.text.push_back(e.str.substr(digits + 1));
      if (!decimalMatches(t.bits.back(), t.text.back(), dtype))
        fail(index + ": the decimal does not match the bits: \"" + e.str + "\"");
    }
    if (!t.isScalar && static_cast<int64_t>(t.bits.size()) != numel)
      fail(where_ + ": " + std::to_string(t.bits.size()) + " elements for a shape of " + std::to_string(numel));
    where_ = outer;
    return t;
  }

  /// Whether `text` reads back as `bits` (f32, f64; NaN as any NaN): catches
  /// a hand edit that changed one and not the other.
  static bool decimalMatches(uint64_t bits, const std::string& text, const std::string& dtype) {
    char* end = nullptr;
    if (dtype == "f32") {
      float v = std::strtof(text.c_str(), &end);
      return *end == 0 && (std::isnan(v) ? (bits & 0x7fffffffu) > 0x7f800000u : std::bit_cast<uint32_t>(v) == bits);
    }
    double v = std::strtod(text.c_str(), &end);
    return dtype != "f64" ||
           (*end == 0 && (std::isnan(v) ? (bits << 1) > (uint64_t{0x7ff} << 53) : std::bit_cast<uint64_t>(v) == bits));
  }

  std::string path_, s_, where_ = "top";
  size_t pos_ = 0;
};

}  // namespace fixtures_detail

/// The text of a fixture file; throws std::runtime_error naming it when missing.
inline std::string fixtureText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (!in || !(text << in.rdbuf()))
    fixtures_detail::Reader(path, "").fail("cannot be read (regenerate it with its script in tests/reference/)");
  return text.str();
}

/// Reads one fixture file; throws std::runtime_error naming the file when it
/// is missing or malformed.
inline Fixture loadFixture(const std::string& path) { return fixtures_detail::Reader(path, fixtureText(path)).read(); }

using JsonValue = fixtures_detail::Json;

/// Any JSON file (other fixtures' formats), parsed; errors as loadFixture's.
inline JsonValue loadJson(const std::string& path) {
  return fixtures_detail::Reader(path, fixtureText(path)).document();
}

}  // namespace kiln::testutil

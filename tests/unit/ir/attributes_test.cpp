// Unit tests for typed attributes: attrStr for every attribute kind (ints,
// floats that always show a '.' or an exponent and read back to the same
// double, nan/inf, quoted strings with escaped quotes and backslashes, int
// lists, dtypes) and floatAttr, which reads a float (or int) attribute and
// names the op when it is missing or of another kind.
#include "ir/attributes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runtime/error.h"

namespace kiln::ir {
namespace {

TEST(AttrStr, Ints) {
  EXPECT_EQ(attrStr(int64_t{3}), "3");
  EXPECT_EQ(attrStr(int64_t{-1}), "-1");
  EXPECT_EQ(attrStr(int64_t{0}), "0");
  EXPECT_EQ(attrStr(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
}

TEST(AttrStr, FloatsWithShortRepresentations) {
  EXPECT_EQ(attrStr(1.0), "1.0") << "a whole float keeps a '.' so it does not read as an int";
  EXPECT_EQ(attrStr(-3.0), "-3.0");
  EXPECT_EQ(attrStr(100.0), "100.0");
  EXPECT_EQ(attrStr(0.0), "0.0");
  EXPECT_EQ(attrStr(-0.0), "-0.0") << "the sign of zero survives";
  EXPECT_EQ(attrStr(0.5), "0.5");
  EXPECT_EQ(attrStr(0.1), "0.1") << "shortest form that reads back, not 0.1000000000000000055";
  EXPECT_EQ(attrStr(2.5), "2.5");
}

TEST(AttrStr, FloatsReadBackExactly) {
  const double values[] = {
      1e-05, 0.1 + 0.2, 1.0 / 3.0, 1e300,   -1e-300, 5e-324,        123456789.0, 1e16,
      1e22,  3.0e-8,    0.3f,      2.0 / 7, 1e-7,    6.02214076e23, -2.5e-5,     std::numeric_limits<double>::max()};
  for (double v : values) {
    const std::string s = attrStr(v);
    SCOPED_TRACE(s);
    EXPECT_NE(s.find_first_of(".eE"), std::string::npos) << "must not read as an int";
    char* end = nullptr;
    const double back = std::strtod(s.c_str(), &end);
    EXPECT_EQ(*end, '\0') << "the whole text is the number";
    EXPECT_EQ(std::memcmp(&back, &v, sizeof v), 0) << "read back as " << back << ", not " << v;
  }
  // 1e-05 (a layer norm eps) is spelled as in DESIGN.md §4: a mantissa with
  // a '.', then the exponent; not 0.00001, not 17 significant digits.
  EXPECT_EQ(attrStr(1e-05), "1.0e-05");
  EXPECT_EQ(attrStr(2.5e+20), "2.5e+20");
}

TEST(AttrStr, NonFiniteFloats) {
  EXPECT_EQ(attrStr(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(attrStr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(attrStr(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(AttrStr, StringsAreQuotedAndEscaped) {
  EXPECT_EQ(attrStr(std::string("abc")), "\"abc\"");
  EXPECT_EQ(attrStr(std::string("")), "\"\"");
  EXPECT_EQ(attrStr(std::string("a\"b")), "\"a\\\"b\"");
  EXPECT_EQ(attrStr(std::string("back\\slash")), "\"back\\\\slash\"");
  EXPECT_EQ(attrStr(std::string("\\\"")), "\"\\\\\\\"\"");
  EXPECT_EQ(attrStr(std::string("with space, comma = ok")), "\"with space, comma = ok\"");
}

TEST(AttrStr, IntListsAndDTypes) {
  EXPECT_EQ(attrStr(std::vector<int64_t>{1, 2}), "[1, 2]");
  EXPECT_EQ(attrStr(std::vector<int64_t>{-1}), "[-1]");
  EXPECT_EQ(attrStr(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(attrStr(DType::f32), "f32");
  EXPECT_EQ(attrStr(DType::bf16), "bf16");
  EXPECT_EQ(attrStr(DType::boolean), "bool");
}

TEST(FloatAttr, ReadsFloatsAndInts) {
  const Attributes attrs = {{"p", 0.25}, {"axis", int64_t{-1}}};
  EXPECT_EQ(floatAttr(attrs, "p", "dropout"), 0.25);
  EXPECT_EQ(floatAttr(attrs, "axis", "dropout"), -1.0);
}

TEST(FloatAttr, MissingOrWrongKindNamesTheOp) {
  const Attributes attrs = {{"name", std::string("x")}, {"dims", std::vector<int64_t>{1, 2}}, {"to", DType::f16}};
  try {
    floatAttr(attrs, "value", "constant");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "constant: missing attribute 'value'");
  }
  try {
    floatAttr(attrs, "name", "constant");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "constant: attribute 'name' must be a float, got \"x\"");
  }
  EXPECT_THROW(floatAttr(attrs, "dims", "constant"), Error);
  EXPECT_THROW(floatAttr(attrs, "to", "constant"), Error);
}

}  // namespace
}  // namespace kiln::ir

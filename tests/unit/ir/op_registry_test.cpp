// Unit tests for the op registry: the table generated from ir/Ops.def (read
// here at test time, so that the count and the names are checked against the
// file itself), op name lookup both ways, and inferType: broadcast result
// types, and the errors for wrong arity, dtypes, devices and shapes, which
// name the op and every input type in lower case with no final period.
#include "ir/op_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "common/source_dir.h"
#include "runtime/error.h"

namespace kiln::ir {
namespace {

// One op of ir/Ops.def as the file spells it.
struct DefLine {
  std::string id, name, kind;
  int arity;
  std::string dtypes;
  int cost;
  std::vector<std::string> traits;
};

std::vector<DefLine> readOpsDef() {
  const auto path = testutil::sourceDir() / "ir" / "Ops.def";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  const std::regex op(
      R"(^KILN_OP\((\w+),\s*\"([^\"]*)\",\s*(\w+),\s*(-?\d+),\s*(\w+),\s*(\d+),\s*(\w+(?:\s*\|\s*\w+)*)\)\s*$)");
  std::vector<DefLine> out;
  std::string line;
  int opLines = 0;
  while (std::getline(in, line)) {
    if (line.rfind("KILN_OP(", 0) != 0) continue;
    ++opLines;
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, op)) << "unexpected line in Ops.def: " << line;
    if (m.empty()) continue;
    std::vector<std::string> traits;
    const std::string list = m[7];
    const std::regex word(R"(\w+)");
    for (std::sregex_iterator t(list.begin(), list.end(), word), end; t != end; ++t) traits.push_back(t->str());
    out.push_back({m[1], m[2], m[3], std::stoi(m[4]), m[5], std::stoi(m[6]), traits});
  }
  EXPECT_EQ(static_cast<int>(out.size()), opLines);
  return out;
}

const std::map<std::string, DTypeClass> kDTypeClasses = {
    {"any", DTypeClass::any}, {"numbers", DTypeClass::numbers}, {"floats", DTypeClass::floats}};

const std::map<std::string, OpTrait> kTraits = {
    {"none", OpTrait::none},
    {"differentiable", OpTrait::differentiable},
    {"commutative", OpTrait::commutative},
    {"comparison", OpTrait::comparison},
    {"elementIndex", OpTrait::elementIndex},
    {"checksData", OpTrait::checksData},
    {"view", OpTrait::view},
    {"exactOperands", OpTrait::exactOperands},
    {"barrier", OpTrait::barrier},
};

const std::map<std::string, OpKind> kKinds = {
    {"elementwise", OpKind::elementwise}, {"reduction", OpKind::reduction}, {"movement", OpKind::movement},
    {"library", OpKind::library},         {"collective", OpKind::collective}, {"control", OpKind::control},     {"constant", OpKind::constant},
};

TEST(OpTable, MatchesOpsDef) {
  const std::vector<DefLine> lines = readOpsDef();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(kNumOps, static_cast<int>(lines.size())) << "kNumOps vs the KILN_OP lines of ir/Ops.def";
  ASSERT_EQ(allOps().size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i].name);
    const OpInfo& info = allOps()[i];
    EXPECT_EQ(info.op, static_cast<Op>(i)) << "enum order is Ops.def order";
    EXPECT_EQ(info.name, lines[i].name);
    EXPECT_EQ(info.arity, lines[i].arity);
    ASSERT_TRUE(kKinds.count(lines[i].kind)) << lines[i].kind;
    EXPECT_EQ(info.kind, kKinds.at(lines[i].kind));
    ASSERT_TRUE(kDTypeClasses.count(lines[i].dtypes)) << lines[i].dtypes;
    EXPECT_EQ(info.dtypes, kDTypeClasses.at(lines[i].dtypes));
    EXPECT_EQ(dtypeClass(info.op), info.dtypes);
    EXPECT_EQ(recomputeCost(info.op), lines[i].cost);
    // Each trait named on the line is set, and no other.
    uint16_t named = 0;
    for (const std::string& t : lines[i].traits) {
      ASSERT_TRUE(kTraits.count(t)) << "unknown trait " << t;
      named |= static_cast<uint16_t>(kTraits.at(t));
      EXPECT_TRUE(t == "none" || hasTrait(info.op, kTraits.at(t))) << t;
    }
    EXPECT_EQ(static_cast<uint16_t>(info.traits), named);
    EXPECT_EQ(&opInfo(info.op), &info);
  }
}

TEST(OpTable, EveryNameParsesBackAndNamesAreUnique) {
  std::set<std::string_view> names;
  for (const OpInfo& info : allOps()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate op name " << info.name;
    auto parsed = parseOp(opName(info.op));
    ASSERT_TRUE(parsed.has_value()) << info.name;
    EXPECT_EQ(*parsed, info.op);
    // Text names are lower-case identifiers: what the IR parser reads.
    EXPECT_TRUE(std::regex_match(std::string(info.name), std::regex("[a-z][a-z0-9_]*"))) << info.name;
  }
  for (const char* bad : {"", "Add", "add ", "nope", "%add"}) EXPECT_FALSE(parseOp(bad).has_value()) << bad;
}

TEST(OpTable, AritiesOfKnownOps) {
  // From what the ops mean, not from the table.
  EXPECT_EQ(opInfo(Op::constant).arity, 0);
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::maximum, Op::minimum})
    EXPECT_EQ(opInfo(op).arity, 2) << opName(op);
  for (Op op : {Op::neg, Op::relu, Op::exp, Op::log, Op::sqrt, Op::tanh, Op::sigmoid})
    EXPECT_EQ(opInfo(op).arity, 1) << opName(op);
  EXPECT_EQ(opInfo(Op::fusion).arity, -1);
  EXPECT_EQ(opInfo(Op::fusion).kind, OpKind::control);
  EXPECT_EQ(opInfo(Op::relu).kind, OpKind::elementwise);
}

// Builders of types for the tests below.
TensorType f32(Shape shape, Device device = Device::cpu()) { return {DType::f32, std::move(shape), device}; }

std::string inferError(Op op, std::vector<TensorType> inputs) {
  try {
    inferType(op, inputs, {});
  } catch (const Error& e) {
    const std::string msg = e.what();
    // DESIGN.md §10: lower-case, no final period.
    EXPECT_FALSE(msg.empty());
    if (!msg.empty()) {
      EXPECT_TRUE(std::islower(static_cast<unsigned char>(msg[0]))) << msg;
      EXPECT_NE(msg.back(), '.') << msg;
    }
    return msg;
  }
  ADD_FAILURE() << opName(op) << " accepted its inputs";
  return "";
}

TEST(InferType, ElementwiseBroadcasts) {
  EXPECT_EQ(inferType(Op::add, std::vector{f32({2, 3}), f32({3})}, {}), f32({2, 3}));
  EXPECT_EQ(inferType(Op::mul, std::vector{f32({2, 1}), f32({1, 3})}, {}), f32({2, 3}));
  EXPECT_EQ(inferType(Op::maximum, std::vector{f32({}), f32({4, 5})}, {}), f32({4, 5}));
  EXPECT_EQ(inferType(Op::div, std::vector{f32({0, 3}), f32({1})}, {}), f32({0, 3}));
  EXPECT_EQ(inferType(Op::relu, std::vector{f32({7})}, {}), f32({7}));
  EXPECT_EQ(inferType(Op::exp, std::vector{f32({}, Device::cuda(1))}, {}), f32({}, Device::cuda(1)))
      << "the result lives where the inputs live";
}

TEST(InferType, ShapesThatDoNotBroadcast) {
  EXPECT_EQ(inferError(Op::add, {f32({2, 3}), f32({4})}),
            "add: shapes do not broadcast, got f32[2,3]@cpu and f32[4]@cpu");
  EXPECT_EQ(inferError(Op::minimum, {f32({5}), f32({2, 3})}),
            "minimum: shapes do not broadcast, got f32[5]@cpu and f32[2,3]@cpu");
}

TEST(InferType, DTypesMustMatch) {
  EXPECT_EQ(inferError(Op::mul, {f32({2}), {DType::f64, {2}, Device::cpu()}}),
            "mul: expected all tensors of the same dtype, got f32[2]@cpu and f64[2]@cpu");
}

TEST(InferType, DevicesMustMatch) {
  // The example of DESIGN.md §10.
  EXPECT_EQ(inferError(Op::add, {f32({2, 3}, Device::cuda(0)), f32({3})}),
            "add: expected all tensors on the same device, got f32[2,3]@cuda:0 and f32[3]@cpu");
  EXPECT_EQ(inferError(Op::sub, {f32({3}, Device::cuda(0)), f32({3}, Device::cuda(1))}),
            "sub: expected all tensors on the same device, got f32[3]@cuda:0 and f32[3]@cuda:1");
}

TEST(InferType, FloatOnlyAndNumberOnlyOpsNameTheirDTypes) {
  // More dtype rules in dtype_rules_test.cpp.
  EXPECT_EQ(inferError(Op::exp, {{DType::i32, {2}, Device::cpu()}}),
            "exp: expected a floating-point dtype (f32, f64, f16, bf16), got i32[2]@cpu");
  EXPECT_EQ(inferError(Op::add, {{DType::boolean, {2}, Device::cpu()}, {DType::boolean, {2}, Device::cpu()}}),
            "add: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[2]@cpu and bool[2]@cpu");
  EXPECT_EQ(inferType(Op::exp, std::vector<TensorType>{{DType::f64, {2}, Device::cpu()}}, {}).dtype, DType::f64);
}

TEST(InferType, Arity) {
  std::string msg = inferError(Op::add, {f32({2})});
  EXPECT_EQ(msg.rfind("add: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("expected 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got 1"), std::string::npos) << msg;
  msg = inferError(Op::relu, {f32({2}), f32({2})});
  EXPECT_EQ(msg.rfind("relu: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("got 2"), std::string::npos) << msg;
  msg = inferError(Op::neg, {});
  EXPECT_EQ(msg.rfind("neg: ", 0), 0u) << msg;
}

TEST(InferType, FailedChecksLeaveNoStateBehind) {
  // Same call after an error gives the same answer (nothing cached or mutated).
  inferError(Op::add, {f32({2, 3}), f32({4})});
  EXPECT_EQ(inferType(Op::add, std::vector{f32({2, 3}), f32({3})}, {}), f32({2, 3}));
}

TEST(InferType, ConstantAndFusionHaveNoRuleAndSayItIsABug) {
  EXPECT_THROW(inferType(Op::constant, {}, {{"value", 1.0}}), InternalError);
  EXPECT_THROW(inferType(Op::fusion, std::vector{f32({2})}, {}), InternalError);
}

}  // namespace
}  // namespace kiln::ir

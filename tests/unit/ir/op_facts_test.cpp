// The facts of ir/Ops.def checked against what the ops do, so that a wrong
// column fails here: commutativity by evaluating each binary formula with
// its operands swapped on sample values; the bool result of comparisons,
// the float-only ops and the recompute cost by instantiating each scalar
// formula with a builder that records its result dtype and counts the
// operations it emits; views by asking ir::movedLayout; the element index by
// evaluating draws at several indices; and the dtype classes by the
// registry's rules, which read them.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/layout.h"
#include "ir/op_registry.h"
#include "ir/scalar_eval.h"
#include "ir/scalar_formulas.h"
#include "runtime/error.h"

namespace kiln::ir {
namespace {

const DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::boolean};

/// A formula builder that computes nothing: each value only knows its dtype,
/// every operation the formula emits is counted (constants are not), and
/// the float-only operations (div, sqrt, rint, pow2, mantissa, exponent)
/// are noted when they are asked of an integer.
struct CountingBuilder {
  struct V {
    DType dtype = DType::f32;
  };
  using M = bool;
  DType dtype = DType::f32;
  int ops = 0;
  bool floatOpOnInteger = false;

  V one(V a) {
    ++ops;
    return a;
  }
  V floatOnly(V a) {
    floatOpOnInteger = floatOpOnInteger || !isFloatingPoint(a.dtype);
    return one(a);
  }
  M test() {
    ++ops;
    return false;
  }
  V c(double) { return {dtype}; }
  V constant(double, DType t) { return {t}; }
  V intConstant(int64_t, DType t) { return {t}; }
  V add(V a, V) { return one(a); }
  V sub(V a, V) { return one(a); }
  V mul(V a, V) { return one(a); }
  V neg(V a) { return one(a); }
  V div(V a, V) { return floatOnly(a); }
  V sqrt(V a) { return floatOnly(a); }
  V rint(V a) { return floatOnly(a); }
  M lt(V, V) { return test(); }
  M gt(V, V) { return test(); }
  M le(V, V) { return test(); }
  M ge(V, V) { return test(); }
  M eq(V, V) { return test(); }
  M ne(V, V) { return test(); }
  M isNan(V) { return test(); }
  M orM(M, M) { return test(); }
  M andM(M, M) { return test(); }
  M notM(M) { return test(); }
  V select(M, V a, V) { return one(a); }
  V pow2(V n) { return floatOnly(n); }
  V mantissa(V x) { return floatOnly(x); }
  V exponent(V x) { return floatOnly(x); }
  V bitcast(V, DType t) { return one(V{t}); }
  V band(V a, V) { return one(a); }
  V bor(V a, V) { return one(a); }
  V bxor(V a, V) { return one(a); }
  V shl(V a, int) { return one(a); }
  V lshr(V a, int) { return one(a); }
  V convert(V x, DType t) { return x.dtype == t ? x : one(V{t}); }
  V fromM(M) { return one(V{DType::boolean}); }
  M toM(V) { return false; }
};

/// What an elementwise op's formula does on data operands of `dtype`
/// (where: a bool condition first; a draw: its seed, offset and index).
struct Traced {
  DType result;
  int ops;
  bool floatOpOnInteger;
};

/// The attributes an op needs to be evaluated (the defaults otherwise).
Attributes sampleAttrs(Op op) {
  if (op == Op::cast) return {{"dtype", DType::f64}};
  if (op == Op::dropout) return {{"p", 0.5}};
  if (op == Op::rand || op == Op::randn) return {{"dtype", DType::f32}, {"shape", std::vector<int64_t>{}}};
  return {};
}

Traced trace(Op op, DType dtype, const Attributes& attrs) {
  const OpInfo& info = opInfo(op);
  std::vector<DType> types;
  for (int i = 0; i < info.arity; ++i) types.push_back(dtype);
  if (op == Op::where) types[0] = DType::boolean;
  if (usesElementIndex(op)) {
    types.resize(types.size() - 2);
    types.insert(types.end(), {DType::i64, DType::i64, DType::i64});  // seed, offset, index
  }
  CountingBuilder b;
  std::vector<CountingBuilder::V> values;
  for (DType t : types) values.push_back({formulas::computeDType(t)});
  b.dtype = formulas::computeDType(types.empty() ? dtype : types[op == Op::where ? 1 : 0]);
  const CountingBuilder::V r =
      formulas::detail::emitOp(b, op, dtype, std::span<const CountingBuilder::V>(values), attrs);
  return {r.dtype, b.ops, b.floatOpOnInteger};
}

/// Every elementwise op with its attribute variants (gelu's two formulas).
std::vector<std::pair<Op, Attributes>> elementwiseCases() {
  std::vector<std::pair<Op, Attributes>> cases;
  for (const OpInfo& info : allOps()) {
    if (info.kind != OpKind::elementwise) continue;
    cases.push_back({info.op, sampleAttrs(info.op)});
    if (info.op == Op::gelu) cases.push_back({info.op, {{"approximate", int64_t{1}}}});
  }
  return cases;
}

TEST(OpFacts, ComparisonsAreTheOpsWhoseFormulaGivesBool) {
  for (const auto& [op, attrs] : elementwiseCases()) {
    if (op == Op::cast) continue;  // its result is its attribute's dtype
    const Traced t = trace(op, DType::f32, attrs);
    EXPECT_EQ(isComparison(op), t.result == DType::boolean) << opName(op);
  }
}

TEST(OpFacts, OpsWhoseFormulaNeedsFloatsTakeFloatsOnly) {
  // A formula that divides, takes a square root or rounds (the builder's
  // float-only operations) on i32 operands can only mean floats.
  for (const auto& [op, attrs] : elementwiseCases()) {
    if (op == Op::cast) continue;
    const Traced t = trace(op, DType::i32, attrs);
    if (t.floatOpOnInteger) {
      EXPECT_EQ(dtypeClass(op), DTypeClass::floats) << opName(op);
    }
  }
  // Those that take any dtype compute on bool without arithmetic.
  for (const auto& [op, attrs] : elementwiseCases()) {
    if (dtypeClass(op) != DTypeClass::any || op == Op::cast) continue;
    const Traced t = trace(op, DType::boolean, attrs);
    EXPECT_FALSE(t.floatOpOnInteger) << opName(op);
  }
}

TEST(OpFacts, RecomputeCostFollowsTheFormulasSize) {
  // Cost 8 and more (a polynomial, a Philox draw) is what the kernels'
  // stash threshold (6, codegen/kernel.cpp) keeps rather than recomputes:
  // formulas of 20 operations or more. Cheap ops (cost 1 or 2) are a few.
  for (const auto& [op, attrs] : elementwiseCases()) {
    const Traced t = trace(op, DType::f32, attrs);
    SCOPED_TRACE(std::string(opName(op)) + ": " + std::to_string(t.ops) + " operations");
    EXPECT_GE(recomputeCost(op), 1);
    EXPECT_EQ(recomputeCost(op) >= 8, t.ops >= 20);
    if (recomputeCost(op) <= 2) {
      EXPECT_LE(t.ops, 6);
    }
  }
}

/// Whether two results are the same value: the same bits, any NaN equal to
/// any NaN (IEEE leaves open which NaN operand comes out).
bool same(const ScalarValue& a, const ScalarValue& b) {
  if (a.dtype != b.dtype) return false;
  if (!isFloatingPoint(a.dtype)) return a.i == b.i;
  if (std::isnan(a.f) || std::isnan(b.f)) return std::isnan(a.f) && std::isnan(b.f);
  return std::bit_cast<uint64_t>(a.f) == std::bit_cast<uint64_t>(b.f);
}

std::vector<double> samples(DType dtype) {
  if (dtype == DType::boolean) return {0, 1};
  if (!isFloatingPoint(dtype)) return {0, 1, -1, 2, 3, -7, 100, 2147483647, -2147483648.0};
  const double inf = std::numeric_limits<double>::infinity();
  return {0.0, -0.0, 1, -1, 2.5, -3.75, 0.1, 1e-40, 3e38, inf, -inf, std::nan("")};
}

TEST(OpFacts, CommutativeOpsGiveTheSameResultWithOperandsSwapped) {
  int binary = 0;
  for (const OpInfo& info : allOps()) {
    if (info.kind != OpKind::elementwise || info.arity != 2 || usesElementIndex(info.op)) continue;
    ++binary;
    bool symmetric = true;
    int evaluated = 0;
    for (DType d : kDTypes) {
      std::vector<TensorType> types(2, TensorType{d, {}, Device::cpu()});
      try {
        inferType(info.op, types, {});
      } catch (const Error&) {
        continue;  // not an op of this dtype
      }
      for (double a : samples(d))
        for (double b : samples(d)) {
          const ScalarValue x = ScalarValue::of(d, a), y = ScalarValue::of(d, b);
          const ScalarValue xy = evalScalar(info.op, std::vector<ScalarValue>{x, y});
          const ScalarValue yx = evalScalar(info.op, std::vector<ScalarValue>{y, x});
          symmetric = symmetric && same(xy, yx);
          ++evaluated;
        }
    }
    EXPECT_GT(evaluated, 100) << info.name;
    EXPECT_EQ(isCommutative(info.op), symmetric) << info.name;
  }
  EXPECT_GE(binary, 13);
}

TEST(OpFacts, TheRulesTakeTheDTypesOfEachClass) {
  for (const OpInfo& info : allOps()) {
    if (info.kind != OpKind::elementwise || usesElementIndex(info.op) || info.op == Op::cast || info.op == Op::where)
      continue;
    for (DType d : kDTypes) {
      std::vector<TensorType> types(static_cast<size_t>(info.arity), TensorType{d, {2}, Device::cpu()});
      bool accepted = true;
      try {
        inferType(info.op, types, {});
      } catch (const Error&) {
        accepted = false;
      }
      const bool expected = info.dtypes == DTypeClass::any       ? true
                            : info.dtypes == DTypeClass::numbers ? d != DType::boolean
                                                                 : isFloatingPoint(d);
      EXPECT_EQ(accepted, expected) << info.name << " on " << dtypeName(d);
    }
  }
  // The reductions and library calls of a class refuse what it excludes.
  const TensorType i32{DType::i32, {4}, Device::cpu()}, b8{DType::boolean, {4}, Device::cpu()};
  EXPECT_THROW(inferType(Op::mean, std::vector{i32}, {{"dims", std::vector<int64_t>{}}}), Error);
  EXPECT_THROW(inferType(Op::var, std::vector{i32}, {{"dims", std::vector<int64_t>{}}}), Error);
  EXPECT_THROW(inferType(Op::argmax, std::vector{b8}, {{"dim", int64_t{0}}}), Error);
  EXPECT_NO_THROW(inferType(Op::sum, std::vector{b8}, {{"dims", std::vector<int64_t>{}}}));
  const TensorType m{DType::boolean, {2, 2}, Device::cpu()};
  EXPECT_THROW(inferType(Op::matmul, std::vector{m, m}, {}), Error);
}

TEST(OpFacts, ViewOpsAreTheMovementOpsWithALayoutRule) {
  const Shape shape{2, 3};
  const Layout in = contiguousLayout(shape);
  const std::vector<std::pair<Op, Attributes>> movement = {
      {Op::reshape, {{"shape", std::vector<int64_t>{3, 2}}}},
      {Op::transpose, {{"perm", std::vector<int64_t>{1, 0}}}},
      {Op::slice, {{"dim", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{3}}, {"step", int64_t{1}}}},
      {Op::expand, {{"shape", std::vector<int64_t>{4, 2, 3}}}},
      {Op::cat, {{"dim", int64_t{0}}}},
  };
  int listed = 0;
  for (const OpInfo& info : allOps()) listed += info.kind == OpKind::movement ? 1 : 0;
  EXPECT_EQ(listed, static_cast<int>(movement.size())) << "a movement op is missing here";
  for (const auto& [op, attrs] : movement) {
    bool hasRule = true;
    try {
      movedLayout(op, attrs, shape, in);
    } catch (const InternalError&) {
      hasRule = false;
    }
    EXPECT_EQ(isViewOp(op), hasRule) << opName(op);
  }
  for (const OpInfo& info : allOps())
    if (info.kind != OpKind::movement) {
      EXPECT_FALSE(isViewOp(info.op)) << info.name;
    }
}

TEST(OpFacts, DrawsDependOnTheElementIndex) {
  int draws = 0;
  for (const OpInfo& info : allOps()) {
    if (!usesElementIndex(info.op)) continue;
    ++draws;
    EXPECT_EQ(info.kind, OpKind::elementwise) << info.name;
    std::vector<ScalarValue> in;
    for (int i = 0; i + 2 < info.arity; ++i) in.push_back(ScalarValue::of(DType::f32, 1.0));
    for (int64_t v : {int64_t{42}, int64_t{7}}) in.push_back(ScalarValue::ofInt(DType::i64, v));  // seed, offset
    std::vector<double> seen;
    for (int64_t index = 0; index < 64; ++index) {
      std::vector<ScalarValue> args = in;
      args.push_back(ScalarValue::ofInt(DType::i64, index));
      seen.push_back(evalScalar(info.op, args, sampleAttrs(info.op)).toDouble());
    }
    EXPECT_NE(*std::min_element(seen.begin(), seen.end()), *std::max_element(seen.begin(), seen.end())) << info.name;
  }
  EXPECT_GE(draws, 1);
}

TEST(OpFacts, OnlyLibraryCallsCheckTheirData) {
  for (const OpInfo& info : allOps())
    if (checksData(info.op)) {
      EXPECT_EQ(info.kind, OpKind::library) << info.name;
    }
  EXPECT_TRUE(checksData(Op::index_select));
  EXPECT_FALSE(checksData(Op::matmul));
}

}  // namespace
}  // namespace kiln::ir

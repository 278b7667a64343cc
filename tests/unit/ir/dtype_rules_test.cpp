// The registry's dtype rules (ir::inferType) for every elementwise op and
// dtype: which dtypes each op takes, what it gives (comparisons bool, cast
// its attribute, where its values'), and the exact errors otherwise.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error_of.h"
#include "ir/op_registry.h"

namespace kiln::ir {
namespace {

constexpr DType kAll[] = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::i64, DType::boolean};

TensorType t(DType d, Shape shape = {2}) { return {d, std::move(shape), Device::cpu()}; }

DType infer(Op op, std::vector<TensorType> in, const Attributes& attrs = {}) { return inferType(op, in, attrs).dtype; }

TEST(DTypeRules, EveryOpOnEveryDType) {
  for (DType d : kAll) {
    const bool isBool = d == DType::boolean, isFloat = isFloatingPoint(d);
    for (Op op : {Op::add, Op::sub, Op::mul}) {
      if (isBool) {
        EXPECT_THROW(infer(op, {t(d), t(d)}), Error) << opName(op);
      } else {
        EXPECT_EQ(infer(op, {t(d), t(d)}), d) << opName(op);
      }
    }
    for (Op op : {Op::maximum, Op::minimum}) EXPECT_EQ(infer(op, {t(d), t(d)}), d);
    for (Op op : {Op::neg, Op::relu}) {
      if (isBool) {
        EXPECT_THROW(infer(op, {t(d)}), Error) << opName(op);
      } else {
        EXPECT_EQ(infer(op, {t(d)}), d) << opName(op);
      }
    }
    for (Op op : {Op::exp, Op::log, Op::sqrt, Op::tanh, Op::sigmoid}) {
      if (isFloat) {
        EXPECT_EQ(infer(op, {t(d)}), d) << opName(op);
      } else {
        EXPECT_THROW(infer(op, {t(d)}), Error) << opName(op);
      }
    }
    if (isFloat) {
      EXPECT_EQ(infer(Op::div, {t(d), t(d)}), d);
    } else {
      EXPECT_THROW(infer(Op::div, {t(d), t(d)}), Error) << "integer division does not exist in the IR";
    }
    for (Op op : {Op::eq, Op::ne, Op::lt, Op::le, Op::gt, Op::ge})
      EXPECT_EQ(infer(op, {t(d), t(d)}), DType::boolean) << opName(op) << " of " << dtypeName(d);
    EXPECT_EQ(infer(Op::where, {t(DType::boolean), t(d), t(d)}), d);
    for (DType to : kAll) EXPECT_EQ(infer(Op::cast, {t(d)}, {{"dtype", to}}), to);
  }
}

TEST(DTypeRules, ErrorsNameTheOpAndEveryType) {
  EXPECT_EQ(errorOf([] { infer(Op::log, {t(DType::i64, {3})}); }),
            "log: expected a floating-point dtype (f32, f64, f16, bf16), got i64[3]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::div, {t(DType::i32), t(DType::i32)});
            }),
            "div: expected a floating-point dtype (f32, f64, f16, bf16), got i32[2]@cpu and i32[2]@cpu");
  EXPECT_EQ(errorOf([] { infer(Op::relu, {t(DType::boolean)}); }),
            "relu: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[2]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::lt, {t(DType::f16), t(DType::f32)});
            }),
            "lt: expected all tensors of the same dtype, got f16[2]@cpu and f32[2]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::where, {t(DType::f32), t(DType::f32), t(DType::f32)});
            }),
            "where: expected a bool condition, got f32[2]@cpu, f32[2]@cpu and f32[2]@cpu");
  EXPECT_EQ(errorOf([] {
              infer(Op::where, {t(DType::boolean), t(DType::i32), t(DType::i64)});
            }),
            "where: expected both values of the same dtype, got bool[2]@cpu, i32[2]@cpu and i64[2]@cpu");
  EXPECT_EQ(errorOf([] { infer(Op::cast, {t(DType::f32)}); }), "cast: missing attribute 'dtype'");
  EXPECT_EQ(errorOf([] {
              infer(Op::cast, {t(DType::f32)}, {{"dtype", int64_t{3}}});
            }),
            "cast: attribute 'dtype' must be a dtype, got 3");
}

TEST(DTypeRules, WhereBroadcastsAllThree) {
  const TensorType r =
      inferType(Op::where, std::vector{t(DType::boolean, {4, 1}), t(DType::i64, {3}), t(DType::i64, {})}, {});
  EXPECT_EQ(r, t(DType::i64, {4, 3}));
  EXPECT_EQ(errorOf([] {
              infer(Op::where, {t(DType::boolean, {2}), t(DType::f32, {3}), t(DType::f32, {})});
            }),
            "where: shapes do not broadcast, got bool[2]@cpu, f32[3]@cpu and f32[]@cpu");
}

}  // namespace
}  // namespace kiln::ir

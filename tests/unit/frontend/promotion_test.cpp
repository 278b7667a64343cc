// Type promotion against PyTorch's rules, written out by hand from the
// PyTorch docs ("Type promotion", torch.promote_types and torch.result_type):
// every pair of dtypes, dimensioned tensors against 0-d tensors and scalars,
// float-only ops, and what the frontend's ops return.
#include "frontend/promotion.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace {

using namespace kiln;
using detail::Participant;
using detail::promoteTypes;
using detail::PromotionOperand;
using detail::resultType;

constexpr DType f32 = DType::f32, f16 = DType::f16, bf16 = DType::bf16, f64 = DType::f64, i32 = DType::i32,
                i64 = DType::i64, b8 = DType::boolean;
constexpr DType kOrder[] = {f32, f16, bf16, f64, i32, i64, b8};

// torch.promote_types(row, column), columns in kOrder.
const std::map<DType, std::vector<DType>> kTable = {
    {f32, {f32, f32, f32, f64, f32, f32, f32}},      {f16, {f32, f16, f32, f64, f16, f16, f16}},
    {bf16, {f32, f32, bf16, f64, bf16, bf16, bf16}}, {f64, {f64, f64, f64, f64, f64, f64, f64}},
    {i32, {f32, f16, bf16, f64, i32, i64, i32}},     {i64, {f32, f16, bf16, f64, i64, i64, i64}},
    {b8, {f32, f16, bf16, f64, i32, i64, b8}},
};

TEST(Promotion, EveryPairOfDTypes) {
  for (DType a : kOrder)
    for (size_t j = 0; j < 7; ++j) {
      const DType b = kOrder[j], want = kTable.at(a)[j];
      EXPECT_EQ(promoteTypes(a, b), want) << dtypeName(a) << ", " << dtypeName(b);
      // Two dimensioned tensors, and two 0-d tensors, promote the same way.
      const PromotionOperand dims[] = {{a, Participant::dimensioned}, {b, Participant::dimensioned}};
      EXPECT_EQ(resultType(dims), want);
      const PromotionOperand zeros[] = {{a, Participant::zeroDim}, {b, Participant::zeroDim}};
      EXPECT_EQ(resultType(zeros), want);
    }
}

DType with(DType tensor, Participant p, DType other, Participant q) {
  const PromotionOperand ops[] = {{tensor, p}, {other, q}};
  return resultType(ops);
}
constexpr Participant D = Participant::dimensioned, Z = Participant::zeroDim, S = Participant::scalar;
// Scalars take part as f32 (a float), i64 (an int) or bool.

TEST(Promotion, ScalarsDoNotPromoteATensorOfTheirCategory) {
  EXPECT_EQ(with(f16, D, f32, S), f16);  // f16 tensor * 2.0
  EXPECT_EQ(with(bf16, D, f32, S), bf16);
  EXPECT_EQ(with(f64, D, f32, S), f64);
  EXPECT_EQ(with(i32, D, f32, S), f32);  // i32 tensor * 2.5: the default float dtype
  EXPECT_EQ(with(i64, D, i64, S), i64);  // i64 tensor + 2
  EXPECT_EQ(with(i32, D, i64, S), i32);  // i32 tensor + 2
  EXPECT_EQ(with(b8, D, i64, S), i64);   // bool tensor + 2
  EXPECT_EQ(with(b8, D, f32, S), f32);
  EXPECT_EQ(with(b8, D, b8, S), b8);
  EXPECT_EQ(with(f16, D, b8, S), f16);
  EXPECT_EQ(with(i32, D, b8, S), i32);
}

TEST(Promotion, ZeroDimTensorsPromoteOnlyAcrossCategories) {
  EXPECT_EQ(with(f32, D, f64, Z), f32);
  EXPECT_EQ(with(f16, D, f32, Z), f16);
  EXPECT_EQ(with(bf16, D, f16, Z), bf16);
  EXPECT_EQ(with(i32, D, i64, Z), i32);
  EXPECT_EQ(with(i32, D, f64, Z), f64);  // a higher category: the two promote
  EXPECT_EQ(with(i64, D, f16, Z), f16);
  EXPECT_EQ(with(b8, D, i32, Z), i32);
  // Without a dimensioned tensor, 0-d tensors decide over scalars.
  EXPECT_EQ(with(f64, Z, f32, S), f64);
  EXPECT_EQ(with(i32, Z, i64, S), i32);
  EXPECT_EQ(with(i64, Z, f32, S), f32);
  EXPECT_EQ(with(f16, Z, f32, S), f16);
  // Three groups: f16[n], i64[] and 2.5 stay f16; i32[n], i64[] and 2.5 are f32.
  const PromotionOperand a[] = {{f16, D}, {i64, Z}, {f32, S}};
  EXPECT_EQ(resultType(a), f16);
  const PromotionOperand b[] = {{i32, D}, {i64, Z}, {f32, S}};
  EXPECT_EQ(resultType(b), f32);
}

TEST(Promotion, FrontendOpsReturnThePromotedDType) {
  Tensor h = ones({2}, f16), i = ones({2}, i32), l = ones({2}, i64), b = ones({2}, b8), f = ones({2});
  EXPECT_EQ((h * 2.0).dtype(), f16);
  EXPECT_EQ((i * 2.5).dtype(), f32);
  EXPECT_EQ((l + 2).dtype(), i64);
  EXPECT_EQ((i + 2).dtype(), i32);
  EXPECT_EQ((b + 2).dtype(), i64);
  EXPECT_EQ((h + f).dtype(), f32);
  EXPECT_EQ((h + ones({2}, bf16)).dtype(), f32);
  EXPECT_EQ((i + l).dtype(), i64);
  EXPECT_EQ((f + full({}, 1.0, f64)).dtype(), f32);
  EXPECT_EQ((i + full({}, 1.0, f64)).dtype(), f64);
  EXPECT_EQ(maximum(b, true).dtype(), b8);
  EXPECT_EQ((i < 2.5).dtype(), b8);
  EXPECT_EQ(where(b, i, 2.5).dtype(), f32);
  EXPECT_EQ(where(b, h, l).dtype(), f16);
  EXPECT_EQ(clamp(i, 0.5, 2).dtype(), f32);
  EXPECT_EQ(clamp(h, full({}, 0.0, f64), 1).dtype(), f16);
}

TEST(Promotion, FloatOnlyOpsTakeF32ForIntegersAndBool) {
  Tensor i = ones({2}, i32), l = ones({2}, i64), b = ones({2}, b8);
  EXPECT_EQ((i / i).dtype(), f32);  // true division
  EXPECT_EQ((l / 2).dtype(), f32);
  EXPECT_EQ(kiln::exp(l).dtype(), f32);
  EXPECT_EQ(kiln::sqrt(b).dtype(), f32);
  EXPECT_EQ(sigmoid(i).dtype(), f32);
  EXPECT_EQ((ones({2}, f16) / i).dtype(), f16);
  EXPECT_EQ(kiln::log(ones({2}, f64)).dtype(), f64);
  EXPECT_EQ((i / i).toVector(), (std::vector<float>{1, 1}));
  EXPECT_EQ(detail::promotedDType(ir::Op::div, std::vector<Operand>{i, 2}), f32);
  EXPECT_EQ(detail::promotedDType(ir::Op::add, std::vector<Operand>{i, 2}), i32);
}

}  // namespace

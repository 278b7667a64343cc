// The reductions' type rules (ir/reduction_rules.cpp): result shapes with
// and without keepdim, negative and empty dims, dtypes (sum of integers and
// bool is i64; mean and var take floats), reductions without an identity
// over empty dims, attribute checks, and the exact messages of each error.
#include <gtest/gtest.h>

#include "common/error_of.h"
#include "ir/op_registry.h"

namespace {

using namespace kiln;
using ir::Op;

ir::TensorType t(DType d, ir::Shape s) { return {d, std::move(s), Device::cpu()}; }

ir::TensorType infer(Op op, const ir::TensorType& x, ir::Attributes attrs) {
  return ir::inferType(op, std::vector<ir::TensorType>{x}, attrs);
}

ir::Attributes dims(std::vector<int64_t> d, int64_t keepdim = 0) { return {{"dims", d}, {"keepdim", keepdim}}; }

TEST(ReductionRules, Shapes) {
  const auto x = t(DType::f32, {2, 3, 4});
  EXPECT_EQ(infer(Op::sum, x, dims({1})), t(DType::f32, {2, 4}));
  EXPECT_EQ(infer(Op::sum, x, dims({-1}, 1)), t(DType::f32, {2, 3, 1}));
  EXPECT_EQ(infer(Op::amax, x, dims({2, 0})), t(DType::f32, {3}));
  EXPECT_EQ(infer(Op::amin, x, dims({})), t(DType::f32, {}));
  EXPECT_EQ(infer(Op::mean, x, dims({}, 1)), t(DType::f32, {1, 1, 1}));
  EXPECT_EQ(infer(Op::sum, x, {{"dims", std::vector<int64_t>{1}}}), t(DType::f32, {2, 4})) << "keepdim defaults to 0";
  EXPECT_EQ(infer(Op::argmax, x, {{"dim", int64_t{-2}}, {"keepdim", int64_t{1}}}), t(DType::i64, {2, 1, 4}));
  EXPECT_EQ(infer(Op::var, x, {{"dims", std::vector<int64_t>{1}}, {"correction", int64_t{0}}}), t(DType::f32, {2, 4}));
  // A 0-d tensor takes dim 0 or -1 and stays 0-d.
  EXPECT_EQ(infer(Op::sum, t(DType::f32, {}), dims({-1}, 1)), t(DType::f32, {}));
  EXPECT_EQ(infer(Op::argmax, t(DType::f32, {}), {{"dim", int64_t{0}}}), t(DType::i64, {}));
  EXPECT_EQ(ir::normalizeDims("sum", std::vector<int64_t>{-1, 0}, x), (std::vector<int>{0, 2}));
}

TEST(ReductionRules, DTypes) {
  for (DType d : {DType::i32, DType::i64, DType::boolean})
    EXPECT_EQ(infer(Op::sum, t(d, {4}), dims({})).dtype, DType::i64);
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    EXPECT_EQ(infer(Op::sum, t(d, {4}), dims({})).dtype, d);
    EXPECT_EQ(infer(Op::mean, t(d, {4}), dims({})).dtype, d);
    EXPECT_EQ(infer(Op::var, t(d, {4}), dims({})).dtype, d);
  }
  for (DType d : {DType::i32, DType::boolean, DType::f16}) EXPECT_EQ(infer(Op::amax, t(d, {4}), dims({})).dtype, d);
  EXPECT_EQ(infer(Op::argmax, t(DType::i32, {4}), {{"dim", int64_t{0}}}).dtype, DType::i64);
}

TEST(ReductionRules, Errors) {
  const auto x = t(DType::f32, {2, 3});
  EXPECT_EQ(errorOf([&] {
              infer(Op::sum, x, dims({0, 2}));
            }),
            "sum: dim 2 of dims [0, 2] is out of range for f32[2,3]@cpu (expected dims in [-2, 1])");
  EXPECT_EQ(errorOf([&] {
              infer(Op::var, x, dims({1, -1}));
            }),
            "var: dim 1 is repeated in dims [1, -1] for f32[2,3]@cpu");
  EXPECT_EQ(errorOf([&] { infer(Op::sum, t(DType::f32, {}), dims({1})); }),
            "sum: dim 1 of dims [1] is out of range for f32[]@cpu (expected dims in [-1, 0])");
  EXPECT_EQ(errorOf([&] {
              infer(Op::argmax, x, {{"dim", int64_t{-3}}});
            }),
            "argmax: dim -3 is out of range for f32[2,3]@cpu (expected a dim in [-2, 1])");
  EXPECT_EQ(errorOf([&] { infer(Op::mean, t(DType::i64, {3}), dims({})); }),
            "mean: expected a floating-point dtype (f32, f64, f16, bf16), got i64[3]@cpu");
  EXPECT_EQ(errorOf([&] {
              infer(Op::argmax, t(DType::boolean, {3}), {{"dim", int64_t{0}}});
            }),
            "argmax: dtype bool is not supported, got bool[3]@cpu");
  EXPECT_EQ(errorOf([&] {
              infer(Op::amin, t(DType::f32, {0, 3}), dims({}));
            }),
            "amin: cannot reduce dim 0 of f32[0,3]@cpu, which has size 0 (amin of no elements is undefined)");
  EXPECT_EQ(infer(Op::sum, t(DType::f32, {0, 3}), dims({0})), t(DType::f32, {3})) << "sum of nothing is 0";
  EXPECT_EQ(infer(Op::amax, t(DType::f32, {0, 3}), dims({1})), t(DType::f32, {0}))
      << "only reduced dims must be non-empty";
  EXPECT_EQ(errorOf([&] { infer(Op::sum, x, {}); }), "sum: missing attribute 'dims'");
  EXPECT_EQ(errorOf([&] { infer(Op::argmax, x, {}); }), "argmax: missing attribute 'dim'");
  EXPECT_EQ(errorOf([&] { infer(Op::sum, x, dims({}, 2)); }), "sum: attribute 'keepdim' must be 0 or 1, got 2");
  EXPECT_EQ(errorOf([&] {
              infer(Op::sum, x, {{"dims", int64_t{1}}});
            }),
            "sum: attribute 'dims' must be an int list, got 1");
  EXPECT_EQ(errorOf([&] {
              infer(Op::var, x, {{"dims", std::vector<int64_t>{}}, {"correction", 1.0}});
            }),
            "var: attribute 'correction' must be an int, got 1.0");
}

}  // namespace

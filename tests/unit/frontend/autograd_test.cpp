// The autograd engine: accumulation, retainGraph, detach, NoGradGuard,
// in-place ops and version counters, and its errors.
#include <gtest/gtest.h>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

Tensor leaf(std::vector<float> values) { return fromVector(values).setRequiresGrad(); }

TEST(Autograd, ChainRuleThroughADiamond) {
  Tensor x = leaf({1, 2, 3}), y = leaf({4, 5, 6});
  Tensor z = sum(x * y + x * x);
  EXPECT_EQ(z.gradFnName(), "SumBackward");
  z.backward();
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{4 + 2, 5 + 4, 6 + 6}));
  EXPECT_EQ(y.grad().toVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(x.isLeaf());
  EXPECT_FALSE(z.isLeaf());
}

TEST(Autograd, GradientsAccumulateUntilReset) {
  Tensor x = leaf({1, 2});
  sum(x * 3.0f).backward();
  sum(x * 3.0f).backward();
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{6, 6}));
  x.setGrad({});
  EXPECT_FALSE(x.grad().defined());
  sum(x).backward();
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{1, 1}));
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({1, 2});
  Tensor y = sum(exp(x));
  y.backward({}, /*retainGraph=*/true);
  y.backward();
  EXPECT_FLOAT_EQ(x.grad().toVector()[0], 2 * std::exp(1.0f));
  EXPECT_EQ(errorOf([&] { y.backward(); }),
            "backward: trying to backward through SumBackward a second time, after its saved tensors were freed; "
            "call backward(gradient, /*retainGraph=*/true) the first time to backward twice");
}

TEST(Autograd, ExplicitGradientForNonScalars) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = x * 2.0f;
  EXPECT_EQ(errorOf([&] { y.backward(); }),
            "backward: a gradient can be implied only for a tensor with one element, got f32[3]@cpu; pass "
            "backward(gradient) with d(loss)/d(this)");
  y.backward(fromVector({1, 10, 100}));
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{2, 20, 200}));
}

TEST(Autograd, BroadcastAndMixedDtypeGradientsTakeTheInputsShapeAndDtype) {
  Tensor b = fromVector(std::vector<double>{1, 2}, {2}).to(DType::f16).setRequiresGrad();
  Tensor x = fromVector({1, 2, 3, 4, 5, 6}, {3, 2});
  sum(x * b).backward();
  ASSERT_EQ(b.grad().str(), "f16[2]@cpu");
  EXPECT_EQ(b.grad().to(DType::f32).toVector(), (std::vector<float>{1 + 3 + 5, 2 + 4 + 6}));
}

TEST(Autograd, NoGradGuardAndDetach) {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard noGrad;
    EXPECT_FALSE(isGradEnabled());
    EXPECT_FALSE((x * 2.0f).requiresGrad());
  }
  EXPECT_TRUE(isGradEnabled());
  Tensor d = x.detach();
  EXPECT_FALSE(d.requiresGrad());
  Tensor y = sum(x * d);  // d is a constant: dy/dx = d
  y.backward();
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{1, 2}));
  {
    NoGradGuard noGrad;
    d.mul_(10.0);  // shares x's storage and version counter
  }
  EXPECT_EQ(x.toVector(), (std::vector<float>{10, 20}));
  EXPECT_EQ(x.version(), 1u);
  EXPECT_EQ(errorOf([&] { sum(x * 2.0f).detach().backward(); }),
            "backward: f32[]@cpu does not require grad and has no grad_fn (mark a leaf with setRequiresGrad(), and do "
            "not compute the loss under a NoGradGuard)");
}

TEST(Autograd, OnlyFloatsRequireGrad) {
  EXPECT_EQ(errorOf([] { fromVector<int32_t>({1, 2}).setRequiresGrad(); }),
            "setRequiresGrad: only floating-point tensors (f32, f64, f16, bf16) can require gradients, got "
            "i32[2]@cpu");
  Tensor x = leaf({0.5f, 2.5f});
  EXPECT_FALSE((x > 1.0f).requiresGrad());
  EXPECT_FALSE(argmax(x, 0).requiresGrad());
  EXPECT_EQ(errorOf([&] { (x * 2.0f).setRequiresGrad(); }),
            "setRequiresGrad: f32[2]@cpu is not a leaf (it was computed by MulBackward); call it on a leaf, or on "
            "detach() of it");
}

TEST(Autograd, InPlaceOpsMoveTheHistory) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2.0f;
  y.mul_(3.0).add_(1.0);
  EXPECT_EQ(y.version(), 2u);
  EXPECT_EQ(y.gradFnName(), "AddBackward");
  sum(y).backward();
  EXPECT_EQ(x.grad().toVector(), (std::vector<float>{6, 6}));
  EXPECT_EQ(y.toVector(), (std::vector<float>{7, 13}));
}

TEST(Autograd, ModifyingASavedTensorIsAnErrorAtBackward) {
  Tensor x = leaf({1, 2});
  Tensor y = exp(x);  // exp's gradient reads its output
  Tensor z = sum(y);
  y.add_(1.0);
  EXPECT_EQ(errorOf([&] { z.backward(); }),
            "backward: a tensor f32[2]@cpu saved by ExpBackward for the gradient was modified by an in-place "
            "operation: it is at version 1, expected version 0 (clone it before the in-place op, or make the op out "
            "of place)");
}

TEST(Autograd, InPlaceErrors) {
  Tensor x = leaf({1, 2});
  EXPECT_EQ(errorOf([&] { x.add_(1.0); }),
            "add_: f32[2]@cpu is a leaf that requires grad and cannot be modified in place while gradients are "
            "recorded (wrap the update in a kiln::NoGradGuard)");
  {
    NoGradGuard noGrad;
    x.sub_(fromVector({1, 1}), 0.5);
  }
  EXPECT_EQ(x.toVector(), (std::vector<float>{0.5f, 1.5f}));
  Tensor y = x * 1.0f;
  EXPECT_EQ(errorOf([&] { y.view({2, 1}).mul_(2.0); }),
            "mul_: in-place ops on a view with gradients are not supported; f32[2,1]@cpu is a view (write into a "
            "clone, or under a kiln::NoGradGuard)");
  Tensor ints = fromVector<int32_t>({1, 2});
  EXPECT_EQ(errorOf([&] { ints.mul_(1.5); }), "mul_: result type f32 cannot be cast to the dtype of i32[2]@cpu");
  EXPECT_EQ(errorOf([&] { ints.add_(fromVector<int32_t>({1, 2, 3, 4}, {2, 2})); }),
            "add_: the result i32[2,2]@cpu does not fit i32[2]@cpu (an in-place op does not broadcast the tensor it "
            "writes)");
  EXPECT_EQ(ints.toVector<int32_t>(), (std::vector<int32_t>{1, 2}));  // nothing written by the failed ops
}

TEST(Autograd, InPlaceWritesThroughViews) {
  Tensor base = zeros({2, 3});
  Tensor col = base.select(1, 1);
  col.fill_(5.0);
  base.t().slice(0, 2, 3).add_(fromVector({1, 2}, {1, 2}));
  EXPECT_EQ(base.toVector(), (std::vector<float>{0, 5, 1, 0, 5, 2}));
  EXPECT_EQ(base.version(), 2u);
  EXPECT_EQ(col.version(), 2u);
  Tensor ints = zeros({3}, DType::i64);
  ints.copy_(fromVector({1.9f}));  // copy_ converts any dtype, and broadcasts its source
  EXPECT_EQ(ints.toVector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
}

TEST(Autograd, CopyAndFillGradients) {
  Tensor src = leaf({3});
  Tensor x = leaf({1, 2});
  Tensor y = x * 1.0f;
  y.copy_(src * 2.0f);  // broadcast; y's old value no longer matters
  sum(y).backward();
  EXPECT_EQ(src.grad().toVector(), (std::vector<float>{4}));
  EXPECT_FALSE(x.grad().defined());
}

}  // namespace
}  // namespace kiln

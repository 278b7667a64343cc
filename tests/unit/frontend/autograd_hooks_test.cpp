// Hooks into backward (frontend/autograd/hooks.h): post-accumulate-grad
// hooks see the accumulated gradient, once per backward and in registration
// order, and can be removed; end-of-backward callbacks run after every
// node, and queueing one outside backward is an error.
#include <gtest/gtest.h>

#include "frontend/kiln.h"
#include "tests/common/error_of.h"

namespace kiln {
namespace {

TEST(AutogradHooks, PostAccumulateGradHookSeesTheAccumulatedGradient) {
  Tensor w = ones({3}).setRequiresGrad();
  std::vector<std::string> calls;
  std::vector<std::vector<float>> seen;
  const uint64_t first = autograd::registerPostAccumulateGradHook(w, [&](const Tensor& leaf) {
    calls.push_back("first");
    seen.push_back(leaf.grad().toVector());
  });
  autograd::registerPostAccumulateGradHook(w, [&](const Tensor&) { calls.push_back("second"); });
  // w used twice: one accumulation of the summed gradient, so one call each.
  sum(w * 2.0 + w * 3.0).backward();
  EXPECT_EQ(calls, (std::vector<std::string>{"first", "second"}));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], std::vector<float>(3, 5.0f));
  // A second backward: the hook sees the sum of both.
  sum(w * 2.0).backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], std::vector<float>(3, 7.0f));
  autograd::removePostAccumulateGradHook(w, first);
  sum(w).backward();
  EXPECT_EQ(calls, (std::vector<std::string>{"first", "second", "first", "second", "second"}));
}

TEST(AutogradHooks, CallbacksRunAfterEveryNode) {
  Tensor a = ones({2}).setRequiresGrad();
  Tensor b = ones({2}).setRequiresGrad();
  std::vector<std::string> order;
  autograd::registerPostAccumulateGradHook(a, [&](const Tensor&) {
    order.push_back("a");
    autograd::queueCallback([&] {
      order.push_back("end");
      EXPECT_TRUE(b.grad().defined()) << "b's gradient is in before the callback";
      autograd::queueCallback([&] { order.push_back("queued by a callback"); });
    });
  });
  autograd::registerPostAccumulateGradHook(b, [&](const Tensor&) { order.push_back("b"); });
  EXPECT_FALSE(autograd::isBackwardRunning());
  sum(a * b).backward();
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[2], "end");
  EXPECT_EQ(order[3], "queued by a callback");
  EXPECT_FALSE(autograd::isBackwardRunning());
}

TEST(AutogradHooks, Errors) {
  EXPECT_EQ(errorOf([] { autograd::queueCallback([] {}); }),
            "queueCallback: no backward is running on this thread (queue callbacks from a hook or a node)");
  Tensor x = ones({2});
  EXPECT_NE(errorOf([&] {
              autograd::registerPostAccumulateGradHook(x, [](const Tensor&) {});
            }).find("is not a leaf that requires grad"),
            std::string::npos);
  // An error in a hook ends backward and reaches the caller.
  Tensor w = ones({2}).setRequiresGrad();
  autograd::registerPostAccumulateGradHook(w, [](const Tensor&) { kiln::fail("hook failed"); });
  EXPECT_EQ(errorOf([&] { sum(w).backward(); }), "hook failed");
  EXPECT_FALSE(autograd::isBackwardRunning()) << "the callback list is reset after an error";
}

}  // namespace
}  // namespace kiln

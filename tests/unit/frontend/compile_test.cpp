// kiln::compile: results, kernel counts, program caching by signature,
// captured tensors, kiln::trace, and the errors of bad traced functions.
#include <gtest/gtest.h>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;

TEST(Compile, RunsTheFunctionAsOneKernel) {
  auto f = compile([](const Tensor& x, const Tensor& b) { return relu(x + b) * 2.0; });
  Tensor x = fromVector({-1, 2, -3, 4}, {2, 2});
  Tensor b = fromVector({1, -1}, {2});
  int64_t before = runtime::kernelLaunchCount();
  Tensor y = f(x, b);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 1);
  EXPECT_EQ(y.toVector(), (std::vector<float>{0, 2, 0, 6}));
  EXPECT_EQ(f.lastNumKernels(), 1);
}

TEST(Compile, CachesBySignatureAndRecompilesWhenItChanges) {
  int traces = 0;
  auto f = compile([&](const Tensor& x) {
    ++traces;
    return kiln::exp(x);
  });
  f(zeros({4}));
  f(ones({4}));
  EXPECT_EQ(f.numCompiles(), 1);
  EXPECT_EQ(traces, 1);
  Tensor y = f(zeros({2, 3}));
  EXPECT_EQ(f.numCompiles(), 2);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.toVector(), (std::vector<float>(6, 1.0f)));
  f(zeros({4}));
  EXPECT_EQ(f.numCompiles(), 2) << "the first program is still cached";
}

TEST(Compile, MultipleResultsAndIntermediates) {
  auto f = compile([](const Tensor& x) {
    Tensor a = relu(x);
    return std::vector<Tensor>{a, a + 1.0};
  });
  auto out = f(fromVector({-1, 3}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].toVector(), (std::vector<float>{0, 3}));
  EXPECT_EQ(out[1].toVector(), (std::vector<float>{1, 4}));
}

TEST(Compile, CapturedTensorsAreReadAtEveryCall) {
  Tensor w = fromVector({1, 2});
  auto f = compile([&](const Tensor& x) { return x * w; });
  EXPECT_EQ(f(ones({2})).toVector(), (std::vector<float>{1, 2}));
  w.data<float>()[1] = 10;  // the program reads w's storage, not a copy
  EXPECT_EQ(f(ones({2})).toVector(), (std::vector<float>{1, 10}));
  EXPECT_EQ(f.numCompiles(), 1);
}

TEST(Compile, ReturningAnArgumentReturnsItsStorage) {
  auto f = compile([](const Tensor& x) { return x; });
  Tensor x = fromVector({5});
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{5}));
}

TEST(Compile, TraceBuildsTheGraphWithoutRunning) {
  ir::TensorType t{DType::f32, {8}, Device::cpu()};
  int64_t before = runtime::kernelLaunchCount();
  Trace tr = trace([](const Tensor& x) { return sigmoid(x) * 3.0; }, {t}, "sig");
  EXPECT_EQ(runtime::kernelLaunchCount(), before);
  EXPECT_EQ(tr.graph->name(), "sig");
  EXPECT_EQ(tr.graph->numInputs(), 1);
  EXPECT_EQ(tr.graph->numNodes(), 3);  // sigmoid, constant, mul
  EXPECT_TRUE(tr.bindings.empty());  // nothing captured
  EXPECT_TRUE(tr.writes.empty());
}

TEST(CompileErrors, AFunctionThatReturnsNothing) {
  auto f = compile([](const Tensor& x) { (void)relu(x); });
  EXPECT_EQ(errorOf([&] { f(zeros({2})); }),
            "compile: the traced function returned no tensors; return the tensors it computes");
  auto g = compile([](const Tensor&) { return std::vector<Tensor>{}; });
  EXPECT_EQ(errorOf([&] { g(zeros({2})); }),
            "compile: the traced function returned no tensors; return the tensors it computes");
  auto h = compile([](const Tensor&) { return Tensor(); });
  EXPECT_EQ(errorOf([&] { h(zeros({2})); }), "compile: result 0 of the traced function is an undefined tensor");
}

TEST(CompileErrors, ShapeErrorsInsideTheTraceReachTheCaller) {
  auto f = compile([](const Tensor& x, const Tensor& y) { return x + y; });
  EXPECT_EQ(errorOf([&] { f(zeros({2, 3}), zeros({4})); }),
            "add: shapes do not broadcast, got f32[2,3]@cpu and f32[4]@cpu");
  EXPECT_EQ(f.numCompiles(), 0) << "nothing was cached";
  EXPECT_EQ(f(zeros({2, 3}), ones({3})).toVector(), (std::vector<float>(6, 1.0f)));
}

TEST(CompileErrors, ReadingValuesWhileTracingSaysWhereAndWhy) {
  auto f = compile([](const Tensor& x) {
    if (x.item() > 0) return relu(x);  // data-dependent control flow
    return x;
  });
  std::string msg = errorOf([&] { f(ones({1})); });
  EXPECT_NE(msg.find("item: cannot read the values of f32[1]@cpu while tracing (kiln::compile)"), std::string::npos) << msg;
}

TEST(CompileErrors, WrongArgumentsAndBadPipelines) {
  auto f = compile([](const Tensor& x) { return relu(x); });
  // Calling f with two tensors does not compile; tracing it with two types is a run-time error.
  ir::TensorType t{DType::f32, {1}, Device::cpu()};
  EXPECT_EQ(errorOf([&] { trace([](const Tensor& x) { return x; }, {t, t}); }),
            "compile: the compiled function cannot be called with 2 tensors");
  EXPECT_EQ(errorOf([&] { f(Tensor()); }), "compile: argument 0 is an undefined tensor");
  std::string msg = errorOf([] { compile([](const Tensor& x) { return x; }, {"dce,nope"}); });
  EXPECT_TRUE(msg.starts_with("pass pipeline: unknown pass 'nope'; known passes: ")) << msg;
  EXPECT_NE(msg.find("fuse-elementwise"), std::string::npos) << msg;
}

TEST(CompileErrors, TracedTensorsHaveNoValueOutsideTheTrace) {
  Tensor leaked;
  auto f = compile([&](const Tensor& x) {
    leaked = relu(x);
    return leaked;
  });
  f(ones({2}));
  EXPECT_EQ(errorOf([&] { relu(leaked); }),
            "relu: f32[2]@cpu was produced while tracing (kiln::compile) and has no value outside the trace");
}

}  // namespace

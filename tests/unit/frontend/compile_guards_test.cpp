// kiln::compile's guards: programs keyed by each argument's dtype, shape,
// device and requires_grad; the cache limit with its eager fallback and
// warning; KILN_LOG=recompiles.
#include <gtest/gtest.h>

#include "frontend/kiln.h"
#include "runtime/log.h"

namespace kiln {
namespace {

TEST(CompileGuards, RequiresGradIsPartOfTheSignature) {
  auto f = compile([](const Tensor& x) { return x * 2.0f; });
  const Tensor x = fromVector({1, 2, 3});
  f(x);
  f(x);
  EXPECT_EQ(f.numCompiles(), 1);
  const Tensor w = fromVector({1, 2, 3}).setRequiresGrad();
  f(w);
  EXPECT_EQ(f.numCompiles(), 2);
}

TEST(CompileGuards, PastTheCacheLimitCallsRunEagerlyWithOneWarning) {
  CompileOptions options;
  options.cacheLimit = 2;
  auto f = compile([](const Tensor& x) { return relu(x) + 1.0f; }, options);
  testing::internal::CaptureStderr();
  for (int64_t n : {2, 3, 4, 5}) {
    const Tensor x = arange(static_cast<double>(-n), static_cast<double>(n));
    EXPECT_EQ(f(x).toVector(), (relu(x) + 1.0f).toVector()) << n;
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(f.numCompiles(), 2);
  EXPECT_EQ(f.numEagerFallbacks(), 2);
  EXPECT_EQ(err,
            "kiln::compile: the cache limit of 2 programs is reached and argument 0 changed from f32[6]@cpu to "
            "f32[8]@cpu; this call and further calls that match no program run eagerly (raise "
            "CompileOptions::cacheLimit, or keep that argument's type fixed)\n");
  // Signatures compiled before the limit still run their programs.
  f(arange(-2.0, 2.0));
  EXPECT_EQ(f.numEagerFallbacks(), 2);
}

TEST(CompileGuards, LogRecompilesSaysWhy) {
  auto f = compile([](const Tensor& x, const Tensor& y) { return x + y; });
  testing::internal::CaptureStderr();
  f(zeros({2}), zeros({2}));
  f(zeros({2}), zeros({2}, DType::f64));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "off by default";
  logging::configure("recompiles");  // KILN_LOG is read once; set it here
  testing::internal::CaptureStderr();
  f(zeros({3}), zeros({3}));
  const std::string err = testing::internal::GetCapturedStderr();
  logging::configure("");
  EXPECT_EQ(err,
            "kiln::compile: recompiling (program 3 of at most 8): argument 0 changed from f32[2]@cpu to "
            "f32[3]@cpu, argument 1 changed from f64[2]@cpu to f32[3]@cpu\n");
}

TEST(CompileGuards, AFailedGuardOnHostStateRecompilesAndSaysWhich) {
  // The traced function reads a leaf's gradient: the program depends on it
  // being undefined, as when traced; once it exists, a second program.
  const Tensor w = fromVector({1, 2, 3}).setRequiresGrad();
  auto f = compile([&](const Tensor& x) {
    const Tensor g = w.grad();
    return g.defined() ? x + g : x * 2.0f;
  });
  const Tensor x = fromVector({1, 1, 1});
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(f.numCompiles(), 1);
  w.setGrad(fromVector({10, 20, 30}));
  logging::configure("recompiles");  // KILN_LOG is read once; set it here
  testing::internal::CaptureStderr();
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{11, 21, 31}));
  const std::string err = testing::internal::GetCapturedStderr();
  logging::configure("");
  EXPECT_EQ(f.numCompiles(), 2);
  EXPECT_EQ(err,
            "kiln::compile: recompiling (program 2 of at most 8): a guard failed: the gradient of f32[3]@cpu "
            "is undefined no longer holds\n");
  // The gradient is read at each call, not frozen at trace time.
  w.setGrad(fromVector({5, 5, 5}));
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{6, 6, 6}));
  // And the first program is valid again once it is cleared.
  w.setGrad({});
  EXPECT_EQ(f(x).toVector(), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(f.numCompiles(), 2);
}

}  // namespace
}  // namespace kiln

// kiln::compile's guards: programs keyed by each argument's dtype, shape,
// device and requires_grad; the cache limit with its eager fallback and
// warning; KILN_LOG=recompiles.
#include <gtest/gtest.h>

#include <cstdlib>

#include "frontend/kiln.h"

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
            "f32[8]@cpu; this call and further calls with new signatures run eagerly (raise "
            "CompileOptions::cacheLimit, or keep that argument's type fixed)\n");
  // Signatures compiled before the limit still run their programs.
  f(arange(-2.0, 2.0));
  EXPECT_EQ(f.numEagerFallbacks(), 2);
}

TEST(CompileGuards, LogRecompilesSaysWhy) {
  ::setenv("KILN_LOG", "recompiles", 1);
  auto f = compile([](const Tensor& x, const Tensor& y) { return x + y; });
  testing::internal::CaptureStderr();
  f(zeros({2}), zeros({2}));
  f(zeros({2}), zeros({2}, DType::f64));
  const std::string err = testing::internal::GetCapturedStderr();
  ::unsetenv("KILN_LOG");
  EXPECT_EQ(err,
            "kiln::compile: recompiling (program 2 of at most 8): argument 1 changed from f32[2]@cpu to "
            "f64[2]@cpu\n");
}

}  // namespace
}  // namespace kiln

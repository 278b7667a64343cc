// The choice of the CPU BLAS (Note [Choosing the BLAS] in
// codegen/blas_choice.cpp): KILN_BLAS forces it; otherwise it is measured
// once and kept in the disk cache, so that a second choice (another
// process) reads it instead of measuring; nothing is measured with the
// cache off; a bad KILN_BLAS names the accepted values.
#include "codegen/blas_choice.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include "runtime/error.h"

namespace kiln::codegen {
namespace {

using runtime::BlasLibrary;

std::filesystem::path freshDirectory(const char* name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / (std::string("kiln-blas-choice-") + name);
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(BlasChoice, IsMeasuredOnceAndKeptInTheDiskCache) {
  if (!runtime::haveOneDnn()) GTEST_SKIP() << "this build has no oneDNN: OpenBLAS is the only choice";
  DiskCache cache(freshDirectory("measured"));
  int measured = 0;
  auto oneDnnFaster = [&](BlasLibrary l) {
    ++measured;
    return l == BlasLibrary::onednn ? 10.0 : 12.5;
  };
  BlasChoice c = chooseBlas(nullptr, cache, "key", oneDnnFaster);
  EXPECT_EQ(c.library, BlasLibrary::onednn);
  EXPECT_EQ(measured, 2);
  EXPECT_NE(c.how.find("OpenBLAS 12.5 ms, oneDNN 10.0 ms (now)"), std::string::npos) << c.how;
  // Another process (a new cache object on the same directory) reads it.
  DiskCache again(cache.directory());
  c = chooseBlas("auto", again, "key", [&](BlasLibrary) {
    ++measured;
    return 1.0;
  });
  EXPECT_EQ(c.library, BlasLibrary::onednn);
  EXPECT_EQ(measured, 2) << "measured again though the cache kept it";
  EXPECT_NE(c.how.find("(kept in the disk cache)"), std::string::npos) << c.how;
  // Another key (another CPU or library version) measures again.
  c = chooseBlas(nullptr, again, "other key", [&](BlasLibrary l) {
    ++measured;
    return l == BlasLibrary::onednn ? 20.0 : 12.5;
  });
  EXPECT_EQ(c.library, BlasLibrary::openblas);
  EXPECT_EQ(measured, 4);
  // A damaged entry is measured again, not trusted.
  cache.store("key", "not two numbers");
  c = chooseBlas(nullptr, cache, "key", oneDnnFaster);
  EXPECT_EQ(measured, 6);
  EXPECT_EQ(c.library, BlasLibrary::onednn);
}

TEST(BlasChoice, KilnBlasForcesItAndTheCacheOffMeasuresNothing) {
  DiskCache off{std::filesystem::path()};
  auto never = [](BlasLibrary) -> double {
    ADD_FAILURE() << "measured";
    return 1.0;
  };
  BlasChoice c = chooseBlas("openblas", off, "key", never);
  EXPECT_EQ(c.library, BlasLibrary::openblas);
  EXPECT_EQ(c.how, "KILN_BLAS=openblas");
  c = chooseBlas(nullptr, off, "key", never);
  EXPECT_EQ(c.library, BlasLibrary::openblas);
  if (runtime::haveOneDnn()) {
    EXPECT_NE(c.how.find("disk cache that keeps the measurement is off"), std::string::npos) << c.how;
    EXPECT_EQ(chooseBlas("onednn", off, "key", never).library, BlasLibrary::onednn);
  } else {
    EXPECT_THROW(chooseBlas("onednn", off, "key", never), Error);
  }
  try {
    chooseBlas("mkl", off, "key", never);
    ADD_FAILURE() << "KILN_BLAS=mkl accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KILN_BLAS must be openblas, onednn or auto (measure), got 'mkl'"),
              std::string::npos)
        << e.what();
  }
}

// The bf16 products' choice, the same mechanism under its own variable and
// key: forced, measured once and kept, and checked.
TEST(BlasChoice, Bf16ProductsAreChosenTheSameWay) {
  using runtime::HalfMatmul;
  DiskCache off{std::filesystem::path()};
  auto never = [](HalfMatmul) -> double {
    ADD_FAILURE() << "measured";
    return 1.0;
  };
  auto [how, why] = chooseHalfMatmul("f32", off, "key", never);
  EXPECT_EQ(how, HalfMatmul::viaF32);
  EXPECT_EQ(why, "KILN_BF16_MATMUL=f32");
  try {
    chooseHalfMatmul("amx", off, "key", never);
    ADD_FAILURE() << "KILN_BF16_MATMUL=amx accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "KILN_BF16_MATMUL must be f32, onednn or auto (measure), got 'amx'");
  }
  if (!runtime::haveOneDnn()) {
    EXPECT_THROW(chooseHalfMatmul("onednn", off, "key", never), Error);
    return;
  }
  EXPECT_EQ(chooseHalfMatmul(nullptr, off, "key", never).first, HalfMatmul::viaF32) << "no cache: not measured";
  DiskCache cache(freshDirectory("bf16"));
  int measured = 0;
  auto nativeFaster = [&](HalfMatmul h) {
    ++measured;
    return h == HalfMatmul::onednn ? 11.5 : 26.0;
  };
  std::tie(how, why) = chooseHalfMatmul(nullptr, cache, "key", nativeFaster);
  EXPECT_EQ(how, HalfMatmul::onednn);
  EXPECT_EQ(why, "measured on this machine: via f32 26.0 ms, oneDNN bf16 11.5 ms (now)");
  DiskCache again(cache.directory());
  std::tie(how, why) = chooseHalfMatmul("auto", again, "key", nativeFaster);
  EXPECT_EQ(how, HalfMatmul::onednn);
  EXPECT_EQ(measured, 2) << "measured again though the cache kept it";
  std::tie(how, why) = chooseHalfMatmul(nullptr, again, "other key", [&](HalfMatmul h) {
    ++measured;
    return h == HalfMatmul::onednn ? 40.0 : 26.0;
  });
  EXPECT_EQ(how, HalfMatmul::viaF32) << "converting was faster on this key's machine";
  EXPECT_EQ(measured, 4);
}

}  // namespace
}  // namespace kiln::codegen

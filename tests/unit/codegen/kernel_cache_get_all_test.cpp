// KernelCache::getAll (Note [Kernels compile in parallel],
// codegen/kernel_cache.cpp): a program's kernels compiled on several
// threads at once, each signature once, counted as one get() per kernel;
// a kernel that fails to compile fails the call with its own error, after
// the other threads have stopped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/kernel_cache.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

using namespace instr;

/// relu(x) * c: a distinct signature per `c`.
Kernel scaled(const std::string& name, double c) {
  Kernel k;
  k.name = name;
  k.rank = 1;
  k.params = {{DType::f32, false, InnerStride::one}, {DType::f32, true, InnerStride::one}};
  k.body = {load(0), op(ir::Op::relu, {0}), constant(c), op(ir::Op::mul, {1, 2}), store(1, 3)};
  return k;
}

TEST(KernelCacheGetAll, CompilesEachMissOnceOnSeveralThreadsInTheCallersOrder) {
  KernelCache& cache = KernelCache::instance();
  std::vector<Kernel> kernels;
  for (int i = 0; i < 6; ++i) kernels.push_back(scaled("kiln_t_get_all_" + std::to_string(i), 1.0 + 0.125 * i));
  std::vector<const Kernel*> list;
  for (const Kernel& k : kernels) list.push_back(&k);
  list.push_back(&kernels[2]);  // twice in one program: compiled once, then a hit
  const KernelCacheStats before = cache.stats();
  const auto got = cache.getAll(list, Device::cpu(), 4);
  const KernelCacheStats after = cache.stats();
  EXPECT_EQ(after.misses - before.misses, 6);
  EXPECT_EQ(after.hits - before.hits, 1);
  ASSERT_EQ(got.size(), list.size());
  EXPECT_EQ(got[6], got[2]) << "one compiled kernel per signature";
  for (size_t i = 0; i < kernels.size(); ++i) {
    ASSERT_NE(got[i]->module, nullptr) << kernels[i].name;
    EXPECT_EQ(cache.get(kernels[i], Device::cpu()), got[i]) << "the cache holds what getAll returned";
    for (size_t j = 0; j < i; ++j) EXPECT_NE(got[i], got[j]) << "distinct kernels";
  }
  // Everything in memory: nothing to compile, on any number of threads.
  const auto again = cache.getAll(list, Device::cpu(), 4);
  EXPECT_EQ(cache.stats().misses, after.misses);
  EXPECT_EQ(again, got);
}

TEST(KernelCacheGetAll, AFailingKernelFailsTheCallWithItsOwnError) {
  std::vector<Kernel> kernels;
  for (int i = 0; i < 4; ++i) kernels.push_back(scaled("kiln_t_get_all_bad_" + std::to_string(i), 3.0 + i));
  kernels[2].body[3].operands = {9};  // out of range: a kiln bug the renderer refuses
  std::vector<const Kernel*> list;
  for (const Kernel& k : kernels) list.push_back(&k);
  try {
    KernelCache::instance().getAll(list, Device::cpu(), 3);
    ADD_FAILURE() << "no exception";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("kiln_t_get_all_bad_2"), std::string::npos) << e.what();
  }
  // The cache still works for the good ones.
  EXPECT_NE(KernelCache::instance().get(kernels[0], Device::cpu())->module, nullptr);
}

TEST(KernelCacheGetAll, CompileThreadsFollowsTheEnvironment) {
  const char* old = std::getenv("KILN_COMPILE_THREADS");
  const std::string saved = old ? old : "";
  setenv("KILN_COMPILE_THREADS", "3", 1);
  EXPECT_EQ(compileThreads(), 3);
  setenv("KILN_COMPILE_THREADS", "0", 1);  // not a count: the default
  const int fallback = compileThreads();
  EXPECT_GE(fallback, 1);
  EXPECT_LE(fallback, 8);
  if (old) setenv("KILN_COMPILE_THREADS", saved.c_str(), 1);
  else unsetenv("KILN_COMPILE_THREADS");
}

}  // namespace
}  // namespace kiln::codegen

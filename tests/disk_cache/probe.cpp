// Runs a fixed kiln program (an eager op, a softmax and a compiled chain)
// and prints how its kernels were obtained and a checksum of its results:
//   compiled=N disk_hits=M corrupt=K checksum=X ms_per_kernel=T
// tests/disk_cache/two_processes.sh runs it several times on one cache.
#include <cstdio>
#include <cstring>

#include "codegen/cpu_compiler.h"
#include "codegen/disk_cache.h"
#include "codegen/kernel_cache.h"
#include "frontend/kiln.h"

int main() {
  using namespace kiln;
  // Starting the JIT (target machine, LLJIT) is not a kernel's cost: do it
  // first, on a kernel the program below does not use.
  (void)codegen::cpuTargetDescription();
  Generator gen(42);
  const Tensor x = randn({64, 33}, gen);
  const Tensor a = relu(x) * 2.0 + 1.0;
  const Tensor b = softmax(x, 1);
  auto f = compile([](const Tensor& t) { return tanh(t * 0.5 - 1.0) + sigmoid(t); });
  const Tensor c = f(x);
  uint64_t checksum = 1469598103934665603ull;
  for (const Tensor& t : {a, b, c})
    for (float v : t.toVector()) {
      uint32_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      checksum = (checksum ^ bits) * 1099511628211ull;
    }
  const codegen::KernelCacheStats s = codegen::KernelCache::instance().stats();
  std::printf("compiled=%lld disk_hits=%lld corrupt=%lld checksum=%016llx ms_per_kernel=%.2f\n",
              static_cast<long long>(s.misses - s.diskHits), static_cast<long long>(s.diskHits),
              static_cast<long long>(codegen::DiskCache::instance().stats().corrupt),
              static_cast<unsigned long long>(checksum), s.misses ? s.compileMs / static_cast<double>(s.misses) : 0.0);
  return 0;
}

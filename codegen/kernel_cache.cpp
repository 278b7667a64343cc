// The in-memory kernel cache of codegen/kernel_cache.h.
#include "codegen/kernel_cache.h"

namespace kiln::codegen {

KernelCache& KernelCache::instance() {
  static auto* cache = new KernelCache();  // leaked: kernels may outlive statics
  return *cache;
}

std::shared_ptr<const CompiledCpuKernel> KernelCache::cpu(const Kernel& kernel) {
  std::string key = kernel.signature();
  {
    std::lock_guard lock(mutex_);
    if (auto it = cpu_.find(key); it != cpu_.end()) {
      stats_.hits++;
      return it->second;
    }
  }
  // Compile outside the lock; if two threads race, both compile and the
  // first one in wins (the JIT is itself thread-safe).
  auto compiled = std::make_shared<const CompiledCpuKernel>(compileCpuKernel(kernel));
  std::lock_guard lock(mutex_);
  stats_.misses++;
  stats_.diskHits += compiled->fromDiskCache;
  stats_.compileMs += compiled->compileMs;
  return cpu_.emplace(std::move(key), compiled).first->second;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void KernelCache::clear() {
  std::lock_guard lock(mutex_);
  cpu_.clear();
}

}  // namespace kiln::codegen

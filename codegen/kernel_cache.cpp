// The in-memory kernel cache of codegen/kernel_cache.h.
#include "codegen/kernel_cache.h"

namespace kiln::codegen {

KernelCache& KernelCache::instance() {
  static auto* cache = new KernelCache();  // leaked: kernels may outlive statics
  return *cache;
}

std::shared_ptr<const CompiledKernel> KernelCache::get(const Kernel& kernel, Device device) {
  std::string key = device.str() + "|" + kernel.signature();
  {
    std::lock_guard lock(mutex_);
    if (auto it = kernels_.find(key); it != kernels_.end()) {
      stats_.hits++;
      return it->second;
    }
  }
  // Compile outside the lock; if two threads race, both compile and the
  // first one in wins (the compilers are themselves thread-safe).
  auto compiled = std::make_shared<const CompiledKernel>(targetFor(device).compile(kernel, device));
  std::lock_guard lock(mutex_);
  stats_.misses++;
  stats_.diskHits += compiled->fromDiskCache;
  stats_.compileMs += compiled->compileMs;
  return kernels_.emplace(std::move(key), compiled).first->second;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void KernelCache::clear() {
  std::lock_guard lock(mutex_);
  kernels_.clear();
}

}  // namespace kiln::codegen

// The in-memory kernel cache of codegen/kernel_cache.h.
#include "codegen/kernel_cache.h"

#include "runtime/log.h"

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
      KILN_LOG_TO(cache, "kiln::cache: memory hit {} on {} (key {:016x})", kernel.name, device.str(), kernel.hash());
      return it->second;
    }
  }
  // Compile outside the lock; if two threads race, both compile and the
  // first one in wins (the compilers are themselves thread-safe).
  auto compiled = std::make_shared<const CompiledKernel>(targetFor(device).compile(kernel, device));
  KILN_LOG_TO(cache, "kiln::cache: memory miss {} on {} (key {:016x}): {} in {:.3f} ms", kernel.name, device.str(),
              kernel.hash(), compiled->fromDiskCache ? "loaded from the disk cache" : "compiled", compiled->compileMs);
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

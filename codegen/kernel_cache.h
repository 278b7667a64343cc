// The in-memory kernel cache: one compiled kernel per kernel signature
// (DESIGN.md §2, §6), shared by eager ops and compiled graphs, so an eager op
// and a fused graph that need the same kernel compile it once. The disk
// cache (keyed by the same signature hash, the target and compiler versions)
// will sit behind it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "codegen/cpu_compiler.h"
#include "codegen/kernel.h"

namespace kiln::codegen {

struct KernelCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;     ///< kernels not in memory: compiled, or loaded from the disk cache
  int64_t diskHits = 0;   ///< of the misses, those loaded from the disk cache
  double compileMs = 0;   ///< total time spent compiling or loading
};

class KernelCache {
 public:
  static KernelCache& instance();

  /// The compiled CPU kernel for `kernel`, compiling it on a miss.
  std::shared_ptr<const CompiledCpuKernel> cpu(const Kernel& kernel);

  KernelCacheStats stats() const;
  /// Forgets every kernel (running executables keep theirs alive).
  void clear();

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const CompiledCpuKernel>> cpu_;
  KernelCacheStats stats_;
};

}  // namespace kiln::codegen

// The in-memory kernel cache: one compiled, loaded kernel per device and
// kernel signature (DESIGN.md §2, §6), shared by eager ops and compiled
// graphs, so an eager op and a fused graph that need the same kernel compile
// it once. Behind it, each target keeps object code in the disk cache
// (codegen/disk_cache.h) keyed by its description of the device (CPU
// features, sm_XY, OpenCL device and driver version), the compiler and the
// kernel, so a new process loads kernels instead of compiling them.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/target.h"
#include "runtime/device.h"

namespace kiln::codegen {

struct KernelCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;    ///< kernels not in memory: compiled, or loaded from the disk cache
  int64_t diskHits = 0;  ///< of the misses, those loaded from the disk cache
  double compileMs = 0;  ///< total time spent compiling or loading
};

/// Threads a program's kernels compile on: KILN_COMPILE_THREADS, else the
/// machine's hardware threads (at most 8).
int compileThreads();

class KernelCache {
 public:
  static KernelCache& instance();

  /// `kernel` compiled for and loaded on `device`, compiling it (through
  /// the device's Target) on a miss.
  std::shared_ptr<const CompiledKernel> get(const Kernel& kernel, Device device);

  /// get() of each of `kernels`, in order, the misses compiled several at
  /// once (Note [Kernels compile in parallel]) on `threads` threads (0:
  /// compileThreads()). The first error is rethrown once all have stopped.
  std::vector<std::shared_ptr<const CompiledKernel>> getAll(const std::vector<const Kernel*>& kernels, Device device,
                                                            int threads = 0);

  KernelCacheStats stats() const;
  /// Forgets every kernel (running executables keep theirs alive).
  void clear();

 private:
  mutable std::mutex mutex_;
  /// By device ("cpu", "cuda:0": a module is loaded on one device) and
  /// kernel signature.
  std::unordered_map<std::string, std::shared_ptr<const CompiledKernel>> kernels_;
  KernelCacheStats stats_;
};

}  // namespace kiln::codegen

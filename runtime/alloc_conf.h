// AllocConf: how a device's caching allocator (runtime/caching_allocator.h)
// is tuned, read from KILN_ALLOC_CONF in the syntax of PyTorch's
// PYTORCH_CUDA_ALLOC_CONF ("max_split_size_mb:256,garbage_collection_threshold:0.8"),
// so that a user who knows one knows the other (docs/allocator.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln::runtime {

/// The caching allocator's settings. The defaults are PyTorch's: split any
/// block, no garbage collection, 512-byte rounding, no cap.
struct AllocConf {
  /// Blocks of this size or more are never split, and a cached one serves
  /// only requests of this size or more that it exceeds by less than 20 MiB
  /// (so that big blocks are not carved up for small tensors). SIZE_MAX: off;
  /// otherwise more than 20 MiB, the large pool's segment (PyTorch's rule).
  size_t maxSplitSize = SIZE_MAX;
  /// 0: off. Else in (0, 1): on a cache miss, when the reserved bytes exceed
  /// this fraction of memoryLimit, cached unused segments are freed, oldest
  /// first, before the source is asked for more. Needs a memoryLimit, as
  /// PyTorch's needs a per-process memory fraction.
  double garbageCollectionThreshold = 0;
  /// 0 or 1: requests round up to a multiple of 512 B. A power of two N:
  /// requests above N * 512 B round up to the next of N equal steps between
  /// two powers of two (with 4: 3000 B to 3072 B, 5000 B to 5120 B), to
  /// bound the number of distinct sizes when shapes vary.
  int roundupPower2Divisions = 0;
  /// 0: none. Else the most bytes the allocator reserves from its source;
  /// above it a request is out of memory as if the device were full (tests
  /// use it to force OOM, users to share a device).
  size_t memoryLimit = 0;

  /// Parses "key:value,key:value" with the keys max_split_size_mb,
  /// garbage_collection_threshold, roundup_power2_divisions and kiln's
  /// memory_limit_mb. kiln::Error naming the bad key or value and listing
  /// the valid keys.
  static AllocConf parse(std::string_view text);
  /// parse($KILN_ALLOC_CONF); the defaults when it is unset or empty.
  static AllocConf fromEnvironment();
  /// Throws kiln::Error when a field is out of its range (parse() checks
  /// the same ranges; this is for settings made in code).
  void validate() const;
};

}  // namespace kiln::runtime

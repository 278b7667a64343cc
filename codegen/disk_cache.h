// The disk kernel cache (DESIGN.md §6): compiled kernels (object code of any
// target) stored under a directory, so that a second process running the
// same program loads its kernels instead of compiling them.
//
// Entries are keyed by a string that holds everything the compiled code
// depends on, starting with the device kind and the target's description of
// the device (codegen/target.h) — for CPU kernels "cpu", the LLVM version,
// triple, CPU and features, then the pipeline, and kiln's build ID with the kernel's
// signature (or, without a build ID, the kernel's unoptimized LLVM IR) — so
// a change to any of them, including kiln's renderers, is a different
// entry, never a stale one. (A rebuild of kiln misses every entry.) A file is named by a 64-bit hash of its key and
// holds the whole key (a hash collision is a miss, not a wrong kernel), the payload and a checksum of both: a truncated
// or corrupt entry is detected, counted, removed, and the kernel compiled again. Writes go to a temporary file renamed
// into place, so concurrent processes never see half an entry.
//
// The directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
// $HOME/.cache/kiln. KILN_CACHE_DIR=off (or an empty value) turns the cache
// off. clear() (and `irdump --clear-kernel-cache`) removes kiln's entries.
// A directory that cannot be written is reported once on stderr and the
// cache acts as off: it never fails a compile.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::codegen {

struct DiskCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t corrupt = 0;  ///< entries found damaged (then removed)
  int64_t writes = 0;
};

class DiskCache {
 public:
  /// The process-wide cache, configured from the environment on first use.
  static DiskCache& instance();
  /// The directory the environment names now (see above); empty: off.
  static std::filesystem::path defaultDirectory();

  /// A cache in `directory` (empty: off).
  explicit DiskCache(std::filesystem::path directory);

  /// The payload stored under `key`, or nothing (missing, damaged, or off).
  std::optional<std::string> load(const std::string& key);
  /// Stores `payload` under `key` (replacing any entry).
  void store(const std::string& key, std::string_view payload);
  /// Removes every entry; returns how many.
  int64_t clear();

  bool enabled() const { return enabled_.load(); }
  const std::filesystem::path& directory() const { return directory_; }
  /// The file an entry for `key` lives in.
  std::filesystem::path pathFor(const std::string& key) const;
  DiskCacheStats stats() const;

 private:
  void disable(const std::string& why);

  const std::filesystem::path directory_;
  std::atomic<bool> enabled_;
  mutable std::mutex mutex_;
  DiskCacheStats stats_;
};

}  // namespace kiln::codegen

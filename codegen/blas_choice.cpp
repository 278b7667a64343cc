// Note [Choosing the BLAS]
// kiln multiplies f32 matrices with OpenBLAS's sgemm or oneDNN's, whichever
// is faster on the machine (issue 13 asked for a choice by measurement;
// neither wins everywhere: on the development VM's Zen 4 each was faster on
// some of kiln-bench's shapes by 5–25%). The choice is the machine's, not
// the shape's: eager and compiled code must make the same call to get the
// same bits (Note [Eager equals compiled]), and so must every process of
// a distributed job, so it is made once, kept, and read by everyone:
//
// - KILN_BLAS=openblas or onednn forces it; unset or `auto` asks for the
//   measurement.
// - The measurement (runtime::timeBlasLibrary: the MLP's and the
//   transformer block's product shapes, one thread, about 0.1 s for both
//   libraries) is kept in the disk kernel cache (codegen/disk_cache.h)
//   under the CPU's LLVM description and both libraries' versions, so it
//   runs once per machine and cache, and a new library version measures
//   again. Processes that start together take a file lock in the cache
//   directory while they look, so that one measures and the others read
//   its result: ranks of one job never disagree.
// - With the disk cache off (KILN_CACHE_DIR=off) nothing would keep a
//   measurement, and measuring in every process would cost each 0.1 s and
//   could differ between them: OpenBLAS, unmeasured.
// - A build without oneDNN has only OpenBLAS.
//
// The choice is applied before the CPU target's first library call is
// lowered (CpuTarget::libraries()), and kiln-bench and kiln-env report it.
// f64 products always run OpenBLAS's dgemm (oneDNN has no f64 GEMM).
#include "codegen/blas_choice.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string_view>

#include "codegen/cpu_compiler.h"
#include "runtime/determinism.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {
using runtime::BlasLibrary;

/// Holds an exclusive lock on `path` for its lifetime (nothing when it
/// cannot be opened: the lock only saves a second measurement).
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

std::string describe(double openblasMs, double onednnMs) {
  return fmt::format("measured on this machine: OpenBLAS {:.1f} ms, oneDNN {:.1f} ms", openblasMs, onednnMs);
}
}  // namespace

BlasChoice chooseBlas(const char* setting, DiskCache& cache, const std::string& key,
                      const std::function<double(BlasLibrary)>& measure) {
  const std::string_view s = setting ? setting : "";
  if (s == "openblas" || s == "onednn") {
    const BlasLibrary library = s == "onednn" ? BlasLibrary::onednn : BlasLibrary::openblas;
    KILN_CHECK(library == BlasLibrary::openblas || runtime::haveOneDnn(),
               "KILN_BLAS=onednn, but oneDNN was not found when kiln was built (Debian libdnnl-dev)");
    return {library, fmt::format("KILN_BLAS={}", s)};
  }
  KILN_CHECK(s.empty() || s == "auto", "KILN_BLAS must be openblas, onednn or auto (measure), got '{}'", s);
  if (!runtime::haveOneDnn()) return {BlasLibrary::openblas, "the only CPU BLAS in this build (no oneDNN)"};
  if (!cache.enabled())
    return {BlasLibrary::openblas, "OpenBLAS, unmeasured: the disk cache that keeps the measurement is off"};
  std::optional<FileLock> lock;
  std::error_code ignored;
  std::filesystem::create_directories(cache.directory(), ignored);
  lock.emplace(cache.directory() / "blas-choice.lock");
  double openblasMs = 0, onednnMs = 0;
  std::string when = " (kept in the disk cache)";
  const std::optional<std::string> kept = cache.load(key);
  std::istringstream in(kept.value_or(""));
  if (!(kept && in >> openblasMs >> onednnMs && openblasMs > 0 && onednnMs > 0)) {
    openblasMs = measure(BlasLibrary::openblas);
    onednnMs = measure(BlasLibrary::onednn);
    cache.store(key, fmt::format("{} {}", openblasMs, onednnMs));
    when = " (now)";
  }
  const BlasLibrary library = onednnMs < openblasMs ? BlasLibrary::onednn : BlasLibrary::openblas;
  return {library, describe(openblasMs, onednnMs) + when};
}

const BlasChoice& cpuBlasChoice() {
  // setDeterministic(true) pins the library a measurement would pick (Note
  // [Determinism] in frontend/determinism.h); an explicit KILN_BLAS stays.
  const char* setting = std::getenv("KILN_BLAS");
  if (runtime::deterministic() && (!setting || std::string_view(setting) == "auto" || !*setting)) {
    static const BlasChoice pinned{runtime::BlasLibrary::openblas,
                                   "kiln::setDeterministic(true): OpenBLAS, not measured"};
    runtime::setBlasLibrary(pinned.library);
    return pinned;
  }
  static const BlasChoice choice = [] {
    const std::string key = fmt::format("blas-choice/v1/{}/{}/onednn {}", cpuTargetDescription(),
                                        runtime::blasInfo(), runtime::oneDnnVersion());
    // A cache of its own on the environment's directory, not the process's
    // instance: kiln-bench makes the choice in the user's cache before it
    // points the kernel cache at a private one.
    DiskCache cache(DiskCache::defaultDirectory());
    BlasChoice c = chooseBlas(std::getenv("KILN_BLAS"), cache, key, &runtime::timeBlasLibrary);
    runtime::setBlasLibrary(c.library);
    return c;
  }();
  return choice;
}

}  // namespace kiln::codegen

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
// The same mechanism (chooseByMeasurement) makes a second choice: whether
// bf16 products convert to f32 for the library above or run on oneDNN's
// bf16 matmul primitive (Note [Native bf16 products] in
// runtime/onednn_matmul.cpp; KILN_BF16_MATMUL=f32 or onednn forces it;
// runtime::timeHalfMatmul on the same shapes in bf16), measured after the
// f32 library is set and kept under a key naming it.
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
#include <tuple>
#include <utility>

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

/// Two ways of doing one thing, chosen by measurement: the first is the
/// default (always available, taken unmeasured), the second is oneDNN's.
struct TwoWays {
  const char* variable;        ///< the environment variable that forces one ("KILN_BLAS")
  std::string_view names[2];   ///< its values ("openblas", "onednn")
  std::string_view labels[2];  ///< for `how` ("OpenBLAS", "oneDNN")
  const char* lockName;        ///< the lock file in the cache directory
};

/// The choice for `setting` (nullptr: unset): {whether the second way won,
/// how it was chosen}.
std::pair<bool, std::string> chooseByMeasurement(const TwoWays& w, const char* setting, DiskCache& cache,
                                                 const std::string& key, const std::function<double(bool)>& measure) {
  const std::string_view s = setting ? setting : "";
  if (s == w.names[0] || s == w.names[1]) {
    const bool second = s == w.names[1];
    KILN_CHECK(!second || runtime::haveOneDnn(),
               "{}={}, but oneDNN was not found when kiln was built (Debian libdnnl-dev)", w.variable, s);
    return {second, fmt::format("{}={}", w.variable, s)};
  }
  KILN_CHECK(s.empty() || s == "auto", "{} must be {}, {} or auto (measure), got '{}'", w.variable, w.names[0],
             w.names[1], s);
  if (!runtime::haveOneDnn()) return {false, fmt::format("the only way in this build (no oneDNN): {}", w.labels[0])};
  if (!cache.enabled())
    return {false, fmt::format("{}, unmeasured: the disk cache that keeps the measurement is off", w.labels[0])};
  std::optional<FileLock> lock;
  std::error_code ignored;
  std::filesystem::create_directories(cache.directory(), ignored);
  lock.emplace(cache.directory() / w.lockName);
  double firstMs = 0, secondMs = 0;
  std::string when = " (kept in the disk cache)";
  const std::optional<std::string> kept = cache.load(key);
  std::istringstream in(kept.value_or(""));
  if (!(kept && in >> firstMs >> secondMs && firstMs > 0 && secondMs > 0)) {
    firstMs = measure(false);
    secondMs = measure(true);
    cache.store(key, fmt::format("{} {}", firstMs, secondMs));
    when = " (now)";
  }
  return {secondMs < firstMs, fmt::format("measured on this machine: {} {:.1f} ms, {} {:.1f} ms{}", w.labels[0],
                                          firstMs, w.labels[1], secondMs, when)};
}

constexpr TwoWays kBlasWays{"KILN_BLAS", {"openblas", "onednn"}, {"OpenBLAS", "oneDNN"}, "blas-choice.lock"};
constexpr TwoWays kBf16Ways{
    "KILN_BF16_MATMUL", {"f32", "onednn"}, {"via f32", "oneDNN bf16"}, "bf16-matmul-choice.lock"};
}  // namespace

BlasChoice chooseBlas(const char* setting, DiskCache& cache, const std::string& key,
                      const std::function<double(BlasLibrary)>& measure) {
  auto [second, how] = chooseByMeasurement(kBlasWays, setting, cache, key, [&](bool onednn) {
    return measure(onednn ? BlasLibrary::onednn : BlasLibrary::openblas);
  });
  if (how.rfind("the only way", 0) == 0) how = "the only CPU BLAS in this build (no oneDNN)";
  return {second ? BlasLibrary::onednn : BlasLibrary::openblas, std::move(how), runtime::HalfMatmul::viaF32, {}};
}

std::pair<runtime::HalfMatmul, std::string> chooseHalfMatmul(
    const char* setting, DiskCache& cache, const std::string& key,
    const std::function<double(runtime::HalfMatmul)>& measure) {
  auto [second, how] = chooseByMeasurement(kBf16Ways, setting, cache, key, [&](bool onednn) {
    return measure(onednn ? runtime::HalfMatmul::onednn : runtime::HalfMatmul::viaF32);
  });
  return {second ? runtime::HalfMatmul::onednn : runtime::HalfMatmul::viaF32, std::move(how)};
}

const BlasChoice& cpuBlasChoice() {
  // setDeterministic(true) pins what a measurement would pick (Note
  // [Determinism] in frontend/determinism.h): OpenBLAS, and bf16 products
  // via f32; an explicit KILN_BLAS or KILN_BF16_MATMUL stays.
  auto unset = [](const char* name) {
    const char* v = std::getenv(name);
    return !v || !*v || std::string_view(v) == "auto";
  };
  const bool deterministic = runtime::deterministic();
  const bool pinBlas = deterministic && unset("KILN_BLAS"), pinHalf = deterministic && unset("KILN_BF16_MATMUL");
  static const std::string pinnedBlas = "kiln::setDeterministic(true): OpenBLAS, not measured";
  static const std::string pinnedHalf = "kiln::setDeterministic(true): via f32, not measured";
  auto apply = [](const BlasChoice& c) -> const BlasChoice& {
    runtime::setBlasLibrary(c.library);
    runtime::setHalfMatmul(c.halfMatmul);
    return c;
  };
  if (pinBlas && pinHalf) {
    static const BlasChoice pinned{runtime::BlasLibrary::openblas, pinnedBlas, runtime::HalfMatmul::viaF32, pinnedHalf};
    return apply(pinned);
  }
  static const BlasChoice choice = [&apply] {
    const std::string key = fmt::format("blas-choice/v1/{}/{}/onednn {}", cpuTargetDescription(), runtime::blasInfo(),
                                        runtime::oneDnnVersion());
    // A cache of its own on the environment's directory, not the process's
    // instance: kiln-bench makes the choice in the user's cache before it
    // points the kernel cache at a private one.
    DiskCache cache(DiskCache::defaultDirectory());
    BlasChoice c = chooseBlas(std::getenv("KILN_BLAS"), cache, key, &runtime::timeBlasLibrary);
    runtime::setBlasLibrary(c.library);
    // bf16 products after the f32 library is set: converting uses it.
    const std::string bf16Key = fmt::format("bf16-matmul-choice/v1/{}/{}/onednn {}", cpuTargetDescription(),
                                            runtime::blasInfo(), runtime::oneDnnVersion());
    std::tie(c.halfMatmul, c.halfHow) =
        chooseHalfMatmul(std::getenv("KILN_BF16_MATMUL"), cache, bf16Key, &runtime::timeHalfMatmul);
    apply(c);
    return c;
  }();
  if (!deterministic) return choice;
  // Deterministic with one of the two forced: that one as forced, the other pinned.
  static const BlasChoice blasPinned = [] {
    BlasChoice c = choice;
    c.library = runtime::BlasLibrary::openblas;
    c.how = pinnedBlas;
    return c;
  }();
  static const BlasChoice halfPinned = [] {
    BlasChoice c = choice;
    c.halfMatmul = runtime::HalfMatmul::viaF32;
    c.halfHow = pinnedHalf;
    return c;
  }();
  return apply(pinBlas ? blasPinned : pinHalf ? halfPinned : choice);
}

}  // namespace kiln::codegen

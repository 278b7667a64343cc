// How kiln-bench measures: wall-clock medians of repeated calls, kernel
// launches per call, the first-call (trace + compile) time, a bit-for-bit
// check of compiled against eager, and the machine's copy bandwidth as the
// yardstick for effective bandwidth (docs/benchmarks.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "tools/kiln-bench/torch_compare.h"
#include "tools/kiln-bench/workload.h"

namespace kiln::bench {

/// How many timed calls to make of each side (eager, compiled).
struct RunPolicy {
  int repeats = 0;             ///< exact number of timed calls; 0: adaptive
  int minRuns = 5;             ///< adaptive: at least this many calls
  int maxRuns = 20;            ///< adaptive: at most this many calls
  double budgetSeconds = 1.0;  ///< adaptive: stop once this much time is spent (after minRuns)
  Device device = Device::cpu();  ///< where the workloads, their inputs and the yardstick run
  runtime::GraphReplay replay = runtime::GraphReplay::cheaper;  ///< the compiled side's graph replay
};

/// Wall-clock times in milliseconds of `fn` called under `policy`.
std::vector<double> timeCalls(const std::function<void()>& fn, const RunPolicy& policy);

double median(std::vector<double> v);

/// The yardstick: copy bandwidth of the device, measured next to each
/// workload. A buffer of `bytes` is copied to another by the device's own
/// device-to-device copy (on the CPU: memcpy over runtime::ThreadPool, the
/// pool kernels run on, each thread copying its range in 64 KiB pieces),
/// timed to its end on the device. GB/s (1e9 B/s) count read and write,
/// 2 * bytes per copy.
class CopyYardstick {
 public:
  /// Allocates both buffers on `device`, touches them (on the CPU from the
  /// copying threads) and copies once to warm up.
  CopyYardstick(size_t bytes, Device device);
  /// Times `count` more copies.
  void sample(int count);
  size_t bytes() const { return bytes_; }
  /// GB/s of each copy timed so far.
  std::vector<double> samplesGbps() const;

 private:
  void copy();
  size_t bytes_;
  Device device_;
  std::shared_ptr<runtime::Buffer> src_, dst_;
  std::vector<double> ms_;
};

struct Result {
  std::string name;
  double tolerance = 0;  ///< Workload::tolerance: 0 for bit for bit
  int64_t inputBytes = 0;
  int64_t outputBytes = 0;
  int eagerRuns = 0, compiledRuns = 0;
  double eagerMs = 0, compiledMs = 0;  ///< medians of the timed calls
  double eagerFirstMs = 0;             ///< first eager call (compiles one-op kernels)
  double compileMs = 0;                ///< first compiled call, cold: trace, passes, codegen, one run
  double kernelCompileMs = 0;          ///< of compileMs, time in the kernel compiler (LLVM)
  double compileMsCached = 0;          ///< first compiled call again, kernels from the disk cache (memory cache empty)
  double kernelCompileMsCached = 0;    ///< of compileMsCached, time loading kernels from the disk cache
  /// The allocator's peak during the timed calls of each side, above what
  /// was allocated when they began (inputs, state): what one call needs for
  /// its outputs and intermediates. -1: not measured.
  int64_t peakBytesEager = -1, peakBytesCompiled = -1;
  int64_t kernelsEager = 0, kernelsCompiled = 0;  ///< kernel launches per call
  int64_t copyBytes = 0;                          ///< size of the yardstick's copy
  std::vector<double> copySamplesGbps;            ///< each yardstick copy, GB/s
  double copyGbps = 0;                            ///< median of copySamplesGbps
  double flops = 0;                               ///< per call (Workload::flops); 0: not counted
  int64_t itemsPerCall = 0;                       ///< Workload::itemsPerCall; 0: not counted
  bool matches = false;                           ///< compiled output equals eager bit for bit
  /// Graph replay, on a device that records (docs/devices.md): the compiled
  /// side run again with replay off, its median and commands per call; and
  /// why the default compiled side was not replayed, when it was not.
  bool replayMeasured = false;
  bool replayed = false;
  double compiledNoReplayMs = NAN;
  int64_t kernelsCompiledNoReplay = 0;
  std::string replayOff;
  std::string mismatch;                           ///< where they differ, when they do
  bool hasCompiled = true;                        ///< Workload::compiles
  std::optional<TorchResult> torch;               ///< PyTorch's side, with --compare-torch

  int64_t bytes() const { return inputBytes + outputBytes; }
  double speedup() const { return eagerMs / compiledMs; }
  double eagerGbps() const { return static_cast<double>(bytes()) / (eagerMs * 1e6); }
  double compiledGbps() const { return static_cast<double>(bytes()) / (compiledMs * 1e6); }
  double percentOfCopy() const { return 100.0 * compiledGbps() / copyGbps; }
  double eagerGflops() const { return flops / (eagerMs * 1e6); }
  double compiledGflops() const { return flops / (compiledMs * 1e6); }
  /// Items (images) per second of each side; NaN where not counted.
  double eagerItemsPerSecond() const {
    return itemsPerCall > 0 ? static_cast<double>(itemsPerCall) * 1e3 / eagerMs : NAN;
  }
  double compiledItemsPerSecond() const {
    return itemsPerCall > 0 ? static_cast<double>(itemsPerCall) * 1e3 / compiledMs : NAN;
  }
  /// kiln eager / PyTorch eager (above 1: kiln is slower); NaN without both.
  double eagerVsTorch() const { return torch ? eagerMs / torch->eagerMs : NAN; }
  /// kiln compiled / torch.compile'd; NaN without both.
  double compiledVsTorch() const { return torch ? compiledMs / torch->compiledMs : NAN; }
};

/// Bytes of the tensors' storage (numel times item size), summed.
int64_t tensorBytes(const std::vector<Tensor>& tensors);

/// Runs one workload eagerly and compiled and measures both, with copy
/// samples before, between and after the timed calls.
/// The compiled side is compiled twice: cold (the in-memory kernel cache
/// and the disk cache emptied first), then from the disk cache (the
/// in-memory one emptied); kiln-bench points the disk cache at a directory
/// of its own (KILN_CACHE_DIR, see main.cpp), which this empties.
Result runWorkload(const Workload& w, const RunPolicy& policy);

}  // namespace kiln::bench

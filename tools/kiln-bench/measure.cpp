// The measurements of measure.h.
#include "tools/kiln-bench/measure.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "codegen/disk_cache.h"
#include "codegen/kernel_cache.h"
#include "runtime/buffer.h"
#include "runtime/executable.h"
#include "runtime/stream.h"
#include "runtime/thread_pool.h"

namespace kiln::bench {

namespace {
using Clock = std::chrono::steady_clock;

constexpr int64_t kMinCopyBytes = int64_t{64} << 20;
constexpr int kCopySamples = 7;  // per block; three blocks per workload

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The bytes of contiguous `t`, copied from its device.
std::vector<unsigned char> hostBytes(const Tensor& t) {
  std::vector<unsigned char> bytes(static_cast<size_t>(t.numel() * itemSize(t.dtype())));
  const runtime::Buffer& storage = *t.impl()->storage;
  storage.driver().copyDeviceToHost(bytes.data(),
                                    storage.ptr(static_cast<size_t>(t.storageOffset() * itemSize(t.dtype()))),
                                    bytes.size(), currentStream(t.device()).handle());
  return bytes;
}

// The first element where `compiled` is more than tolerance·(1 + max
// |eager|) from `eager` (a NaN matches a NaN only), or "".
std::string beyondTolerance(const Tensor& eager, const Tensor& compiled, double tolerance) {
  const std::vector<double> e = eager.to(DType::f64).toVector<double>();
  const std::vector<double> c = compiled.to(DType::f64).toVector<double>();
  double largest = 0;
  for (double x : e)
    if (std::isfinite(x)) largest = std::max(largest, std::abs(x));
  const double bound = tolerance * (1 + largest);
  for (size_t k = 0; k < e.size(); ++k)
    if (std::isnan(e[k]) != std::isnan(c[k]) || (!std::isnan(e[k]) && !(std::abs(e[k] - c[k]) <= bound)))
      return fmt::format("element {}: eager {:.9g} vs compiled {:.9g}, more than {:.3g} apart", k, e[k], c[k], bound);
  return "";
}

// Where two outputs differ, or "" when they are equal bit for bit (a NaN
// equals any NaN: kernels need not agree on NaN payloads) or, for a
// workload with a tolerance, within it.
std::string compareOutputs(const std::vector<Tensor>& eager, const std::vector<Tensor>& compiled, double tolerance) {
  if (eager.size() != compiled.size())
    return fmt::format("eager returned {} tensors, compiled {}", eager.size(), compiled.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    const Tensor &e = eager[i], &c = compiled[i];
    if (e.type().str() != c.type().str()) return fmt::format("output {}: eager {} vs compiled {}", i, e.str(), c.str());
    if (tolerance > 0) {
      const std::string far = beyondTolerance(e, c, tolerance);
      if (!far.empty()) return fmt::format("output {}: {}", i, far);
      continue;
    }
    const size_t n = static_cast<size_t>(e.numel()), item = itemSize(e.dtype());
    const std::vector<unsigned char> eagerBytes = hostBytes(e), compiledBytes = hostBytes(c);
    const unsigned char *a = eagerBytes.data(), *b = compiledBytes.data();
    if (n == 0 || std::memcmp(a, b, n * item) == 0) continue;
    size_t mismatches = 0, first = n;
    for (size_t k = 0; k < n; ++k) {
      bool same = std::memcmp(a + k * item, b + k * item, item) == 0;
      if (!same && e.dtype() == DType::f32) {
        float x, y;
        std::memcpy(&x, a + k * item, sizeof x);
        std::memcpy(&y, b + k * item, sizeof y);
        same = std::isnan(x) && std::isnan(y);
      }
      if (!same && mismatches++ == 0) first = k;
    }
    if (mismatches == 0) continue;
    std::string at = fmt::format("element {}", first);
    if (e.dtype() == DType::f32) {
      float x, y;
      std::memcpy(&x, a + first * item, sizeof x);
      std::memcpy(&y, b + first * item, sizeof y);
      at += fmt::format(": eager {:.9g} (0x{:08x}) vs compiled {:.9g} (0x{:08x})", x, std::bit_cast<uint32_t>(x), y,
                        std::bit_cast<uint32_t>(y));
    }
    return fmt::format("output {}: {} of {} elements differ, first at {}", i, mismatches, n, at);
  }
  return "";
}
}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::vector<double> timeCalls(const std::function<void()>& call, const RunPolicy& policy) {
  // A call ends when its work has run on the device, not when it is enqueued.
  const Stream stream = currentStream(policy.device);
  auto fn = [&] {
    call();
    stream.synchronize();
  };
  std::vector<double> times;
  const auto start = Clock::now();
  for (;;) {
    const int runs = static_cast<int>(times.size());
    if (policy.repeats > 0) {
      if (runs >= policy.repeats) break;
    } else if (runs >= policy.maxRuns || (runs >= policy.minRuns && msSince(start) >= policy.budgetSeconds * 1e3)) {
      break;
    }
    const auto t0 = Clock::now();
    fn();
    times.push_back(msSince(t0));
  }
  return times;
}

CopyYardstick::CopyYardstick(size_t bytes, Device device)
    : bytes_(bytes),
      device_(device),
      src_(runtime::allocateBuffer(device, bytes)),
      dst_(runtime::allocateBuffer(device, bytes)) {
  // Touch every page from the threads that will copy it (the driver's fill
  // splits like its copy), so that no timed copy pays for a page fault.
  const unsigned char one = 1, zero = 0;
  src_->driver().fill(src_->ptr(), bytes, &one, 1, currentStream(src_->device()).handle());
  dst_->driver().fill(dst_->ptr(), bytes, &zero, 1, currentStream(dst_->device()).handle());
  copy();
}

void CopyYardstick::copy() {
  // The device's own device-to-device copy (on the CPU: 64 KiB memcpy calls
  // split at whole pages over the pool, runtime/cpu_device.cpp).
  dst_->driver().copyDeviceToDevice(dst_->ptr(), src_->ptr(), bytes_, currentStream(dst_->device()).handle());
  currentStream(device_).synchronize();
}

void CopyYardstick::sample(int count) {
  for (int i = 0; i < count; ++i) {
    const auto t0 = Clock::now();
    copy();
    ms_.push_back(msSince(t0));
  }
}

std::vector<double> CopyYardstick::samplesGbps() const {
  std::vector<double> out;
  for (double ms : ms_) out.push_back(2.0 * static_cast<double>(bytes_) / (ms * 1e6));
  return out;
}

int64_t tensorBytes(const std::vector<Tensor>& tensors) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel() * static_cast<int64_t>(itemSize(t.dtype()));
  return total;
}

Result runWorkload(const Workload& w, const RunPolicy& policy) {
  Result r;
  r.name = w.name;
  r.tolerance = w.tolerance;
  r.flops = w.flops;
  r.itemsPerCall = w.itemsPerCall;
  // Inputs, models and their state are made on the device (its factories'
  // default), and every call is timed to its end there.
  DeviceGuard onDevice(policy.device);
  const Stream stream = currentStream(policy.device);
  const std::vector<Tensor> inputs = w.makeInputs();
  r.inputBytes = tensorBytes(inputs);
  // The copy is the size of the largest input, and at least 64 MiB: well
  // past the caches, like the workloads.
  int64_t largest = 0;
  for (const Tensor& t : inputs) largest = std::max(largest, tensorBytes({t}));
  CopyYardstick yardstick(static_cast<size_t>(std::max(kMinCopyBytes, largest)), policy.device);

  // Eager: the first call compiles the one-op kernels it has not seen yet.
  // Random ops draw from the default generator: the compiled first calls
  // start from the same state, so that they draw the same masks.
  Generator& gen = defaultGenerator();
  const uint64_t seed = gen.seed(), offset = gen.offset();
  if (w.resetState) w.resetState();
  auto eager = [&] { return w.fn(inputs); };
  auto t0 = Clock::now();
  std::vector<Tensor> expected = eager();
  stream.synchronize();
  r.eagerFirstMs = msSince(t0);
  r.outputBytes = tensorBytes(expected);

  // Compiled: the first call traces, runs the passes, compiles and runs once.
  // The engine of kiln::compile(w.fn), with kiln::compile's default options but
  // graph replay as --replay says.
  // CompiledFunction::operator() takes tensors one by one and cannot yet call
  // a function of one std::vector<Tensor>, which models are; CompiledFunction
  // is a thin typed wrapper around this same call. An eager-only workload
  // (Workload::compiles false) has no compiled side: its numbers stay NaN.
  //
  // It is compiled twice, by a new engine each time (no program cache):
  // cold, with both kernel caches empty, then with the in-memory one empty
  // and the disk cache holding what the cold compile stored. The second
  // engine is the one timed. Both results are compared with eager's.
  std::optional<kiln::detail::CompileEngine> engine;
  r.hasCompiled = w.compiles;
  r.compiledMs = r.compileMs = r.kernelCompileMs = r.compileMsCached = r.kernelCompileMsCached = NAN;
  if (w.compiles) {
    codegen::KernelCache& kernels = codegen::KernelCache::instance();
    for (const bool cold : {true, false}) {
      kernels.clear();
      if (cold) codegen::DiskCache::instance().clear();
      if (w.resetState) w.resetState();
      engine.emplace(w.fn, CompileOptions{.graphReplay = policy.replay});
      const double kernelMsBefore = kernels.stats().compileMs;
      gen.manualSeed(seed);
      gen.setOffset(offset);
      t0 = Clock::now();
      std::vector<Tensor> got = engine->call(inputs);
      stream.synchronize();
      const double ms = msSince(t0);
      if (cold) {
        r.compileMs = ms;
        r.kernelCompileMs = kernels.stats().compileMs - kernelMsBefore;
      } else {
        r.compileMsCached = ms;
        r.kernelCompileMsCached = kernels.stats().compileMs - kernelMsBefore;
      }
      if (r.mismatch.empty()) r.mismatch = compareOutputs(expected, got, w.tolerance);
    }
  }
  r.matches = r.mismatch.empty();
  expected.clear();
  auto compiled = [&] { return engine->call(inputs); };

  // Warm-up calls, which also count the kernels one call launches.
  int64_t before = runtime::kernelLaunchCount();
  eager();
  r.kernelsEager = runtime::kernelLaunchCount() - before;
  if (engine) {
    before = runtime::kernelLaunchCount();
    compiled();
    r.kernelsCompiled = runtime::kernelLaunchCount() - before;
  }

  // Timed calls, each side's allocator peak measured over its own: reset
  // before, read after, less what was allocated before (each call's result
  // is dropped before the next begins).
  runtime::DeviceInterface& device = runtime::deviceInterface(policy.device);
  auto timeWithPeak = [&](const std::function<void()>& call, int64_t& peak) {
    device.resetPeakMemoryStats();
    const int64_t base = device.memoryStats().allocatedBytes;
    std::vector<double> times = timeCalls(call, policy);
    peak = device.memoryStats().peakAllocatedBytes - base;
    return times;
  };
  // Memory bandwidth on a shared machine drifts over seconds, so the copy is
  // sampled around and between the timed loops, not once per run.
  yardstick.sample(kCopySamples);
  std::vector<double> eagerTimes = timeWithPeak([&] { eager(); }, r.peakBytesEager);
  yardstick.sample(kCopySamples);
  if (engine) {
    std::vector<double> compiledTimes = timeWithPeak([&] { compiled(); }, r.peakBytesCompiled);
    yardstick.sample(kCopySamples);
    r.compiledRuns = static_cast<int>(compiledTimes.size());
    r.compiledMs = median(compiledTimes);
  }
  // Graph replay: the same program run kernel by kernel, for the per-call
  // cost replay saves (a second engine: same kernels, from the cache).
  if (engine && device.canRecord(nullptr)) {
    const runtime::ReplayInfo info = engine->lastReplay();
    r.replayMeasured = true;
    r.replayed = info.replays > 0;
    r.replayOff = info.off;
    kiln::detail::CompileEngine direct(w.fn, CompileOptions{.graphReplay = runtime::GraphReplay::off});
    direct.call(inputs);
    before = runtime::kernelLaunchCount();
    direct.call(inputs);
    r.kernelsCompiledNoReplay = runtime::kernelLaunchCount() - before;
    r.compiledNoReplayMs = median(timeCalls([&] { direct.call(inputs); }, policy));
  }
  r.copyBytes = static_cast<int64_t>(yardstick.bytes());
  r.copySamplesGbps = yardstick.samplesGbps();
  r.copyGbps = median(r.copySamplesGbps);
  r.eagerRuns = static_cast<int>(eagerTimes.size());
  r.eagerMs = median(eagerTimes);
  return r;
}

}  // namespace kiln::bench

// Timing in every rank (tools/kiln-bench-dist/timing.h).
#include "tools/kiln-bench-dist/timing.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace kiln::bench::dist {

std::vector<double> timeCalls(int warmup, int n, const std::function<void()>& call) {
  for (int i = 0; i < warmup; ++i) call();
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return ms;
}

std::vector<double> slowestRank(const kiln::dist::ProcessGroup& group, const std::vector<double>& samplesMs) {
  if (samplesMs.empty() || group.size() == 1) return samplesMs;
  Tensor t = fromVector(samplesMs, {static_cast<int64_t>(samplesMs.size())});
  group.allReduce(t, kiln::dist::ReduceOp::max).wait();
  return t.toVector<double>();
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double algbwGbps(int64_t bytes, double ms) { return static_cast<double>(bytes) / (ms * 1e-3) / 1e9; }

double busbwGbps(int64_t bytes, double ms, int processes) {
  return algbwGbps(bytes, ms) * 2.0 * (processes - 1) / processes;
}

}  // namespace kiln::bench::dist

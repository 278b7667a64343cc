// Timing in every rank: per-call wall-clock samples, the slowest rank's
// time per call (a collective is as slow as its last rank), the median,
// and NCCL's bandwidth formulas.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "frontend/distributed.h"

namespace kiln::bench::dist {

/// Runs `call` `warmup` times untimed, then `n` times, each timed: ms.
std::vector<double> timeCalls(int warmup, int n, const std::function<void()>& call);
/// For each sample, the largest over the group's ranks (an all-reduce max).
std::vector<double> slowestRank(const kiln::dist::ProcessGroup& group, const std::vector<double>& samplesMs);
double median(std::vector<double> v);
/// NCCL's algorithm bandwidth, bytes / time, in GB/s (1e9 bytes).
double algbwGbps(int64_t bytes, double ms);
/// NCCL's bus bandwidth of an all-reduce: algbw * 2 (n - 1) / n.
double busbwGbps(int64_t bytes, double ms, int processes);

}  // namespace kiln::bench::dist

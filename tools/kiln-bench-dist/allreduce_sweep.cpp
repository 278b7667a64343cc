// The all-reduce sweep of one job of ranks (worker.h): for each size, four
// sides in the same processes, one after the other and back (A B C D, then
// D C B A, half the timed calls each, so that a drift of the machine
// weighs on all alike):
//   kiln            kiln::dist::ProcessGroup (gloo), KILN_DIST_DEBUG=on, the default
//   kiln_debug_off  the same with the signature check off
//   gloo            Gloo's algorithm class built once, run() per call
//   gloo_allreduce  gloo::allreduce with options made per call (up to 1 MiB)
// Each call's time is the slowest rank's; a side's figure is the median.
#include <fmt/format.h>

#include <functional>
#include <iostream>
#include <optional>

#include "frontend/kiln.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"
#include "tools/kiln-bench-dist/gloo_loop.h"
#include "tools/kiln-bench-dist/timing.h"
#include "tools/kiln-bench-dist/worker.h"

namespace kiln::bench::dist {

namespace {

// gloo::allreduce is measured up to this size only: above it, on this
// 2-core VM, its ring took seconds per call (16 MiB at 4 processes: 6 s,
// against 55 ms for AllreduceRingChunked), which would make the run hours.
constexpr int64_t kOptionsApiMaxBytes = int64_t{1} << 20;

struct Side {
  std::string name;
  std::function<void()> call;
  std::vector<double> samples;
};

kiln::dist::ProcessGroup makeGroup(const Rank& me, const std::string& prefix, kiln::dist::DebugLevel debug,
                                   std::chrono::milliseconds timeout) {
  kiln::dist::Options o;
  o.hostname = "127.0.0.1";  // loopback only
  o.timeout = timeout;
  o.debug = debug;
  return kiln::dist::ProcessGroup::create("gloo", std::make_shared<runtime::dist::PrefixStore>(prefix, me.store),
                                          me.rank, me.size, o);
}

}  // namespace

nlohmann::json allReduceSweep(const Options& options, const Rank& me) {
  const std::chrono::milliseconds timeout = std::chrono::seconds(options.callTimeoutS);
  kiln::dist::ProcessGroup on = makeGroup(me, "bench/kiln", kiln::dist::DebugLevel::on, timeout);
  kiln::dist::ProcessGroup off = makeGroup(me, "bench/kiln-debug-off", kiln::dist::DebugLevel::off, timeout);
  std::string glooMissing;
  std::optional<GlooLoop> gloo;
  if (glooLoopAvailable(&glooMissing))
    gloo.emplace(std::make_shared<runtime::dist::PrefixStore>("bench/gloo", me.store), me.rank, me.size, timeout);

  nlohmann::json rows = nlohmann::json::array();
  for (const int64_t bytes : sizes(options)) {
    const int64_t count = bytes / 4;
    const int iters = itersFor(options, bytes);
    const int warmup = bytes > (int64_t{16} << 20) ? std::min(options.warmup, 1) : options.warmup;
    Tensor a = zeros({count}), b = zeros({count});
    std::vector<float> host(static_cast<size_t>(count), 0.0f);
    std::vector<Side> sides;
    sides.push_back({"kiln", [&] { on.allReduce(a).wait(); }, {}});
    sides.push_back({"kiln_debug_off", [&] { off.allReduce(b).wait(); }, {}});
    if (gloo) {
      gloo->prepare(host.data(), count);
      sides.push_back({"gloo", [&] { gloo->runAlgorithm(); }, {}});
      if (bytes <= kOptionsApiMaxBytes) sides.push_back({"gloo_allreduce", [&] { gloo->runAllreduce(); }, {}});
    }
    if (me.rank == 0)
      std::cerr << fmt::format("kiln-bench-dist: all-reduce {} bytes at {} processes\n", bytes, me.size);
    const int first = iters / 2, second = iters - first;
    for (Side& s : sides) s.samples = timeCalls(warmup, first, s.call);
    for (auto it = sides.rbegin(); it != sides.rend(); ++it) {
      std::vector<double> more = timeCalls(0, second, it->call);
      it->samples.insert(it->samples.end(), more.begin(), more.end());
    }
    nlohmann::json row;
    row["name"] = "all_reduce";
    row["processes"] = me.size;
    row["bytes"] = bytes;
    row["dtype"] = "f32";
    row["iters"] = iters;
    row["warmup"] = warmup;
    for (const char* side : {"gloo_allreduce_ms", "gloo_allreduce_algbw_gbps", "gloo_allreduce_busbw_gbps"})
      row[side] = nullptr;
    for (Side& s : sides) {
      const double ms = median(slowestRank(on, s.samples));
      row[s.name + "_ms"] = ms;
      row[s.name + "_algbw_gbps"] = algbwGbps(bytes, ms);
      row[s.name + "_busbw_gbps"] = busbwGbps(bytes, ms, me.size);
    }
    if (gloo) {
      row["gloo_algorithm"] = gloo->algorithmName();
    } else {
      row["gloo_error"] = glooMissing;
    }
    rows.push_back(row);
  }
  // Gloo closes its sockets with a reset: a barrier before any context goes
  // (DIST_NOTES, "Exit race").
  on.barrier().wait();
  gloo.reset();
  off.shutdown();
  on.shutdown();
  for (auto& row : rows) row["threads"] = runtime::ThreadPool::instance().numThreads();
  return rows;
}

}  // namespace kiln::bench::dist

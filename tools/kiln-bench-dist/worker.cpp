// The ranks' side of kiln-bench-dist (tools/kiln-bench-dist/worker.h).
#include "tools/kiln-bench-dist/worker.h"

#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "runtime/dist_rendezvous.h"
#include "runtime/error.h"

namespace kiln::bench::dist {

int runWorker(const Options& options) {
  const runtime::dist::RendezvousInfo info = runtime::dist::readEnvironment();
  const std::chrono::milliseconds timeout = std::chrono::seconds(options.callTimeoutS);
  Rank me{runtime::dist::rendezvous(info, "env://", timeout), info.rank, info.worldSize};
  nlohmann::json rows = options.workerMode == "ddp" ? ddpStep(options, me) : allReduceSweep(options, me);
  if (me.rank != 0) return 0;
  std::ofstream out(options.resultPath);
  out << rows.dump(1) << "\n";
  out.close();
  KILN_CHECK(static_cast<bool>(out), "kiln-bench-dist: cannot write {}", options.resultPath);
  return 0;
}

}  // namespace kiln::bench::dist

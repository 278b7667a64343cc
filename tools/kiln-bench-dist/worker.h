// The ranks' side of kiln-bench-dist (--dist-worker MODE): each rank reads
// its rank and world from the environment the launcher set, meets the
// others in the launcher's TCP store, measures, and rank 0 writes the rows
// (a JSON array) to --result.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/dist_store.h"
#include "tools/kiln-bench-dist/options.h"

namespace kiln::bench::dist {

/// The store of this job and this rank's place in it.
struct Rank {
  std::shared_ptr<runtime::dist::Store> store;
  int rank = 0;
  int size = 1;
};

/// All-reduce at every size: kiln's group with KILN_DIST_DEBUG on and off,
/// Gloo's algorithm loop and gloo::allreduce, interleaved. Rows for rank 0.
nlohmann::json allReduceSweep(const Options& options, const Rank& me);
/// The DDP step of the MLP, and with 2 or more ranks its compute and its
/// communication alone. One row for rank 0.
nlohmann::json ddpStep(const Options& options, const Rank& me);

/// The whole worker: meets the others, runs the mode, writes the result.
/// Returns the exit status.
int runWorker(const Options& options);

}  // namespace kiln::bench::dist

// Starting the ranks of one measurement: N copies of a command on this
// machine, with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
// MASTER_PORT), through kiln-run's worker group (tools/kiln-run/workers.h:
// process groups of their own, prefixed output, PR_SET_PDEATHSIG). Every
// job is bounded: a rank that fails stops the others, a job past its
// timeout is stopped, and every child is reaped on every path.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tools/kiln-run/workers.h"

namespace kiln::bench::dist {

struct Job {
  std::string what;  ///< for messages: "all-reduce at 2 processes"
  std::vector<std::string> command;
  int nprocs = 1;
  /// Serve kiln's TCP store on 127.0.0.1 (a port the OS chooses) and make
  /// every rank its client (KILN_USE_AGENT_STORE=1); otherwise MASTER_PORT is
  /// a free port for rank 0 to serve on (torch.distributed).
  bool serveStore = true;
  std::chrono::seconds timeout{1800};
  std::map<std::string, std::string> env;  ///< added to this process's environment
};

/// Runs `job` to its end. kiln::Error when a rank fails, the job runs past
/// its timeout, or a signal (INT, TERM, HUP) arrives; the ranks are stopped
/// and reaped first.
void runJob(const Job& job, run::SignalWatcher& signals);

}  // namespace kiln::bench::dist

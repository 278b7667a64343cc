// kiln-run's agent (docs/distributed.md, "The launcher"): one per node, it
// runs rounds of the job's workers until they all succeed or a failure
// leaves no restart. The agent of node 0 serves the job's TCP store at the
// rendezvous endpoint; every agent, and every worker (KILN_USE_AGENT_STORE=1),
// is its client. Agents meet there under "kiln-run/": they check that they
// were started alike, join each round, announce the first failure of a
// round (the first to write it wins, so all agree on one exit code), and
// say when their workers are done.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace kiln::run {

struct LaunchOptions {
  std::vector<std::string> command;
  int nprocPerNode = 1;
  int nnodes = 1;
  int nodeRank = 0;
  std::string rdzvHost = "127.0.0.1";
  int rdzvPort = 0;   // 0: the OS chooses (node 0 only; printed)
  std::string runId;  // empty: made up by the first agent
  int maxRestarts = 0;
  std::chrono::milliseconds monitorInterval{100};
  std::chrono::milliseconds gracePeriod{30000};   // SIGTERM to SIGKILL
  std::chrono::milliseconds rdzvTimeout{600000};  // agents joining a round
  std::string logDir;
  bool tee = false;  // with logDir: the console too
};

/// Runs the job on this node; returns kiln-run's exit code: 0 when every
/// worker of every node succeeded, else the failing worker's code (128 +
/// signal for a signal; 128 + the signal kiln-run got when it was stopped),
/// 1 for an error of kiln-run's own.
int runAgent(const LaunchOptions& options);

}  // namespace kiln::run

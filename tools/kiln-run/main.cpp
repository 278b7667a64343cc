// kiln-run: starts the processes of a distributed kiln job, as torchrun
// does (docs/distributed.md, "The launcher"):
//
//   kiln-run --nproc-per-node 2 -- ./train --epochs 3
//   kiln-run --nnodes 2 --node-rank 0 --rdzv-endpoint node0:29400 --nproc-per-node 4 ./train
//
// Each worker gets RANK, LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT, KILN_RESTART_COUNT,
// KILN_MAX_RESTARTS, KILN_RUN_ID and KILN_USE_AGENT_STORE=1; its output
// lines come out prefixed with "[rank N]: ". When a worker fails the others
// are stopped, and the group restarts (--max-restarts) or kiln-run exits
// with the failing worker's code after printing its last lines.
#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>
#include <string>

#include "tools/kiln-run/agent.h"

namespace {

std::chrono::milliseconds seconds(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0)); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln-run: start the workers of a distributed kiln job on this node (torchrun's contract)"};
  kiln::run::LaunchOptions o;
  app.add_option("--nproc-per-node,--nproc_per_node", o.nprocPerNode, "workers on this node")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--nnodes", o.nnodes, "nodes in the job, each running kiln-run")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--node-rank,--node_rank", o.nodeRank, "this node's rank, 0..nnodes-1 (node 0 serves the store)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::string endpoint;
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", endpoint,
                 "host:port of the job's store, served by node 0's kiln-run (default 127.0.0.1 and a port the OS "
                 "chooses, with one node)");
  app.add_option("--rdzv-id,--rdzv_id", o.runId, "the job's id, KILN_RUN_ID (default: made up)");
  double rdzvTimeout = 600;
  app.add_option("--rdzv-timeout", rdzvTimeout, "seconds to wait for the other nodes at each (re)start")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-restarts,--max_restarts", o.maxRestarts, "restarts of the whole group after a failure")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  double monitor = 0.1, grace = 30;
  app.add_option("--monitor-interval,--monitor_interval", monitor, "seconds between checks of the workers")
      ->check(CLI::Range(0.001, 60.0))
      ->capture_default_str();
  app.add_option("--grace-period", grace, "seconds between SIGTERM and SIGKILL when the workers are stopped")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto* logDir = app.add_option("--log-dir", o.logDir,
                                "write each worker's output to DIR/attempt_<restart>/rank_<rank>/{stdout,stderr}.log "
                                "instead of the console");
  app.add_flag("--tee", o.tee, "with --log-dir: the console too")->needs(logDir);
  app.footer(
      "Usage: kiln-run [options] [--] program [args...]\n"
      "Everything from the program on is the program's, options included.");
  // Everything from the first argument that is not kiln-run's goes to the
  // program (CLI11's remaining()); an unknown option before it is an error.
  app.prefix_command();
  try {
    app.parse(argc, argv);
    o.command = app.remaining();
    if (!o.command.empty() && o.command[0] == "--")
      o.command.erase(o.command.begin());
    else if (!o.command.empty() && o.command[0].size() > 1 && o.command[0][0] == '-')
      throw CLI::ExtrasError({o.command[0]});
    if (o.command.empty()) throw CLI::RequiredError("the program to run (kiln-run [options] [--] program [args...])");
    if (o.nodeRank >= o.nnodes) throw CLI::ValidationError("--node-rank", "must be below --nnodes");
    if (!endpoint.empty()) {
      const size_t colon = endpoint.rfind(':');
      if (colon == std::string::npos || colon == 0)
        throw CLI::ValidationError("--rdzv-endpoint", "expected host:port, got '" + endpoint + "'");
      o.rdzvHost = endpoint.substr(0, colon);
      if (o.rdzvHost.size() > 2 && o.rdzvHost.front() == '[') o.rdzvHost = o.rdzvHost.substr(1, o.rdzvHost.size() - 2);
      const std::string port = endpoint.substr(colon + 1);
      auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), o.rdzvPort);
      if (ec != std::errc() || end != port.data() + port.size() || o.rdzvPort < 0 || o.rdzvPort > 65535)
        throw CLI::ValidationError("--rdzv-endpoint", "the port of '" + endpoint + "' is not 0..65535");
    } else if (o.nnodes > 1) {
      throw CLI::ValidationError("--rdzv-endpoint", "is needed with --nnodes above 1 (node 0's host:port)");
    }
    if (o.nodeRank > 0 && o.rdzvPort == 0)
      throw CLI::ValidationError("--rdzv-endpoint", "needs the port node 0 serves on (0 only for node 0)");
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.rdzvTimeout = seconds(rdzvTimeout);
  o.monitorInterval = seconds(monitor);
  o.gracePeriod = seconds(grace);
  try {
    return kiln::run::runAgent(o);
  } catch (const std::exception& e) {
    std::cerr << "kiln-run: error: " << e.what() << "\n";
    return 1;
  }
}

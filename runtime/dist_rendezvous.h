// How a process learns its place in a job and meets the others
// (docs/distributed.md, "Rendezvous and the environment"). readEnvironment()
// reads the rank and world from what the launcher set: kiln-run and
// torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, ...), else mpirun (OMPI_COMM_WORLD_*), else Slurm's srun
// (SLURM_PROCID, ...). rendezvous() then makes the store the ranks share:
// a TCP store that rank 0 serves, or the launcher's agent store
// (KILN_USE_AGENT_STORE=1), or a file store ("file:///path"), under a
// prefix per restart, and waits there until every rank has joined.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/dist_store.h"

namespace kiln::runtime::dist {

/// Where this process stands in the job.
struct RendezvousInfo {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;       // among the processes of this node
  int localWorldSize = 1;  // processes on this node
  int groupRank = 0;       // this node's rank (GROUP_RANK; Slurm: SLURM_NODEID)
  std::string masterAddr = "127.0.0.1";
  uint16_t masterPort = 29500;
  int restartCount = 0;  // KILN_RESTART_COUNT: how often the launcher restarted the job
  /// Where it came from: "kiln-run" (KILN_RUN_ID set), "env" (RANK and
  /// WORLD_SIZE set by another launcher, torchrun, or by hand), "mpirun",
  /// "slurm", or "default" (nothing set: a single process).
  std::string source = "default";
  bool useAgentStore = false;  // KILN_USE_AGENT_STORE=1: the launcher serves the store
  std::string runId;           // KILN_RUN_ID
};

/// The port kiln uses when MASTER_PORT is not set (PyTorch's).
inline constexpr uint16_t kDefaultMasterPort = 29500;

/// Reads the environment of this process, in order of precedence: RANK and
/// WORLD_SIZE (with MASTER_ADDR and MASTER_PORT required, LOCAL_RANK and
/// LOCAL_WORLD_SIZE defaulting to one node), OMPI_COMM_WORLD_RANK and
/// OMPI_COMM_WORLD_SIZE, SLURM_PROCID and SLURM_NTASKS; with none of them, a
/// world of one process. kiln::Error naming the variable that is missing or
/// invalid ("rendezvous: RANK is 'x', expected an integer").
RendezvousInfo readEnvironment();

/// The store of the job, after every rank of `info` has joined it (each sets
/// a key and waits for all others', up to `timeout`: kiln::Error naming the
/// ranks missing and the address otherwise). `initMethod`:
///   "env://"          MASTER_ADDR:MASTER_PORT from `info`; rank 0 serves,
///                     unless info.useAgentStore (the launcher serves); a
///                     world of one process gets a HashStore (no port)
///   "tcp://host:port" that address; rank 0 serves
///   "file:///path"    a FileStore at /path (ranks of one machine)
/// The store returned is a PrefixStore over the job's store, one prefix per
/// restart (keys are write-once for Gloo); for rank 0 it owns the server.
std::shared_ptr<Store> rendezvous(const RendezvousInfo& info, const std::string& initMethod = "env://",
                                  std::chrono::milliseconds timeout = kDefaultTimeout);

}  // namespace kiln::runtime::dist

// The environment of a launched process and the store its job meets in
// (runtime/dist_rendezvous.h).
#include "runtime/dist_rendezvous.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "runtime/dist_file_store.h"
#include "runtime/dist_socket.h"
#include "runtime/dist_tcp_store.h"
#include "runtime/error.h"

namespace kiln::runtime::dist {

namespace {

/// A variable's value; empty counts as unset.
const char* var(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int64_t parseInt(const char* name, const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  KILN_CHECK(ec == std::errc() && ptr == end, "rendezvous: {} is '{}', expected an integer", name, text);
  KILN_CHECK(v >= min && v <= max, "rendezvous: {} is {}, expected {}..{}", name, v, min, max);
  return v;
}

int intVar(const char* name, int64_t min, int64_t max, int fallback) {
  const char* v = var(name);
  return v ? static_cast<int>(parseInt(name, v, min, max)) : fallback;
}

/// A variable that must be there because `because` is.
int requiredInt(const char* name, const char* because, int64_t min, int64_t max) {
  KILN_CHECK(var(name), "rendezvous: {} is not set ({} is)", name, because);
  return intVar(name, min, max, 0);
}

constexpr int64_t kMaxWorld = 1 << 24;

/// The first host of a Slurm node list: "node[03-05,9],gpu1" -> "node03",
/// "rack[1-2]-n[7-8]" -> "rack1-n7".
std::string firstSlurmHost(const std::string& list) {
  std::string host;
  size_t i = 0;
  while (i < list.size() && list[i] != ',') {
    if (list[i] != '[') {
      host += list[i++];
      continue;
    }
    const size_t close = list.find(']', i);
    if (close == std::string::npos) break;
    const std::string ranges = list.substr(i + 1, close - i - 1);
    host += ranges.substr(0, ranges.find_first_of(",-"));
    i = close + 1;
  }
  return host;
}

/// This node's task count from a Slurm tasks-per-node list: "2(x3),1" is
/// 2, 2, 2, 1 for nodes 0..3.
int slurmTasksOnNode(const char* name, const std::string& text, int node) {
  int index = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find(',', i);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(i, end - i);
    const size_t paren = item.find("(x");
    const int64_t count = parseInt(name, item.substr(0, paren), 1, kMaxWorld);
    int64_t repeat = 1;
    if (paren != std::string::npos) {
      KILN_CHECK(item.back() == ')', "rendezvous: {} is '{}', expected counts like 2(x3),1", name, text);
      repeat = parseInt(name, item.substr(paren + 2, item.size() - paren - 3), 1, kMaxWorld);
    }
    if (node < index + repeat) return static_cast<int>(count);
    index += static_cast<int>(repeat);
    i = end + 1;
  }
  fail("rendezvous: {} is '{}', which lists no node {}", name, text, node);
}

void readMaster(RendezvousInfo& info) {
  if (const char* a = var("MASTER_ADDR")) info.masterAddr = a;
  info.masterPort = static_cast<uint16_t>(intVar("MASTER_PORT", 1, 65535, kDefaultMasterPort));
}

void validate(RendezvousInfo& info, const char* rankVar, const char* worldVar, const char* localVar,
              const char* localWorldVar) {
  KILN_CHECK(info.rank < info.worldSize, "rendezvous: {} is {}, not below {} {}", rankVar, info.rank, worldVar,
             info.worldSize);
  KILN_CHECK(info.localRank < info.localWorldSize, "rendezvous: {} is {}, not below {} {}", localVar, info.localRank,
             localWorldVar, info.localWorldSize);
  KILN_CHECK(info.localWorldSize <= info.worldSize, "rendezvous: {} is {}, more than {} {}", localWorldVar,
             info.localWorldSize, worldVar, info.worldSize);
}

}  // namespace

RendezvousInfo readEnvironment() {
  RendezvousInfo info;
  info.restartCount = intVar("KILN_RESTART_COUNT", 0, INT32_MAX, 0);
  if (const char* id = var("KILN_RUN_ID")) info.runId = id;
  if (const char* agent = var("KILN_USE_AGENT_STORE")) info.useAgentStore = std::string(agent) == "1";

  if (var("RANK") || var("WORLD_SIZE")) {
    // kiln-run, torchrun, or by hand.
    info.source = info.runId.empty() ? "env" : "kiln-run";
    info.rank = requiredInt("RANK", "WORLD_SIZE", 0, kMaxWorld);
    info.worldSize = requiredInt("WORLD_SIZE", "RANK", 1, kMaxWorld);
    info.localRank = intVar("LOCAL_RANK", 0, kMaxWorld, info.rank);
    info.localWorldSize = intVar("LOCAL_WORLD_SIZE", 1, kMaxWorld, info.worldSize);
    info.groupRank = intVar("GROUP_RANK", 0, kMaxWorld, 0);
    if (info.worldSize > 1) {
      KILN_CHECK(var("MASTER_ADDR"),
                 "rendezvous: MASTER_ADDR is not set (RANK and WORLD_SIZE are): set it to "
                 "the host of rank 0");
      KILN_CHECK(var("MASTER_PORT"),
                 "rendezvous: MASTER_PORT is not set (RANK and WORLD_SIZE are): set it to "
                 "a free port on the host of rank 0");
    }
    readMaster(info);
    validate(info, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  } else if (var("OMPI_COMM_WORLD_RANK")) {
    info.source = "mpirun";
    info.rank = requiredInt("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", 0, kMaxWorld);
    info.worldSize = requiredInt("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", 1, kMaxWorld);
    info.localRank = intVar("OMPI_COMM_WORLD_LOCAL_RANK", 0, kMaxWorld, info.rank);
    info.localWorldSize = intVar("OMPI_COMM_WORLD_LOCAL_SIZE", 1, kMaxWorld, info.worldSize);
    // mpirun's default mapping fills one node after the other.
    info.groupRank = info.rank / info.localWorldSize;
    KILN_CHECK(var("MASTER_ADDR") || info.localWorldSize == info.worldSize,
               "rendezvous: MASTER_ADDR is not set: mpirun runs the {} ranks on several nodes and names no host "
               "for rank 0's store (export MASTER_ADDR=<rank 0's host> and pass it with mpirun -x MASTER_ADDR)",
               info.worldSize);
    readMaster(info);
    validate(info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
             "OMPI_COMM_WORLD_LOCAL_SIZE");
  } else if (var("SLURM_PROCID")) {
    info.source = "slurm";
    info.rank = requiredInt("SLURM_PROCID", "SLURM_NTASKS", 0, kMaxWorld);
    info.worldSize = requiredInt("SLURM_NTASKS", "SLURM_PROCID", 1, kMaxWorld);
    info.localRank = requiredInt("SLURM_LOCALID", "SLURM_PROCID", 0, kMaxWorld);
    info.groupRank = intVar("SLURM_NODEID", 0, kMaxWorld, 0);
    if (var("SLURM_NTASKS_PER_NODE")) {
      info.localWorldSize = intVar("SLURM_NTASKS_PER_NODE", 1, kMaxWorld, 1);
    } else {
      const char* name = var("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
      KILN_CHECK(var(name), "rendezvous: SLURM_TASKS_PER_NODE is not set (SLURM_PROCID is)");
      info.localWorldSize = slurmTasksOnNode(name, var(name), info.groupRank);
    }
    readMaster(info);
    if (!var("MASTER_ADDR")) {
      // Rank 0 runs on the first node of the step; srun's own node (the
      // launch address) may be a login node.
      const char* list = nullptr;
      for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
        if (!list) list = var(name);
      if (list && !firstSlurmHost(list).empty())
        info.masterAddr = firstSlurmHost(list);
      else if (const char* launch = var("SLURM_LAUNCH_NODE_IPADDR"))
        info.masterAddr = launch;
      else
        fail("rendezvous: MASTER_ADDR is not set and neither are SLURM_JOB_NODELIST nor SLURM_LAUNCH_NODE_IPADDR");
    }
    validate(info, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_TASKS_PER_NODE");
  } else {
    readMaster(info);
  }
  return info;
}

namespace {

/// Who joins: host, process and a count (two ranks may be threads of one process).
std::string joinId() {
  static std::atomic<int> joins{0};
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return fmt::format("{}:{}#{}", host, getpid(), joins++);
}

/// The joining, under "rendezvous/": every rank claims its key and counts
/// itself, the last one to come says so, and all wait for that. A counter
/// rather than a wait on every rank's key, so that a large world makes
/// small requests; the keys only name the missing ranks after a timeout.
void join(Store& store, const RendezvousInfo& info, const std::string& where, std::chrono::milliseconds timeout) {
  const std::string me = joinId();
  const std::string world = std::to_string(info.worldSize);
  const Bytes seen = store.compareSet("rendezvous/world_size", {}, Bytes(world.begin(), world.end()));
  KILN_CHECK(std::string(seen.begin(), seen.end()) == world,
             "rendezvous: rank {} has a world of {} but ranks before it have {} (at {})", info.rank, info.worldSize,
             std::string(seen.begin(), seen.end()), where);
  const std::string key = fmt::format("rendezvous/rank/{}", info.rank);
  const Bytes owner = store.compareSet(key, {}, Bytes(me.begin(), me.end()));
  KILN_CHECK(std::string(owner.begin(), owner.end()) == me, "rendezvous: rank {} joined twice, by {} and by {} (at {})",
             info.rank, std::string(owner.begin(), owner.end()), me, where);
  if (store.add("rendezvous/joined", 1) == info.worldSize) store.set("rendezvous/all_joined", std::string("1"));
  try {
    store.wait({"rendezvous/all_joined"}, timeout);
  } catch (const Error&) {
    std::vector<int> missing;
    for (int r = 0; r < info.worldSize && missing.size() < 16; ++r)
      if (!store.check({fmt::format("rendezvous/rank/{}", r)})) missing.push_back(r);
    fail("rendezvous: timed out after {} ms waiting for rank(s) {}{} of a world of {} at {}", timeout.count(),
         fmt::join(missing, ", "), missing.size() == 16 ? ", ..." : "", info.worldSize, where);
  }
}

}  // namespace

std::shared_ptr<Store> rendezvous(const RendezvousInfo& info, const std::string& initMethod,
                                  std::chrono::milliseconds timeout) {
  std::shared_ptr<Store> base;
  std::string where;
  if (initMethod.rfind("file://", 0) == 0) {
    const std::string path = initMethod.substr(7);
    KILN_CHECK(!path.empty(), "rendezvous: init method '{}' names no file", initMethod);
    base = std::make_shared<FileStore>(path, timeout);
    where = initMethod;
  } else {
    std::string host = info.masterAddr;
    uint16_t port = info.masterPort;
    bool serve = info.rank == 0 && !info.useAgentStore;
    const bool explicitTcp = initMethod.rfind("tcp://", 0) == 0;
    if (explicitTcp) {
      const std::string address = initMethod.substr(6);
      const size_t colon = address.rfind(':');
      KILN_CHECK(colon != std::string::npos && colon > 0, "rendezvous: init method '{}' is not tcp://host:port",
                 initMethod);
      host = address.substr(0, colon);
      if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
      port = static_cast<uint16_t>(parseInt("the port of the init method", address.substr(colon + 1), 1, 65535));
      serve = info.rank == 0;
    } else {
      KILN_CHECK(initMethod == "env://" || initMethod.empty(),
                 "rendezvous: unknown init method '{}' (expected env://, tcp://host:port or file:///path)", initMethod);
    }
    where = hostPort(host, port);
    if (info.worldSize == 1 && !info.useAgentStore && !explicitTcp)
      base = std::make_shared<HashStore>(timeout);  // env:// with nobody to meet: no port to take
    else
      base = std::make_shared<TCPStore>(host, port, serve, timeout);
  }
  auto store = std::make_shared<PrefixStore>(fmt::format("restart{}", info.restartCount), base);
  join(*store, info, where, timeout);
  return store;
}

}  // namespace kiln::runtime::dist

// kiln-run's agent (tools/kiln-run/agent.h): the store, the rounds, the
// coordination of nodes, and what is said when a worker fails.
//
// Keys, under "kiln-run/" in the job's store (workers use "restart<k>/"):
//   run_id, config                 compareSet by every agent: the first wins
//   node/<n>                       the agent that has node rank n
//   round/<r>/joined/<n>           node n is ready to start round r
//   round/<r>/failed               "<node> <rank> <code> <final>": the first failure
//   round/<r>/done/<n>             every worker of node n succeeded
//   exit/<n>                       node n is leaving (node 0 keeps the store up until all are)
#include "tools/kiln-run/agent.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <memory>
#include <sstream>

#include "runtime/dist_tcp_store.h"
#include "tools/kiln-run/workers.h"

extern char** environ;

namespace kiln::run {

using runtime::dist::PrefixStore;
using runtime::dist::TCPStore;
using runtime::dist::TCPStoreServer;
using namespace std::chrono_literals;

namespace {

template <typename... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  const std::string text = "kiln-run: " + fmt::format(format, std::forward<Args>(args)...) + "\n";
  (void)!::write(2, text.data(), text.size());
}

std::string randomId() {
  uint8_t bytes[6] = {};
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::read(fd, bytes, sizeof(bytes)) != sizeof(bytes)) {
    const auto t = std::chrono::steady_clock::now().time_since_epoch().count();
    for (size_t i = 0; i < sizeof(bytes); ++i) bytes[i] = static_cast<uint8_t>((t ^ getpid()) >> (8 * i));
  }
  if (fd >= 0) ::close(fd);
  return fmt::format("{:02x}", fmt::join(bytes, ""));
}

std::string me() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return fmt::format("{}:{}", host, getpid());
}

/// A round's end.
struct Outcome {
  bool success = false;
  int code = 0;
  bool final = false;  // no restart: an agent was stopped by a signal
};

class Agent {
 public:
  Agent(const LaunchOptions& o, SignalWatcher& signals) : o_(o), signals_(signals) {}
  int run();

 private:
  std::string nodeKey(const std::string& what, int node) const { return fmt::format("{}/{}", what, node); }
  std::vector<std::string> allNodes(const std::string& what) const {
    std::vector<std::string> keys;
    for (int n = 0; n < o_.nnodes; ++n) keys.push_back(nodeKey(what, n));
    return keys;
  }
  void connect();
  /// Waits until every key is set: 0, or the signal that came first;
  /// kiln::Error at the timeout.
  int waitKeys(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, const std::string& what);
  Outcome round(int restart);
  Outcome announce(const std::string& roundKey, int rank, int code, bool final);
  void report(const Exit& e, const WorkerGroup& group) const;
  std::map<std::string, std::string> workerEnv() const;

  const LaunchOptions& o_;
  SignalWatcher& signals_;
  std::unique_ptr<TCPStoreServer> server_;
  std::shared_ptr<TCPStore> client_;
  std::unique_ptr<PrefixStore> store_;
  uint16_t port_ = 0;
  std::string runId_;
  WorkerSpec spec_;
};

void Agent::connect() {
  // Short attempts, so that a signal is seen while node 0 is not up yet.
  const auto deadline = std::chrono::steady_clock::now() + o_.rdzvTimeout;
  while (true) {
    try {
      client_ = std::make_shared<TCPStore>(o_.rdzvHost, port_, false, 1000ms);
      break;
    } catch (const Error&) {
      if (std::chrono::steady_clock::now() >= deadline || signals_.drain() != 0) throw;
    }
  }
  client_->setTimeout(60s);
  store_ = std::make_unique<PrefixStore>("kiln-run", client_);
}

int Agent::waitKeys(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!store_->check(keys)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (const std::string& k : keys)
        if (!store_->check({k})) missing.push_back(k.substr(k.rfind('/') + 1));
      fail("timed out after {} s waiting for node(s) {} {}", timeout.count() / 1000.0, fmt::join(missing, ", "), what);
    }
    pollfd p{signals_.fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(o_.monitorInterval.count()));
    signals_.drain();
    if (const int sig = signals_.take()) return sig;
  }
  return 0;
}

std::map<std::string, std::string> Agent::workerEnv() const {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  const int world = o_.nnodes * o_.nprocPerNode;
  env["WORLD_SIZE"] = env["ROLE_WORLD_SIZE"] = std::to_string(world);
  env["LOCAL_WORLD_SIZE"] = std::to_string(o_.nprocPerNode);
  env["GROUP_RANK"] = std::to_string(o_.nodeRank);
  env["GROUP_WORLD_SIZE"] = std::to_string(o_.nnodes);
  env["MASTER_ADDR"] = o_.rdzvHost;
  env["MASTER_PORT"] = std::to_string(port_);
  env["KILN_USE_AGENT_STORE"] = "1";
  env["KILN_MAX_RESTARTS"] = std::to_string(o_.maxRestarts);
  env["KILN_RUN_ID"] = runId_;
  if (o_.nprocPerNode > 1 && !env.count("OMP_NUM_THREADS")) {
    // As torchrun: several processes each with a thread per core would fight for them.
    env["OMP_NUM_THREADS"] = "1";
    say("OMP_NUM_THREADS is not set: each worker gets OMP_NUM_THREADS=1 (set it to tune)");
  }
  return env;
}

int Agent::run() {
  if (o_.nodeRank == 0) {
    server_ = std::make_unique<TCPStoreServer>(o_.rdzvHost, static_cast<uint16_t>(o_.rdzvPort));
    port_ = server_->port();
  } else {
    port_ = static_cast<uint16_t>(o_.rdzvPort);
  }
  say("node {} of {}, {} worker(s) per node, world size {}, store at {}", o_.nodeRank, o_.nnodes, o_.nprocPerNode,
      o_.nnodes * o_.nprocPerNode, runtime::dist::hostPort(o_.rdzvHost, port_));
  int code = 1;
  try {
    connect();
    const std::string mine = o_.runId.empty() ? randomId() : o_.runId;
    const auto seen = store_->compareSet("run_id", {}, runtime::dist::Bytes(mine.begin(), mine.end()));
    runId_.assign(seen.begin(), seen.end());
    const std::string config =
        fmt::format("--nnodes {} --nproc-per-node {} --max-restarts {}", o_.nnodes, o_.nprocPerNode, o_.maxRestarts);
    const auto other = store_->compareSet("config", {}, runtime::dist::Bytes(config.begin(), config.end()));
    KILN_CHECK(std::string(other.begin(), other.end()) == config, "node {} was started with {}, another node with {}",
               o_.nodeRank, config, std::string(other.begin(), other.end()));
    const std::string self = me();
    const auto owner =
        store_->compareSet(nodeKey("node", o_.nodeRank), {}, runtime::dist::Bytes(self.begin(), self.end()));
    KILN_CHECK(std::string(owner.begin(), owner.end()) == self,
               "node rank {} is taken by the agent {} (give each node its own --node-rank)", o_.nodeRank,
               std::string(owner.begin(), owner.end()));
    spec_.command = o_.command;
    spec_.nprocPerNode = o_.nprocPerNode;
    spec_.nodeRank = o_.nodeRank;
    spec_.logDir = o_.logDir;
    spec_.console = o_.logDir.empty() || o_.tee;
    spec_.env = workerEnv();
    for (int restart = 0;; ++restart) {
      const Outcome out = round(restart);
      if (out.success) {
        code = 0;
        break;
      }
      code = out.code;
      if (out.final) break;
      if (restart >= o_.maxRestarts) {
        say("no restarts left (--max-restarts {}): exiting with code {}", o_.maxRestarts, code);
        break;
      }
      say("restarting the workers (restart {} of {})", restart + 1, o_.maxRestarts);
    }
    store_->set(nodeKey("exit", o_.nodeRank), std::string("1"));
    // Node 0 serves the store: it stays until every agent has read the end.
    if (server_ && waitKeys(allNodes("exit"), 60s, "to leave") != 0) say("stopped before every node left");
  } catch (const Error& e) {
    say("error: {}", e.what());
    if (code == 0) code = 1;
  }
  return code;
}

Outcome Agent::announce(const std::string& roundKey, int rank, int code, bool final) {
  const std::string value = fmt::format("{} {} {} {}", o_.nodeRank, rank, code, final ? 1 : 0);
  const auto first = store_->compareSet(roundKey + "failed", {}, runtime::dist::Bytes(value.begin(), value.end()));
  std::istringstream in(std::string(first.begin(), first.end()));
  int node = 0, firstRank = 0, isFinal = 0;
  Outcome o;
  in >> node >> firstRank >> o.code >> isFinal;
  o.final = isFinal != 0;
  return o;
}

void Agent::report(const Exit& e, const WorkerGroup& group) const {
  say("rank {} (local rank {} on node {}, pid {}) {}", e.rank, e.localRank, o_.nodeRank, e.pid, e.describe());
  const auto& tail = group.tail(e.localRank);
  if (tail.empty()) {
    say("rank {} printed nothing", e.rank);
    return;
  }
  say("the last {} line(s) of rank {}:", tail.size(), e.rank);
  std::string text;
  for (const std::string& line : tail) text += "  " + line + "\n";
  (void)!::write(2, text.data(), text.size());
}

Outcome Agent::round(int restart) {
  const std::string rk = fmt::format("round/{}/", restart);
  store_->set(nodeKey(rk + "joined", o_.nodeRank), std::string("1"));
  if (const int sig = waitKeys(allNodes(rk + "joined"), o_.rdzvTimeout, fmt::format("to join round {}", restart))) {
    say("got SIG{} while waiting for the other nodes", sigabbrev_np(sig));
    announce(rk, -1, 128 + sig, true);
    return {false, 128 + sig, true};
  }
  spec_.env["KILN_RESTART_COUNT"] = std::to_string(restart);
  WorkerGroup group(spec_, restart, signals_);
  bool done = false;
  try {
    while (true) {
      group.poll(o_.monitorInterval);
      if (const int sig = signals_.take()) {
        say("got SIG{}: passing it to the workers", sigabbrev_np(sig));
        announce(rk, -1, 128 + sig, true);
        group.stop(sig, o_.gracePeriod);
        return {false, 128 + sig, true};
      }
      if (group.failure()) {
        const Exit& e = *group.failure();
        report(e, group);
        const Outcome out = announce(rk, e.rank, e.code, false);
        if (group.anyRunning())
          say("stopping the other workers (SIGTERM, then SIGKILL after {} s)", o_.gracePeriod.count() / 1000.0);
        group.stop(SIGTERM, o_.gracePeriod);
        return out;
      }
      if (!done && group.allSucceeded()) {
        group.finish();
        store_->set(nodeKey(rk + "done", o_.nodeRank), std::string("1"));
        done = true;
      }
      if (store_->check({rk + "failed"})) {
        const auto v = store_->get(rk + "failed");
        std::istringstream in(std::string(v.begin(), v.end()));
        int node = 0, rank = 0, isFinal = 0;
        Outcome out;
        in >> node >> rank >> out.code >> isFinal;
        out.final = isFinal != 0;
        if (rank >= 0)
          say("node {} reports that rank {} failed with exit code {}: stopping the workers of this node", node, rank,
              out.code);
        else
          say("the agent of node {} was stopped (exit code {}): stopping the workers of this node", node, out.code);
        group.stop(SIGTERM, o_.gracePeriod);
        return out;
      }
      if (done && store_->check(allNodes(rk + "done"))) return {true, 0, false};
    }
  } catch (const Error& e) {
    group.stop(SIGTERM, o_.gracePeriod);
    fail("stopped the workers: {}", e.what());
  }
}

}  // namespace

int runAgent(const LaunchOptions& options) {
  SignalWatcher signals;  // before the store's thread starts, so it inherits the mask
  Agent agent(options, signals);
  return agent.run();
}

}  // namespace kiln::run

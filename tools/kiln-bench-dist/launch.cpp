// The ranks of one measurement (tools/kiln-bench-dist/launch.h).
#include "tools/kiln-bench-dist/launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "runtime/dist_tcp_store.h"
#include "runtime/error.h"

extern char** environ;

namespace kiln::bench::dist {

namespace {

constexpr auto kGrace = std::chrono::seconds(3);

/// A port on 127.0.0.1 that was free a moment ago (the OS's choice).
int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  KILN_CHECK(fd >= 0, "kiln-bench-dist: cannot open a socket: {}", strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int e = errno;
  ::close(fd);
  KILN_CHECK(ok, "kiln-bench-dist: cannot find a free port on 127.0.0.1: {}", strerror(e));
  return ntohs(addr.sin_port);
}

}  // namespace

void runJob(const Job& job, run::SignalWatcher& signals) {
  std::unique_ptr<runtime::dist::TCPStoreServer> server;
  int port = 0;
  if (job.serveStore) {
    server = std::make_unique<runtime::dist::TCPStoreServer>("127.0.0.1", 0);
    port = server->port();
  } else {
    port = freePort();
  }
  run::WorkerSpec spec;
  spec.command = job.command;
  spec.nprocPerNode = job.nprocs;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  spec.env["WORLD_SIZE"] = std::to_string(job.nprocs);
  spec.env["LOCAL_WORLD_SIZE"] = std::to_string(job.nprocs);
  spec.env["GROUP_RANK"] = "0";
  spec.env["MASTER_ADDR"] = "127.0.0.1";
  spec.env["MASTER_PORT"] = std::to_string(port);
  spec.env.erase("KILN_RESTART_COUNT");
  spec.env.erase("KILN_RUN_ID");
  if (job.serveStore)
    spec.env["KILN_USE_AGENT_STORE"] = "1";
  else
    spec.env.erase("KILN_USE_AGENT_STORE");
  for (const auto& [k, v] : job.env) spec.env[k] = v;

  run::WorkerGroup group(spec, 0, signals);  // its destructor kills and reaps whatever still runs
  const auto deadline = std::chrono::steady_clock::now() + job.timeout;
  while (group.anyRunning()) {
    group.poll(std::chrono::milliseconds(100));
    if (const int s = signals.take()) {
      group.stop(SIGTERM, kGrace);
      fail("{}: stopped by signal {} (SIG{})", job.what, s, sigabbrev_np(s));
    }
    if (const auto& f = group.failure()) {
      const run::Exit e = *f;
      group.stop(SIGTERM, kGrace);
      fail("{}: rank {} {}", job.what, e.rank, e.describe());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      group.stop(SIGTERM, kGrace);
      fail("{}: still running after {} s (--timeout): stopped", job.what, job.timeout.count());
    }
  }
  group.finish();
  if (const auto& f = group.failure()) fail("{}: rank {} {}", job.what, f->rank, f->describe());
}

}  // namespace kiln::bench::dist

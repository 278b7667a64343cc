// The workers of one node for one round (tools/kiln-run/workers.h).
//
// Note [Reaping after the group is killed]: a worker is noticed with
// waitid(WNOWAIT), which leaves it a zombie, so its pid (its process
// group's id) cannot be reused yet; a worker that failed or is being
// stopped has its whole group SIGKILLed (whatever it started itself) before
// it is reaped. A worker that succeeded is reaped as is.
#include "tools/kiln-run/workers.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "runtime/error.h"

namespace kiln::run {

namespace {

constexpr size_t kMaxLine = 64 * 1024;  // a longer line is written in pieces of this size

/// Writes all of `text` to `fd`, waiting when it is full; gives up quietly
/// when it is closed (a closed stdout must not stop the workers).
void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n >= 0) {
      done += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else if (errno != EINTR) {
      return;
    }
  }
}

std::vector<char*> cStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

// --- signals ---

SignalWatcher::SignalWatcher() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  KILN_CHECK(fd_ >= 0, "kiln-run: cannot watch signals: {}", strerror(errno));
  signal(SIGPIPE, SIG_IGN);
}

SignalWatcher::~SignalWatcher() { ::close(fd_); }

int SignalWatcher::drain() {
  int last = 0;
  signalfd_siginfo info;
  while (::read(fd_, &info, sizeof(info)) == sizeof(info)) {
    const int s = static_cast<int>(info.ssi_signo);
    if (s == SIGINT || s == SIGTERM || s == SIGHUP) last = pending_ = s;
  }
  return last;
}

std::string Exit::describe() const {
  if (signal != 0) return fmt::format("was killed by signal {} (SIG{})", signal, sigabbrev_np(signal));
  return fmt::format("exited with code {}", code);
}

// --- the group ---

WorkerGroup::WorkerGroup(const WorkerSpec& spec, int restart, SignalWatcher& signals) : spec_(spec), signals_(signals) {
  for (int local = 0; local < spec.nprocPerNode; ++local) {
    auto w = std::make_unique<Worker>();
    w->localRank = local;
    w->rank = spec.nodeRank * spec.nprocPerNode + local;
    w->prefix = fmt::format("[rank {}]: ", w->rank);
    w->out.target = 1;
    w->err.target = 2;
    if (!spec.logDir.empty()) {
      const auto dir =
          std::filesystem::path(spec.logDir) / fmt::format("attempt_{}", restart) / fmt::format("rank_{}", w->rank);
      std::filesystem::create_directories(dir);
      w->out.log = std::make_unique<std::ofstream>(dir / "stdout.log");
      w->err.log = std::make_unique<std::ofstream>(dir / "stderr.log");
    }
    workers_.push_back(std::move(w));
  }
  // Nothing that can fail between two forks but fork itself; if it does,
  // the workers already started are stopped (no destructor runs here).
  try {
    for (auto& w : workers_) {
      std::map<std::string, std::string> env = spec.env;
      env["RANK"] = env["ROLE_RANK"] = std::to_string(w->rank);
      env["LOCAL_RANK"] = std::to_string(w->localRank);
      std::vector<std::string> envList;
      for (const auto& [k, v] : env) envList.push_back(k + "=" + v);
      spawn(*w, envList);
    }
  } catch (...) {
    stopping_ = true;
    killRunning(SIGKILL);
    reap(/*block=*/true);
    throw;
  }
}

WorkerGroup::~WorkerGroup() {
  stopping_ = true;
  killRunning(SIGKILL);
  reap(/*block=*/true);
  for (auto& w : workers_) {
    closeStream(*w, w->out);
    closeStream(*w, w->err);
  }
}

void WorkerGroup::spawn(Worker& w, const std::vector<std::string>& envList) {
  int out[2], err[2];
  KILN_CHECK(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0, "kiln-run: cannot make pipes: {}",
             strerror(errno));
  // Everything the child needs is made before fork(): it only calls
  // async-signal-safe functions until exec.
  std::vector<std::string> argv = spec_.command, envp = envList;
  std::vector<char*> cArgv = cStrings(argv), cEnvp = cStrings(envp);
  const std::string execFailed = fmt::format("kiln-run: cannot run '{}': ", spec_.command[0]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  KILN_CHECK(pid >= 0, "kiln-run: cannot start rank {}: {}", w.rank, strerror(errno));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    ::setpgid(0, 0);
    // If kiln-run dies without stopping it (SIGKILL), the worker goes too.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(1);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execvpe(cArgv[0], cArgv.data(), cEnvp.data());
    const int e = errno;
    (void)!::write(2, execFailed.data(), execFailed.size());
    char reason[256] = {};
    strncpy(reason, strerror(e), sizeof(reason) - 1);  // in lower case, as kiln's messages are
    if (reason[0] >= 'A' && reason[0] <= 'Z' && !(reason[1] >= 'A' && reason[1] <= 'Z')) reason[0] += 'a' - 'A';
    (void)!::write(2, reason, strlen(reason));
    (void)!::write(2, "\n", 1);
    _exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that a signal sent at once reaches the group
  ::close(out[1]);
  ::close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  w.out.fd = out[0];
  w.err.fd = err[0];
  w.pid = pid;
  w.running = true;
}

void WorkerGroup::reap(bool block) {
  for (auto& w : workers_) {
    if (!w->running) continue;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(w->pid), &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG)) != 0 ||
        info.si_pid == 0)
      continue;
    int status = 0;
    const bool failed = info.si_code != CLD_EXITED || info.si_status != 0;
    if (failed || stopping_) ::kill(-w->pid, SIGKILL);  // Note [Reaping after the group is killed]
    ::waitpid(w->pid, &status, 0);
    // What it wrote before it exited is in its pipes: read it now, so that
    // its last lines are there for the report.
    pump(*w, w->out);
    pump(*w, w->err);
    w->running = false;
    w->status = status;
    if (failed && !stopping_ && !failure_) {
      Exit e;
      e.rank = w->rank;
      e.localRank = w->localRank;
      e.pid = w->pid;
      e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      e.code = e.signal ? 128 + e.signal : WEXITSTATUS(status);
      failure_ = e;
    }
  }
}

void WorkerGroup::emit(Worker& w, Stream& s, const std::string& line) {
  if (spec_.console) writeAll(s.target, w.prefix + line + "\n");
  if (s.log) *s.log << line << '\n' << std::flush;
  w.tail.push_back(w.prefix + line);
  while (w.tail.size() > spec_.tailLines) w.tail.pop_front();
}

void WorkerGroup::pump(Worker& w, Stream& s) {
  char buffer[64 * 1024];
  for (int turns = 0; s.fd >= 0 && turns < 16; ++turns) {
    const ssize_t n = ::read(s.fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // nothing more now (EAGAIN), or an error: poll tells again
    if (n == 0) return closeStream(w, s);
    s.partial.append(buffer, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1)
      emit(w, s, s.partial.substr(start, nl - start));
    s.partial.erase(0, start);
    while (s.partial.size() >= kMaxLine) {
      emit(w, s, s.partial.substr(0, kMaxLine));
      s.partial.erase(0, kMaxLine);
    }
  }
}

void WorkerGroup::closeStream(Worker& w, Stream& s) {
  if (s.fd < 0) return;
  if (!s.partial.empty()) emit(w, s, s.partial);  // a last line without its newline
  s.partial.clear();
  ::close(s.fd);
  s.fd = -1;
}

void WorkerGroup::poll(std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
  std::vector<std::pair<Worker*, Stream*>> streams;
  for (auto& w : workers_)
    for (Stream* s : {&w->out, &w->err})
      if (s->fd >= 0) {
        fds.push_back({s->fd, POLLIN, 0});
        streams.emplace_back(w.get(), s);
      }
  if (::poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) > 0) {
    if (fds[0].revents) signals_.drain();
    for (size_t i = 0; i < streams.size(); ++i)
      if (fds[i + 1].revents) pump(*streams[i].first, *streams[i].second);
  }
  reap(/*block=*/false);
}

bool WorkerGroup::allSucceeded() const {
  for (const auto& w : workers_)
    if (w->running || w->status != 0) return false;
  return true;
}

bool WorkerGroup::anyRunning() const {
  for (const auto& w : workers_)
    if (w->running) return true;
  return false;
}

void WorkerGroup::drainAll(std::chrono::milliseconds limit) {
  // Output written before an exit is still in the pipes; a grandchild that
  // holds a pipe open must not keep kiln-run waiting for ever.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto open = [&] {
    for (auto& w : workers_)
      if (w->out.fd >= 0 || w->err.fd >= 0) return true;
    return false;
  };
  while (open() && std::chrono::steady_clock::now() < deadline) poll(std::chrono::milliseconds(20));
  for (auto& w : workers_) {
    pump(*w, w->out);
    pump(*w, w->err);
    closeStream(*w, w->out);
    closeStream(*w, w->err);
  }
}

void WorkerGroup::killRunning(int sig) {
  // The worker's process group (whatever it started), or the worker alone
  // when it left the group kiln-run made for it.
  for (auto& w : workers_)
    if (w->running && ::kill(-w->pid, sig) != 0) ::kill(w->pid, sig);
}

void WorkerGroup::finish() { drainAll(std::chrono::milliseconds(500)); }

void WorkerGroup::stop(int sig, std::chrono::milliseconds grace) {
  stopping_ = true;
  killRunning(sig);
  signals_.take();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (anyRunning()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    poll(std::min(left, std::chrono::milliseconds(50)));
    if (signals_.take() != 0) break;  // asked again: no more grace
  }
  killRunning(SIGKILL);
  reap(/*block=*/true);
  drainAll(std::chrono::milliseconds(200));
}

}  // namespace kiln::run

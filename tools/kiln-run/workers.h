// The workers of one node for one round of kiln-run (docs/distributed.md,
// "The launcher"): each a child process in a process group of its own, its
// stdout and stderr read through pipes and written out line by line with a
// "[rank N]: " prefix (whole lines only, so ranks never interleave within a
// line), its last lines kept for the failure report. The signals kiln-run
// cares about (INT, TERM, HUP, CHLD) arrive through a signalfd polled with
// the pipes, so one thread watches everything without races.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::run {

/// Blocks INT, TERM, HUP and CHLD in this process (call it before any
/// thread starts, so every thread inherits the mask) and reads them from a
/// signalfd; SIGPIPE is ignored (a closed stdout must not kill kiln-run).
class SignalWatcher {
 public:
  SignalWatcher();
  ~SignalWatcher();
  int fd() const { return fd_; }
  /// Reads what arrived; returns the last of INT, TERM, HUP, or 0.
  int drain();
  /// A terminating signal that arrived and was not yet taken.
  int take() {
    int s = pending_;
    pending_ = 0;
    return s;
  }

 private:
  int fd_ = -1;
  int pending_ = 0;
};

/// What the workers of a node are started with.
struct WorkerSpec {
  std::vector<std::string> command;
  int nprocPerNode = 1;
  int nodeRank = 0;
  /// The environment of every worker (RANK, LOCAL_RANK, ROLE_RANK are added per worker).
  std::map<std::string, std::string> env;
  std::string logDir;   // empty: no files
  bool console = true;  // write prefixed lines to kiln-run's stdout/stderr
  size_t tailLines = 20;
};

/// How a worker ended.
struct Exit {
  int rank = 0;
  int localRank = 0;
  pid_t pid = 0;
  int code = 0;    // the exit code, or 128 + signal
  int signal = 0;  // the signal that killed it, or 0
  std::string describe() const;
};

class WorkerGroup {
 public:
  /// Starts nprocPerNode workers; RANK, LOCAL_RANK and ROLE_RANK are added
  /// to each one's environment.
  WorkerGroup(const WorkerSpec& spec, int restart, SignalWatcher& signals);
  /// Stops whatever still runs (SIGKILL) and reaps it.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Waits up to `timeout` for output, an exit or a signal, and handles
  /// what came.
  void poll(std::chrono::milliseconds timeout);
  /// The first worker that failed (exit code not 0, or a signal), if any.
  const std::optional<Exit>& failure() const { return failure_; }
  bool allSucceeded() const;
  bool anyRunning() const;
  /// Sends `signal` to every worker still running (its process group), waits
  /// up to `grace` for them, then SIGKILLs the rest (at once if another INT
  /// or TERM comes), reaps them and writes out what they printed.
  void stop(int signal, std::chrono::milliseconds grace);
  /// Writes out what the workers printed before they exited (all of them
  /// succeeded), waiting at most half a second for the pipes to close.
  void finish();
  /// The last lines of a worker, prefixed.
  const std::deque<std::string>& tail(int localRank) const { return workers_[localRank]->tail; }

 private:
  struct Stream {
    int fd = -1;
    int target = 1;  // kiln-run's fd the lines go to
    std::string partial;
    std::unique_ptr<std::ofstream> log;
  };
  struct Worker {
    int rank = 0;
    int localRank = 0;
    pid_t pid = -1;
    bool running = false;
    int status = 0;
    std::string prefix;
    Stream out, err;
    std::deque<std::string> tail;
  };

  void spawn(Worker& w, const std::vector<std::string>& env);
  void reap(bool block);
  void pump(Worker& w, Stream& s);
  void emit(Worker& w, Stream& s, const std::string& line);
  void closeStream(Worker& w, Stream& s);
  void drainAll(std::chrono::milliseconds limit);
  void killRunning(int sig);

  const WorkerSpec& spec_;
  SignalWatcher& signals_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::optional<Exit> failure_;
  bool stopping_ = false;  // exits from now on are kiln-run's doing, not failures
};

}  // namespace kiln::run

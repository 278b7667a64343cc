// kiln-run, run as a user runs it, with a test worker
// (tests/tools/kiln_run_worker.cpp): the environment of each rank for 2 and
// 3 workers; whole, prefixed output lines; a failing worker stopping the
// others, with its exit code and last lines reported; death by a signal;
// SIGKILL after the grace period; restarts; signals forwarded; workers
// meeting through the agent's store; and two agents (--nnodes 2) on
// loopback, restarting or failing together. Every run is bounded (a
// kiln-run still running at its limit is killed and fails the test), and
// every test checks that no worker it saw is left running.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;

extern "C" char** environ;

/// kiln-run running in a child process, its stdout and stderr read into strings.
class Launch {
 public:
  explicit Launch(std::vector<std::string> args, std::map<std::string, std::string> setEnv = {}) {
    args.insert(args.begin(), KILN_RUN_BIN);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const std::string name = kv.substr(0, kv.find('='));
      // Nothing of an outer launcher leaks in.
      if (name != "OMP_NUM_THREADS" && name != "RANK" && name != "WORLD_SIZE" && !setEnv.count(name)) env.push_back(kv);
    }
    for (const auto& [k, v] : setEnv) env.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      dup2(err[1], 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];
  }
  ~Launch() {
    if (pid_ > 0 && code_ == kRunning) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }

  pid_t pid() const { return pid_; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

  /// Reads output until `ready()` holds (true) or `limit` passes (false).
  bool waitFor(const std::function<bool()>& ready, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!ready()) {
      if (std::chrono::steady_clock::now() >= deadline || !readSome(50ms)) return ready();
    }
    return true;
  }

  /// kiln-run's exit code once it has exited (reading all its output), or
  /// -1 when it was still running after `limit` (it is killed).
  int finish(std::chrono::milliseconds limit = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (fds_[0] >= 0 || fds_[1] >= 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid_, SIGKILL);
        break;
      }
      readSome(100ms);
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (std::chrono::steady_clock::now() >= deadline) code_ = -1;
    return code_;
  }

 private:
  static constexpr int kRunning = -1000;

  /// One poll; false when both pipes are closed.
  bool readSome(std::chrono::milliseconds limit) {
    std::vector<pollfd> p;
    for (int fd : fds_)
      if (fd >= 0) p.push_back({fd, POLLIN, 0});
    if (p.empty()) return false;
    poll(p.data(), p.size(), static_cast<int>(limit.count()));
    for (int i = 0; i < 2; ++i) {
      if (fds_[i] < 0) continue;
      pollfd q{fds_[i], POLLIN, 0};
      if (poll(&q, 1, 0) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds_[i], buffer, sizeof(buffer));
      if (n <= 0) {
        close(fds_[i]);
        fds_[i] = -1;
      } else {
        (i == 0 ? out_ : err_).append(buffer, static_cast<size_t>(n));
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string out_, err_;
  int code_ = kRunning;
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) v.push_back(line);
  return v;
}

/// The "env ..." line of each rank (the last one printed).
std::map<int, std::map<std::string, std::string>> envByRank(const std::string& out, int restart = -1) {
  std::map<int, std::map<std::string, std::string>> result;
  const std::regex line(R"(\[rank (\d+)\]: env (.*))");
  for (const std::string& l : lines(out)) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    std::map<std::string, std::string> vars;
    std::istringstream in(m[2].str());
    for (std::string kv; in >> kv;) vars[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    if (restart < 0 || vars["KILN_RESTART_COUNT"] == std::to_string(restart)) result[std::stoi(m[1])] = vars;
  }
  return result;
}

/// Every pid a worker printed.
std::set<pid_t> workerPids(const std::string& out) {
  std::set<pid_t> pids;
  const std::regex line(R"(\[rank \d+\]: pid (\d+))");
  for (const std::string& l : lines(out)) {
    std::smatch m;
    if (std::regex_match(l, m, line)) pids.insert(std::stoi(m[1]));
  }
  return pids;
}

void expectNoneLeft(const std::set<pid_t>& pids) {
  for (pid_t pid : pids) EXPECT_TRUE(kill(pid, 0) != 0 && errno == ESRCH) << "worker " << pid << " is still there";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(KilnRun, EachRankGetsItsEnvironment) {
  for (int nproc : {2, 3}) {
    std::vector<std::string> args = {"--nproc-per-node", std::to_string(nproc)};
    if (nproc == 3) args.insert(args.end(), {"--rdzv-id", "job-7"});
    args.insert(args.end(), {"--", KILN_RUN_WORKER, "--print-env"});
    Launch run(args);
    ASSERT_EQ(run.finish(), 0) << run.err();
    const auto env = envByRank(run.out());
    ASSERT_EQ(env.size(), static_cast<size_t>(nproc)) << run.out();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(run.err(), m, std::regex("store at 127\\.0\\.0\\.1:(\\d+)"))) << run.err();
    for (const auto& [rank, vars] : env) {
      EXPECT_EQ(vars.at("RANK"), std::to_string(rank));
      EXPECT_EQ(vars.at("LOCAL_RANK"), std::to_string(rank));
      EXPECT_EQ(vars.at("ROLE_RANK"), std::to_string(rank));
      EXPECT_EQ(vars.at("GROUP_RANK"), "0");
      EXPECT_EQ(vars.at("LOCAL_WORLD_SIZE"), std::to_string(nproc));
      EXPECT_EQ(vars.at("WORLD_SIZE"), std::to_string(nproc));
      EXPECT_EQ(vars.at("GROUP_WORLD_SIZE"), "1");
      EXPECT_EQ(vars.at("MASTER_ADDR"), "127.0.0.1");
      EXPECT_EQ(vars.at("MASTER_PORT"), m[1].str());
      EXPECT_EQ(vars.at("KILN_RESTART_COUNT"), "0");
      EXPECT_EQ(vars.at("KILN_MAX_RESTARTS"), "0");
      EXPECT_EQ(vars.at("KILN_USE_AGENT_STORE"), "1");
      EXPECT_EQ(vars.at("OMP_NUM_THREADS"), "1");
      EXPECT_EQ(vars.at("KILN_RUN_ID"), nproc == 3 ? "job-7" : env.at(0).at("KILN_RUN_ID"));
    }
    EXPECT_EQ(env.at(0).at("KILN_RUN_ID").size(), nproc == 3 ? 5u : 12u);
    expectNoneLeft(workerPids(run.out()));
  }
}

TEST(KilnRun, OmpNumThreadsIsLeftAloneWhenSetOrWithOneWorker) {
  Launch set({"--nproc-per-node", "2", KILN_RUN_WORKER, "--print-env"}, {{"OMP_NUM_THREADS", "3"}});
  ASSERT_EQ(set.finish(), 0);
  EXPECT_EQ(envByRank(set.out()).at(1).at("OMP_NUM_THREADS"), "3");
  Launch one({KILN_RUN_WORKER, "--print-env"});
  ASSERT_EQ(one.finish(), 0);
  EXPECT_EQ(envByRank(one.out()).at(0).at("OMP_NUM_THREADS"), "<unset>");
}

TEST(KilnRun, OutputLinesArePrefixedWholeAndInOrder) {
  Launch run({"--nproc-per-node", "3", "--", KILN_RUN_WORKER, "--lines", "40", "--err-lines", "40", "--pieces"});
  ASSERT_EQ(run.finish(), 0) << run.err();
  const std::regex outLine(R"(\[rank (\d)\]: out (\d) (\d+) ([a-z]+))");
  std::map<int, int> next;
  for (const std::string& l : lines(run.out())) {
    if (l.find("]: pid ") != std::string::npos) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, outLine)) << "a broken line: " << l;
    EXPECT_EQ(m[1], m[2]) << l;  // the prefix names the rank that wrote it
    const int i = std::stoi(m[3]);
    EXPECT_EQ(i, next[std::stoi(m[1])]++) << l;
    EXPECT_EQ(m[4].str(), std::string(40, static_cast<char>('a' + i % 26))) << l;
  }
  for (int r = 0; r < 3; ++r) EXPECT_EQ(next[r], 40) << "rank " << r;
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(count(run.err(), "[rank " + std::to_string(r) + "]: err " + std::to_string(r) + " "), 40u);
}

TEST(KilnRun, AFailingWorkerStopsTheOthersAndItsCodeAndLastLinesAreReported) {
  // --store: every rank has started (and handles SIGTERM) before rank 1 fails.
  Launch run({"--nproc-per-node", "3", KILN_RUN_WORKER, "--store", "--hang", "--fail-rank", "1", "--exit-code", "3",
              "--lines", "30"});
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run.finish(), 3) << run.err();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  const std::set<pid_t> pids = workerPids(run.out());
  EXPECT_EQ(pids.size(), 3u);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      run.err(), m, std::regex(R"(kiln-run: rank 1 \(local rank 1 on node 0, pid (\d+)\) exited with code 3)")))
      << run.err();
  EXPECT_TRUE(pids.count(std::stoi(m[1])));
  // The report: 20 lines of rank 1, the last one its own farewell.
  const auto errLines = lines(run.err());
  auto at = std::find(errLines.begin(), errLines.end(), "kiln-run: the last 20 line(s) of rank 1:");
  ASSERT_NE(at, errLines.end()) << run.err();
  std::vector<std::string> tail(at + 1, at + 21);
  for (const std::string& l : tail) EXPECT_TRUE(l.starts_with("  [rank 1]: ")) << l;
  EXPECT_EQ(tail.back(), "  [rank 1]: rank 1 fails with 3");
  // pid, 30 lines, the store's, the farewell: the last 20 start at line 12.
  EXPECT_EQ(tail.front(), "  [rank 1]: out 1 12 " + std::string(40, 'm'));
  EXPECT_NE(run.err().find("kiln-run: no restarts left (--max-restarts 0): exiting with code 3"), std::string::npos);
  // The others got SIGTERM.
  EXPECT_NE(run.out().find("[rank 0]: rank 0 got signal 15"), std::string::npos) << run.out();
  EXPECT_NE(run.out().find("[rank 2]: rank 2 got signal 15"), std::string::npos) << run.out();
  expectNoneLeft(pids);
}

TEST(KilnRun, DeathBySignalIs128PlusTheSignal) {
  Launch run({"--nproc-per-node", "2", KILN_RUN_WORKER, "--hang", "--signal-rank", "0", "--signal", "11"});
  ASSERT_EQ(run.finish(), 139) << run.err();
  EXPECT_TRUE(std::regex_search(
      run.err(), std::regex(R"(rank 0 \(local rank 0 on node 0, pid \d+\) was killed by signal 11 \(SIGSEGV\))")))
      << run.err();
  expectNoneLeft(workerPids(run.out()));
}

TEST(KilnRun, AWorkerThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  Launch run({"--nproc-per-node", "2", "--grace-period", "0.5", KILN_RUN_WORKER, "--store", "--hang-rank", "0",
              "--ignore-term-rank", "0", "--fail-rank", "1", "--exit-code", "5"});
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run.finish(), 5) << run.err();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 8s);
  EXPECT_EQ(run.out().find("rank 0 got signal"), std::string::npos);  // it never saw one
  expectNoneLeft(workerPids(run.out()));
}

TEST(KilnRun, MaxRestartsRestartsTheWholeGroupOnce) {
  Launch run({"--nproc-per-node", "2", "--max-restarts", "1", "--", KILN_RUN_WORKER, "--print-env", "--store",
              "--fail-rank", "1", "--fail-restart", "0", "--exit-code", "7"});
  ASSERT_EQ(run.finish(), 0) << run.err();
  for (int restart : {0, 1}) {
    const auto env = envByRank(run.out(), restart);
    ASSERT_EQ(env.size(), 2u) << "restart " << restart << "\n" << run.out();
    EXPECT_EQ(env.at(1).at("KILN_MAX_RESTARTS"), "1");
  }
  EXPECT_EQ(count(run.out(), "[rank 1]: rank 1 fails with 7"), 1u);
  EXPECT_EQ(count(run.out(), "store ok rank 0 source kiln-run sum 1"), 2u);
  EXPECT_NE(run.err().find("kiln-run: restarting the workers (restart 1 of 1)"), std::string::npos) << run.err();
  expectNoneLeft(workerPids(run.out()));
}

TEST(KilnRun, WhenRestartsRunOutTheLastFailureIsTheExitCode) {
  Launch run({"--nproc-per-node", "2", "--max-restarts", "1", KILN_RUN_WORKER, "--fail-rank", "0", "--exit-code", "4"});
  ASSERT_EQ(run.finish(), 4) << run.err();
  EXPECT_EQ(count(run.out(), "[rank 0]: rank 0 fails with 4"), 2u);
  EXPECT_NE(run.err().find("kiln-run: no restarts left (--max-restarts 1): exiting with code 4"), std::string::npos);
}

TEST(KilnRun, SignalsAreForwardedAndNoWorkerIsLeft) {
  for (int sig : {SIGTERM, SIGINT}) {
    Launch run({"--nproc-per-node", "2", KILN_RUN_WORKER, "--hang"});
    ASSERT_TRUE(run.waitFor([&] {
      return run.out().find("ready 0") != std::string::npos && run.out().find("ready 1") != std::string::npos;
    })) << run.out();
    kill(run.pid(), sig);
    ASSERT_EQ(run.finish(), 128 + sig) << run.err();
    for (int r = 0; r < 2; ++r) {
      const std::string got =
          "[rank " + std::to_string(r) + "]: rank " + std::to_string(r) + " got signal " + std::to_string(sig);
      EXPECT_NE(run.out().find(got), std::string::npos) << run.out();
    }
    EXPECT_NE(run.err().find(sig == SIGTERM ? "got SIGTERM: passing it" : "got SIGINT: passing it"), std::string::npos);
    expectNoneLeft(workerPids(run.out()));
  }
}

TEST(KilnRun, WorkersMeetThroughTheAgentsStore) {
  Launch run({"--nproc-per-node", "3", KILN_RUN_WORKER, "--store"});
  ASSERT_EQ(run.finish(), 0) << run.err();
  for (int r = 0; r < 3; ++r)  // 0 + 1 + 4
    EXPECT_EQ(count(run.out(), "store ok rank " + std::to_string(r) + " source kiln-run sum 5"), 1u) << run.out();
}

TEST(KilnRun, LogDirTakesTheLinesUnprefixedAndTeeKeepsTheConsole) {
  char dirTemplate[] = "/tmp/kiln-run-logs-XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  for (bool tee : {false, true}) {
    std::vector<std::string> args = {"--nproc-per-node", "2", "--log-dir", dir + (tee ? "/tee" : "/files")};
    if (tee) args.push_back("--tee");
    args.insert(args.end(), {KILN_RUN_WORKER, "--lines", "2", "--err-lines", "1"});
    Launch run(args);
    ASSERT_EQ(run.finish(), 0) << run.err();
    auto read = [](const std::string& path) {
      std::string text;
      if (FILE* f = fopen(path.c_str(), "r")) {
        char buffer[4096];
        for (size_t n; (n = fread(buffer, 1, sizeof(buffer), f)) > 0;) text.append(buffer, n);
        fclose(f);
      }
      return text;
    };
    const std::string rank1 = dir + (tee ? "/tee" : "/files") + "/attempt_0/rank_1/";
    const std::string out = read(rank1 + "stdout.log");
    EXPECT_EQ(out.substr(out.find('\n') + 1),  // after "pid N"
              "out 1 0 " + std::string(40, 'a') + "\nout 1 1 " + std::string(40, 'b') + "\n");
    EXPECT_EQ(read(rank1 + "stderr.log"), "err 1 0\n");
    EXPECT_EQ(count(run.out(), "[rank 1]: out 1 "), tee ? 2u : 0u);
    EXPECT_EQ(count(run.err(), "[rank 1]: err 1 0"), tee ? 1u : 0u);
  }
  std::filesystem::remove_all(dir);
}

TEST(KilnRun, ArgumentsAreChecked) {
  Launch noEndpoint({"--nnodes", "2", KILN_RUN_WORKER});
  EXPECT_NE(noEndpoint.finish(), 0);
  EXPECT_NE(noEndpoint.err().find("--rdzv-endpoint: is needed with --nnodes above 1"), std::string::npos)
      << noEndpoint.err();
  Launch unknown({"--nprocs", "2", KILN_RUN_WORKER});
  EXPECT_NE(unknown.finish(), 0);
  EXPECT_NE(unknown.err().find("--nprocs"), std::string::npos) << unknown.err();
  Launch nothing({"--nproc-per-node", "2"});
  EXPECT_NE(nothing.finish(), 0);
  EXPECT_NE(nothing.err().find("the program to run"), std::string::npos) << nothing.err();
  Launch missing({"--", "/no/such/kiln-program", "--x"});
  EXPECT_EQ(missing.finish(), 127);
  EXPECT_NE(missing.err().find("[rank 0]: kiln-run: cannot run '/no/such/kiln-program': no such file or directory"),
            std::string::npos)
      << missing.err();
}

// --- two nodes on loopback ---

/// Node 0's agent, started on a port the OS chooses, and that port.
struct TwoNodes {
  std::unique_ptr<Launch> node0, node1;
  explicit TwoNodes(const std::vector<std::string>& flags, const std::vector<std::string>& worker) {
    auto args = [&](int node, const std::string& port) {
      std::vector<std::string> a = {
          "--nnodes",         "2", "--node-rank", std::to_string(node), "--rdzv-endpoint", "127.0.0.1:" + port,
          "--nproc-per-node", "2"};
      a.insert(a.end(), flags.begin(), flags.end());
      a.push_back("--");
      a.push_back(KILN_RUN_WORKER);
      a.insert(a.end(), worker.begin(), worker.end());
      return a;
    };
    node0 = std::make_unique<Launch>(args(0, "0"));
    std::smatch m;
    const std::regex served("store at 127\\.0\\.0\\.1:(\\d+)");
    node0->waitFor([&] { return std::regex_search(node0->err(), m, served); });
    port = m.empty() ? "1" : m[1].str();
    node1 = std::make_unique<Launch>(args(1, port));
  }
  std::string port;
};

TEST(KilnRun, TwoNodesOnLoopbackMakeOneWorld) {
  TwoNodes job({}, {"--print-env", "--store"});
  ASSERT_EQ(job.node1->finish(), 0) << job.node1->err();
  ASSERT_EQ(job.node0->finish(), 0) << job.node0->err();
  for (int node : {0, 1}) {
    const Launch& run = node == 0 ? *job.node0 : *job.node1;
    const auto env = envByRank(run.out());
    ASSERT_EQ(env.size(), 2u) << run.out();
    for (const auto& [rank, vars] : env) {
      EXPECT_EQ(rank / 2, node);
      EXPECT_EQ(vars.at("LOCAL_RANK"), std::to_string(rank % 2));
      EXPECT_EQ(vars.at("GROUP_RANK"), std::to_string(node));
      EXPECT_EQ(vars.at("WORLD_SIZE"), "4");
      EXPECT_EQ(vars.at("GROUP_WORLD_SIZE"), "2");
      EXPECT_EQ(vars.at("MASTER_PORT"), job.port);
      EXPECT_EQ(vars.at("KILN_RUN_ID"), envByRank(job.node0->out()).at(0).at("KILN_RUN_ID"));
      // 0 + 1 + 4 + 9: every rank read every other rank's key.
      EXPECT_EQ(count(run.out(), "store ok rank " + std::to_string(rank) + " source kiln-run sum 14"), 1u);
    }
  }
}

TEST(KilnRun, TwoNodesRestartTogether) {
  TwoNodes job({"--max-restarts", "1"},
               {"--print-env", "--store", "--fail-rank", "3", "--fail-restart", "0", "--exit-code", "7"});
  ASSERT_EQ(job.node1->finish(), 0) << job.node1->err();
  ASSERT_EQ(job.node0->finish(), 0) << job.node0->err();
  EXPECT_EQ(envByRank(job.node0->out(), 1).size(), 2u) << job.node0->out();  // node 0 ran a second round too
  EXPECT_EQ(envByRank(job.node1->out(), 1).size(), 2u);
  EXPECT_NE(job.node0->err().find("kiln-run: node 1 reports that rank 3 failed with exit code 7"), std::string::npos)
      << job.node0->err();
  EXPECT_NE(job.node0->err().find("restarting the workers (restart 1 of 1)"), std::string::npos);
  expectNoneLeft(workerPids(job.node0->out()));
  expectNoneLeft(workerPids(job.node1->out()));
}

TEST(KilnRun, TwoNodesWithoutRestartsBothExitWithTheFailingCode) {
  TwoNodes job({}, {"--store", "--hang", "--fail-rank", "2", "--exit-code", "6"});
  ASSERT_EQ(job.node1->finish(), 6) << job.node1->err();
  ASSERT_EQ(job.node0->finish(), 6) << job.node0->err();
  EXPECT_NE(job.node0->err().find("kiln-run: node 1 reports that rank 2 failed with exit code 6"), std::string::npos)
      << job.node0->err();
  EXPECT_NE(job.node0->out().find("[rank 0]: rank 0 got signal 15"), std::string::npos);
  expectNoneLeft(workerPids(job.node0->out()));
  expectNoneLeft(workerPids(job.node1->out()));
}

}  // namespace

// A worker for kiln-run's tests (tests/tools/kiln_run_test.cpp): it reports
// what kiln-run gave it and then does what the test asks, on the ranks the
// test names: print its environment and pid, print lines (whole or written
// in pieces), meet the other ranks through the job's store
// (runtime::dist::rendezvous), fail with an exit code, die of a signal,
// hang until a signal comes (saying which), or ignore SIGTERM.
//
// On SIGTERM or SIGINT it prints "rank R got signal S" and exits 128+S.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "runtime/dist_rendezvous.h"

namespace {

int rank = -1;
char signalMessage[64];

void onSignal(int sig) {
  // Only async-signal-safe calls here; the message was made up front.
  const int n = snprintf(signalMessage, sizeof(signalMessage), "rank %d got signal %d\n", rank, sig);
  (void)!write(1, signalMessage, static_cast<size_t>(n));
  _exit(128 + sig);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "<unset>";
}

void say(const std::string& text) {
  const std::string line = text + "\n";
  (void)!write(1, line.data(), line.size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln-run's test worker"};
  bool printEnv = false, store = false, hang = false, ignoreTerm = false, pieces = false;
  int lines = 0, errLines = 0, failRank = -1, exitCode = 1, failRestart = -1, signalRank = -1, signalNumber = SIGSEGV;
  int hangRank = -1, ignoreRank = -1;
  app.add_flag("--print-env", printEnv, "print the launcher's variables");
  app.add_flag("--store", store, "meet the other ranks through the store");
  app.add_option("--lines", lines, "lines to print on stdout");
  app.add_option("--err-lines", errLines, "lines to print on stderr");
  app.add_flag("--pieces", pieces, "write each line in three pieces, 1 ms apart");
  app.add_option("--fail-rank", failRank, "this rank exits with --exit-code");
  app.add_option("--exit-code", exitCode, "the failing rank's exit code");
  app.add_option("--fail-restart", failRestart, "fail only when KILN_RESTART_COUNT is this (default: always)");
  app.add_option("--signal-rank", signalRank, "this rank raises --signal");
  app.add_option("--signal", signalNumber, "the signal to raise");
  app.add_flag("--hang", hang, "every rank (but a failing one) waits for a signal");
  app.add_option("--hang-rank", hangRank, "only this rank waits for a signal");
  app.add_flag("--ignore-term", ignoreTerm, "ignore SIGTERM");
  app.add_option("--ignore-term-rank", ignoreRank, "only this rank ignores SIGTERM");
  CLI11_PARSE(app, argc, argv);

  rank = std::atoi(env("RANK").c_str());
  signal(SIGTERM, ignoreTerm || rank == ignoreRank ? SIG_IGN : onSignal);
  signal(SIGINT, onSignal);
  const int restart = std::atoi(env("KILN_RESTART_COUNT").c_str());

  say("pid " + std::to_string(getpid()));
  if (printEnv) {
    std::string line = "env";
    for (const char* v : {"RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
                          "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "KILN_RESTART_COUNT", "KILN_MAX_RESTARTS",
                          "KILN_RUN_ID", "KILN_USE_AGENT_STORE", "OMP_NUM_THREADS"})
      line += std::string(" ") + v + "=" + env(v);
    say(line);
  }
  for (int i = 0; i < lines; ++i) {
    const std::string out =
        "out " + std::to_string(rank) + " " + std::to_string(i) + " " + std::string(40, 'a' + i % 26);
    if (pieces) {
      const std::string line = out + "\n";
      const size_t third = line.size() / 3;
      (void)!write(1, line.data(), third);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      (void)!write(1, line.data() + third, third);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      (void)!write(1, line.data() + 2 * third, line.size() - 2 * third);
    } else {
      say(out);
    }
  }
  for (int i = 0; i < errLines; ++i) {
    const std::string err = "err " + std::to_string(rank) + " " + std::to_string(i) + "\n";
    (void)!write(2, err.data(), err.size());
  }
  if (store) {
    namespace dist = kiln::runtime::dist;
    const dist::RendezvousInfo info = dist::readEnvironment();
    auto s = dist::rendezvous(info, "env://", std::chrono::seconds(20));
    s->set("hello/" + std::to_string(info.rank), std::to_string(info.rank * info.rank));
    long sum = 0;
    for (int r = 0; r < info.worldSize; ++r) sum += std::stol(s->getString("hello/" + std::to_string(r)));
    say("store ok rank " + std::to_string(info.rank) + " source " + info.source + " sum " + std::to_string(sum));
    // Nobody goes on (to fail, say) before every rank has printed that: the
    // tests count those lines.
    if (s->add("printed", 1) == info.worldSize) s->set("all_printed", std::string("1"));
    s->wait({"all_printed"});
  }
  if (rank == signalRank) {
    signal(signalNumber, SIG_DFL);  // not a sanitizer's handler: die of it
    raise(signalNumber);
  }
  if (rank == failRank && (failRestart < 0 || failRestart == restart)) {
    say("rank " + std::to_string(rank) + " fails with " + std::to_string(exitCode));
    return exitCode;
  }
  if ((hang && rank != failRank) || rank == hangRank) {
    say("ready " + std::to_string(rank));
    for (int i = 0; i < 600; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return 99;  // nobody stopped it in a minute
  }
  return 0;
}

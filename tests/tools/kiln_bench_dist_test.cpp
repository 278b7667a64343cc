// kiln-bench-dist, run as a user runs it, with tiny sizes: 2 processes,
// all-reduces of 1 KiB to 64 KiB, a few calls, DDP at 1 and 2 processes.
// Its --json must parse and hold, for every size, finite positive bus
// bandwidths for kiln (signature check on and off) and Gloo's own loop that
// agree with the times, ratios that are those bandwidths' quotients, the
// torch columns or the reason they are missing, and the DDP rows; its table
// must state the overlap verdict. A bad command line exits 2. SIGTERM in the
// middle of a run stops it, naming the signal, with no rank left behind.
// Every run is bounded.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

namespace {

struct Outcome {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// kiln-bench-dist with `args`, at most 50 s.
Outcome runBench(const std::string& args, const std::filesystem::path& dir) {
  const std::string cmd = "timeout -k 5 50 " KILN_BENCH_DIST_BIN " " + args + " > " + (dir / "out").string() + " 2> " +
                          (dir / "err").string();
  Outcome r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

class KilnBenchDist : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kiln_bench_dist_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

bool positive(const nlohmann::json& row, const std::string& key) {
  return row.contains(key) && row[key].is_number() && std::isfinite(row[key].get<double>()) &&
         row[key].get<double>() > 0;
}

TEST_F(KilnBenchDist, TinySuiteWritesEveryRow) {
  const auto json = dir_ / "dist.json";
  const Outcome r = runBench(
      "--nprocs 2 --ddp-nprocs 1,2 --max-bytes 64KiB --iters 4 --warmup 1 --ddp-steps 4 --json " + json.string(), dir_);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  nlohmann::json rows;
  ASSERT_NO_THROW(rows = nlohmann::json::parse(slurp(json))) << slurp(json);
  ASSERT_TRUE(rows.is_array());

  std::set<int64_t> sizes;
  std::set<int> ddpProcesses;
  for (const auto& row : rows) {
    ASSERT_TRUE(row.contains("name") && row["name"].is_string()) << row.dump();
    const std::string name = row["name"];
    if (name == "all_reduce") {
      EXPECT_EQ(row["processes"], 2) << row.dump();
      const int64_t bytes = row["bytes"];
      sizes.insert(bytes);
      for (const char* side : {"kiln", "kiln_debug_off", "gloo"}) {
        const std::string bus = std::string(side) + "_busbw_gbps", ms = std::string(side) + "_ms";
        ASSERT_TRUE(positive(row, bus) && positive(row, ms)) << side << " at " << bytes << " bytes: " << row.dump();
        // NCCL's formula at 2 processes: busbw = algbw = bytes / time.
        const double want = static_cast<double>(bytes) / (row[ms].get<double>() * 1e-3) / 1e9;
        EXPECT_NEAR(row[bus].get<double>(), want, want * 1e-9) << side << " at " << bytes;
      }
      ASSERT_TRUE(positive(row, "kiln_gloo_ratio")) << row.dump();
      EXPECT_NEAR(row["kiln_gloo_ratio"].get<double>(),
                  row["kiln_busbw_gbps"].get<double>() / row["gloo_busbw_gbps"].get<double>(), 1e-9);
      EXPECT_EQ(row["gloo_algorithm"], bytes <= (1 << 20) ? "AllreduceHalvingDoubling" : "AllreduceRingChunked");
      // torch.distributed: measured, or the reason it is not.
      if (row["torch_ms"].is_null()) {
        ASSERT_TRUE(row["torch_error"].is_string()) << row.dump();
        EXPECT_EQ(row["torch_error"].get<std::string>().rfind("torch not importable: ", 0), 0u) << row.dump();
        EXPECT_TRUE(row["kiln_torch_ratio"].is_null());
      } else {
        EXPECT_TRUE(positive(row, "torch_busbw_gbps") && positive(row, "kiln_torch_ratio")) << row.dump();
      }
    } else if (name == "ddp_step") {
      const int n = row["processes"];
      ddpProcesses.insert(n);
      EXPECT_TRUE(positive(row, "step_ms") && positive(row, "compiled_step_ms")) << row.dump();
      ASSERT_TRUE(row["compiled_bucket_overlaps"].is_array()) << row.dump();
      EXPECT_EQ(row["compiled_bucket_overlaps"].size(), row["bucket_bytes"].size())
          << "one all_reduce in the compiled program per bucket: " << row.dump();
      EXPECT_EQ(row["mlp"], "64-64-64-10, batch 8");
      ASSERT_TRUE(row["bucket_bytes"].is_array() && !row["bucket_bytes"].empty()) << row.dump();
      int64_t total = 0;
      for (const auto& b : row["bucket_bytes"]) total += b.get<int64_t>();
      EXPECT_EQ(total, row["parameters"].get<int64_t>() * 4) << "the buckets hold every f32 parameter";
      if (n == 1) {
        EXPECT_TRUE(row["compute_ms"].is_null() && row["overlapped"].is_null() && row["compiled_overlapped"].is_null())
            << row.dump();
      } else {
        ASSERT_TRUE(positive(row, "compute_ms") && positive(row, "communication_ms")) << row.dump();
        const double sum = row["compute_ms"].get<double>() + row["communication_ms"].get<double>();
        EXPECT_NEAR(row["compute_plus_communication_ms"].get<double>(), sum, 1e-9);
        ASSERT_TRUE(row["overlapped"].is_boolean());
        EXPECT_EQ(row["overlapped"].get<bool>(), row["step_ms"].get<double>() < sum);
        ASSERT_TRUE(positive(row, "compiled_compute_ms")) << row.dump();
        const double compiledSum = row["compiled_compute_ms"].get<double>() + row["communication_ms"].get<double>();
        EXPECT_NEAR(row["compiled_compute_plus_communication_ms"].get<double>(), compiledSum, 1e-9);
        ASSERT_TRUE(row["compiled_overlapped"].is_boolean());
        EXPECT_EQ(row["compiled_overlapped"].get<bool>(), row["compiled_step_ms"].get<double>() < compiledSum);
      }
    } else {
      ADD_FAILURE() << "unexpected row " << row.dump();
    }
  }
  EXPECT_EQ(sizes, (std::set<int64_t>{1024, 4096, 16384, 65536}));
  EXPECT_EQ(ddpProcesses, (std::set<int>{1, 2}));
  EXPECT_NE(r.out.find("| 2 | 64 KiB |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DDP at 2 processes: step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DDP at 2 processes, compiled: step "), std::string::npos) << r.out;
}

TEST_F(KilnBenchDist, BadCommandLineExitsTwo) {
  const Outcome r = runBench("--min-bytes 4KiB --max-bytes 1KiB", dir_);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--max-bytes 1024 is below --min-bytes 4096"), std::string::npos) << r.err;
  const Outcome n = runBench("--nprocs 2,x", dir_);
  EXPECT_EQ(n.status, 2);
  EXPECT_NE(n.err.find("--nprocs: '2,x' is not a list of process counts"), std::string::npos) << n.err;
}

/// Whether a process whose command line mentions `text` is running.
bool anyProcessMentions(const std::string& text) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = slurp(entry.path() / "cmdline");
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find(text) != std::string::npos && cmdline.find("--dist-worker") != std::string::npos) return true;
  }
  return false;
}

TEST_F(KilnBenchDist, SigtermStopsTheRunAndItsRanks) {
  // Large sizes, so that the ranks are still measuring when the signal
  // comes; TMPDIR makes the ranks' --result paths name this test's directory.
  const std::string out = (dir_ / "out").string(), err = (dir_ / "err").string(), tmp = dir_.string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("TMPDIR", tmp.c_str(), 1);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execl(KILN_BENCH_DIST_BIN, KILN_BENCH_DIST_BIN, "--nprocs", "2", "--ddp-nprocs", "0", "--min-bytes", "64MiB",
            "--max-bytes", "256MiB", "--iters", "50", "--no-torch", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Until the ranks run (at most 20 s), then SIGTERM.
  const auto start = std::chrono::steady_clock::now();
  while (!anyProcessMentions(tmp) && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(anyProcessMentions(tmp)) << "the ranks never started: " << slurp(err);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(pid, SIGTERM);
  int status = 0;
  const auto sent = std::chrono::steady_clock::now();
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - sent > std::chrono::seconds(15)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "kiln-bench-dist still ran 15 s after SIGTERM";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(slurp(err).find("all-reduce at 2 processes: stopped by signal 15 (SIGTERM)"), std::string::npos)
      << slurp(err);
  EXPECT_FALSE(anyProcessMentions(tmp)) << "a rank outlived kiln-bench-dist";
}

}  // namespace

// The environment rendezvous (runtime/dist_rendezvous.h): the variables of
// kiln-run/torchrun, mpirun and Slurm, in that precedence, with errors
// naming the variable missing or wrong; and rendezvous() itself, with
// threads (rank 0 serving, or an agent's store) and forked processes (a file
// store), a missing rank named after the timeout, and ranks that disagree on
// the world size. Every variable a test sets is put back (ScopedEnv).
#include "runtime/dist_rendezvous.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <thread>

#include "common/error_of.h"
#include "common/scoped_env.h"
#include "runtime/dist_tcp_store.h"
#include "unit/runtime/dist_test_util.h"

namespace kiln::runtime::dist {
namespace {

using namespace std::chrono_literals;
using testutil::ScopedEnv;

constexpr const char* kAllVars[] = {"RANK",
                                    "WORLD_SIZE",
                                    "LOCAL_RANK",
                                    "LOCAL_WORLD_SIZE",
                                    "GROUP_RANK",
                                    "MASTER_ADDR",
                                    "MASTER_PORT",
                                    "KILN_RESTART_COUNT",
                                    "KILN_RUN_ID",
                                    "KILN_USE_AGENT_STORE",
                                    "OMPI_COMM_WORLD_RANK",
                                    "OMPI_COMM_WORLD_SIZE",
                                    "OMPI_COMM_WORLD_LOCAL_RANK",
                                    "OMPI_COMM_WORLD_LOCAL_SIZE",
                                    "SLURM_PROCID",
                                    "SLURM_NTASKS",
                                    "SLURM_LOCALID",
                                    "SLURM_NODEID",
                                    "SLURM_NTASKS_PER_NODE",
                                    "SLURM_TASKS_PER_NODE",
                                    "SLURM_STEP_TASKS_PER_NODE",
                                    "SLURM_STEP_NODELIST",
                                    "SLURM_JOB_NODELIST",
                                    "SLURM_NODELIST",
                                    "SLURM_LAUNCH_NODE_IPADDR"};

/// Starts each test from an environment without any launcher's variables,
/// and lets it set some; everything is restored at the end.
class DistRendezvousEnv : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kAllVars) saved_.emplace_back(std::make_unique<ScopedEnv>(v, nullptr));
  }
  void TearDown() override {
    set_.clear();
    saved_.clear();
  }
  void set(const char* name, const char* value) { set_.emplace_back(std::make_unique<ScopedEnv>(name, value)); }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> saved_, set_;
};

TEST_F(DistRendezvousEnv, KilnRunVariables) {
  set("RANK", "5");
  set("WORLD_SIZE", "8");
  set("LOCAL_RANK", "1");
  set("LOCAL_WORLD_SIZE", "4");
  set("GROUP_RANK", "1");
  set("MASTER_ADDR", "10.0.0.7");
  set("MASTER_PORT", "1234");
  set("KILN_RESTART_COUNT", "2");
  set("KILN_RUN_ID", "abc");
  set("KILN_USE_AGENT_STORE", "1");
  set("OMPI_COMM_WORLD_RANK", "3");  // RANK wins
  const RendezvousInfo i = readEnvironment();
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.worldSize, 8);
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localWorldSize, 4);
  EXPECT_EQ(i.groupRank, 1);
  EXPECT_EQ(i.masterAddr, "10.0.0.7");
  EXPECT_EQ(i.masterPort, 1234);
  EXPECT_EQ(i.restartCount, 2);
  EXPECT_EQ(i.source, "kiln-run");
  EXPECT_TRUE(i.useAgentStore);
  EXPECT_EQ(i.runId, "abc");
}

TEST_F(DistRendezvousEnv, TorchrunStyleWithDefaults) {
  set("RANK", "1");
  set("WORLD_SIZE", "2");
  set("MASTER_ADDR", "host0");
  set("MASTER_PORT", "29501");
  const RendezvousInfo i = readEnvironment();
  EXPECT_EQ(i.source, "env");
  EXPECT_EQ(i.localRank, 1);  // one node assumed
  EXPECT_EQ(i.localWorldSize, 2);
  EXPECT_EQ(i.restartCount, 0);
  EXPECT_FALSE(i.useAgentStore);
}

TEST_F(DistRendezvousEnv, ErrorsNameTheVariable) {
  set("RANK", "1");
  EXPECT_EQ(errorOf([] { readEnvironment(); }), "rendezvous: WORLD_SIZE is not set (RANK is)");
  set("WORLD_SIZE", "two");
  EXPECT_EQ(errorOf([] { readEnvironment(); }), "rendezvous: WORLD_SIZE is 'two', expected an integer");
  set("WORLD_SIZE", "2");
  EXPECT_EQ(errorOf([] { readEnvironment(); }),
            "rendezvous: MASTER_ADDR is not set (RANK and WORLD_SIZE are): set it to the host of rank 0");
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", "70000");
  EXPECT_EQ(errorOf([] { readEnvironment(); }), "rendezvous: MASTER_PORT is 70000, expected 1..65535");
  set("MASTER_PORT", "29500");
  set("RANK", "2");
  EXPECT_EQ(errorOf([] { readEnvironment(); }), "rendezvous: RANK is 2, not below WORLD_SIZE 2");
  set("RANK", "-1");
  EXPECT_EQ(errorOf([] { readEnvironment(); }), "rendezvous: RANK is -1, expected 0..16777216");
  set("RANK", "1");
  set("LOCAL_RANK", "1");
  set("LOCAL_WORLD_SIZE", "1");
  EXPECT_EQ(errorOf([] { readEnvironment(); }), "rendezvous: LOCAL_RANK is 1, not below LOCAL_WORLD_SIZE 1");
}

TEST_F(DistRendezvousEnv, NothingSetIsOneProcess) {
  const RendezvousInfo i = readEnvironment();
  EXPECT_EQ(i.source, "default");
  EXPECT_EQ(i.worldSize, 1);
  EXPECT_EQ(i.masterPort, kDefaultMasterPort);
}

TEST_F(DistRendezvousEnv, Mpirun) {
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_SIZE", "4");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  EXPECT_EQ(errorOf([] { readEnvironment(); }),
            "rendezvous: MASTER_ADDR is not set: mpirun runs the 4 ranks on several nodes and names no host for "
            "rank 0's store (export MASTER_ADDR=<rank 0's host> and pass it with mpirun -x MASTER_ADDR)");
  set("MASTER_ADDR", "node0");
  const RendezvousInfo i = readEnvironment();
  EXPECT_EQ(i.source, "mpirun");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.worldSize, 4);
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localWorldSize, 2);
  EXPECT_EQ(i.groupRank, 1);
  EXPECT_EQ(i.masterAddr, "node0");
  EXPECT_EQ(i.masterPort, 29500);
}

TEST_F(DistRendezvousEnv, MpirunOnOneNodeNeedsNoAddress) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "2");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  EXPECT_EQ(readEnvironment().masterAddr, "127.0.0.1");
}

TEST_F(DistRendezvousEnv, Slurm) {
  set("SLURM_PROCID", "5");
  set("SLURM_NTASKS", "7");
  set("SLURM_LOCALID", "2");
  set("SLURM_NODEID", "1");
  EXPECT_EQ(errorOf([] { readEnvironment(); }), "rendezvous: SLURM_TASKS_PER_NODE is not set (SLURM_PROCID is)");
  set("SLURM_TASKS_PER_NODE", "3(x2),1");
  set("SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3");
  RendezvousInfo i = readEnvironment();
  EXPECT_EQ(i.source, "slurm");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.worldSize, 7);
  EXPECT_EQ(i.localRank, 2);
  EXPECT_EQ(i.localWorldSize, 3);
  EXPECT_EQ(i.groupRank, 1);
  EXPECT_EQ(i.masterAddr, "10.1.2.3");
  // The first node of the job is preferred to srun's own address.
  set("SLURM_JOB_NODELIST", "gpu[07-09,12],cpu1");
  EXPECT_EQ(readEnvironment().masterAddr, "gpu07");
  set("SLURM_JOB_NODELIST", "rack[2-3]-n[5,6]");
  EXPECT_EQ(readEnvironment().masterAddr, "rack2-n5");
  set("MASTER_ADDR", "chosen");
  set("MASTER_PORT", "4000");
  i = readEnvironment();
  EXPECT_EQ(i.masterAddr, "chosen");
  EXPECT_EQ(i.masterPort, 4000);
  set("SLURM_NODEID", "2");  // 3(x2),1: nodes 0 and 1 run 3 tasks, node 2 one
  set("SLURM_LOCALID", "0");
  EXPECT_EQ(readEnvironment().localWorldSize, 1);
  set("SLURM_NODEID", "3");
  EXPECT_EQ(errorOf([] { readEnvironment(); }), "rendezvous: SLURM_TASKS_PER_NODE is '3(x2),1', which lists no node 3");
}

// --- rendezvous() ---

RendezvousInfo rankInfo(int rank, int world, uint16_t port, bool agent = false) {
  RendezvousInfo i;
  i.rank = rank;
  i.worldSize = world;
  i.masterAddr = "127.0.0.1";
  i.masterPort = port;
  i.useAgentStore = agent;
  return i;
}

TEST(DistRendezvous, RankZeroServesAndEveryRankSeesTheOthers) {
  // A free port for rank 0 to serve on (env:// needs it up front).
  testutil::ReservedPort reserved;
  const uint16_t port = reserved.port();
  reserved.release();
  constexpr int kWorld = 3;
  std::vector<std::shared_ptr<Store>> stores(kWorld);
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.emplace_back([&, r] {
      errors[r] = errorOf([&] {
        stores[r] = rendezvous(rankInfo(r, kWorld, port), "env://", 3000ms);
        stores[r]->set(fmt::format("hello/{}", r), std::to_string(r));
        for (int o = 0; o < kWorld; ++o) stores[r]->get(fmt::format("hello/{}", o));
      });
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(errors[r], "no error") << "rank " << r;
  ASSERT_TRUE(stores[1]);
  EXPECT_EQ(stores[1]->getString("hello/2"), "2");
  auto* prefix = dynamic_cast<PrefixStore*>(stores[0].get());
  ASSERT_TRUE(prefix);
  auto* tcp = dynamic_cast<TCPStore*>(prefix->base().get());
  ASSERT_TRUE(tcp);
  EXPECT_NE(tcp->server(), nullptr);  // rank 0 owns the server
}

TEST(DistRendezvous, WithTheAgentStoreEveryRankIsAClientAndRestartsGetFreshKeys) {
  TCPStoreServer agent("127.0.0.1", 0);
  for (int restart = 0; restart < 2; ++restart) {
    std::vector<std::shared_ptr<Store>> stores(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        RendezvousInfo i = rankInfo(r, 2, agent.port(), /*agent=*/true);
        i.restartCount = restart;
        stores[r] = rendezvous(i, "env://", 3000ms);
      });
    for (auto& t : ranks) t.join();
    ASSERT_TRUE(stores[0] && stores[1]);
    auto* tcp = dynamic_cast<TCPStore*>(dynamic_cast<PrefixStore&>(*stores[0]).base().get());
    EXPECT_EQ(tcp->server(), nullptr);
    // Keys of restart 0 are not there in restart 1.
    if (restart == 0) stores[0]->set("only-in-0", std::string("x"));
    EXPECT_EQ(stores[1]->check({"only-in-0"}), restart == 0);
  }
}

TEST(DistRendezvous, AMissingRankIsNamedAfterTheTimeout) {
  TCPStoreServer agent("127.0.0.1", 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(errorOf([&] { rendezvous(rankInfo(0, 3, agent.port(), true), "env://", 300ms); }),
            fmt::format("rendezvous: timed out after 300 ms waiting for rank(s) 1, 2 of a world of 3 at 127.0.0.1:{}",
                        agent.port()));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2000ms);
}

TEST(DistRendezvous, RanksThatDisagreeOnTheWorldOrShareARankAreStopped) {
  TCPStoreServer agent("127.0.0.1", 0);
  std::thread first([&] { errorOf([&] { rendezvous(rankInfo(0, 2, agent.port(), true), "env://", 500ms); }); });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(
      errorOf([&] { rendezvous(rankInfo(1, 3, agent.port(), true), "env://", 500ms); }),
      fmt::format("rendezvous: rank 1 has a world of 3 but ranks before it have 2 (at 127.0.0.1:{})", agent.port()));
  EXPECT_TRUE(errorOf([&] {
                rendezvous(rankInfo(0, 2, agent.port(), true), "env://", 500ms);
              }).starts_with("rendezvous: rank 0 joined twice, by "));
  first.join();
}

TEST(DistRendezvous, FileInitMethodAcrossProcesses) {
  const std::string path = (std::filesystem::temp_directory_path() / fmt::format("kiln-rdzv-{}", getpid())).string();
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r)
    pids.push_back(testutil::forkChild([&path, r] {
      auto store = rendezvous(rankInfo(r, 2, 1), "file://" + path, 3000ms);
      store->set(fmt::format("v/{}", r), std::to_string(r + 40));
      return store->getString(fmt::format("v/{}", 1 - r)) == std::to_string(41 - r) ? 0 : 2;
    }));
  for (pid_t pid : pids) EXPECT_EQ(testutil::waitChild(pid), 0);
  EXPECT_FALSE(std::filesystem::exists(path));  // the last one removed it
}

TEST(DistRendezvous, AWorldOfOneTakesNoPort) {
  auto store = rendezvous(rankInfo(0, 1, kDefaultMasterPort), "env://", 100ms);
  auto* prefix = dynamic_cast<PrefixStore*>(store.get());
  ASSERT_TRUE(prefix);
  EXPECT_NE(dynamic_cast<HashStore*>(prefix->base().get()), nullptr);
  store->set("k", std::string("v"));
  EXPECT_EQ(store->getString("k"), "v");
}

TEST(DistRendezvous, UnknownInitMethodsAreNamed) {
  EXPECT_EQ(errorOf([] { rendezvous(rankInfo(0, 1, 1), "redis://x", 100ms); }),
            "rendezvous: unknown init method 'redis://x' (expected env://, tcp://host:port or file:///path)");
  EXPECT_EQ(errorOf([] { rendezvous(rankInfo(0, 1, 1), "tcp://nohost", 100ms); }),
            "rendezvous: init method 'tcp://nohost' is not tcp://host:port");
}

}  // namespace
}  // namespace kiln::runtime::dist

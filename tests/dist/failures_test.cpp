// What the process groups do when ranks disagree or die: mismatched
// collectives are reported on every rank naming both calls (and the group
// stays usable); a rank that leaves, or stops calling, makes the others
// fail within the timeout + 1 s naming it, and the group is then unusable
// with a clear error; a rank that never joins is named at rendezvous.
#include <gtest/gtest.h>

#include <thread>

#include "tests/common/error_of.h"
#include "tests/dist/harness.h"

namespace kiln::testing::dist {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TEST(Mismatch, AllReduceAgainstBroadcastIsReportedOnEveryRank) {
  auto groups = makeGroups(2);
  std::vector<std::string> errors(2);
  std::vector<double> took(2);
  expectNoErrors(runRanks(2, [&](int r) {
    rd::BufferRef x = cpuBuffer(DType::f32, 4);
    auto& g = *groups[static_cast<size_t>(r)];
    const auto start = Clock::now();
    errors[static_cast<size_t>(r)] = waitError(r == 0 ? g.allReduce(x) : g.broadcast(x, 0));
    took[static_cast<size_t>(r)] = secondsSince(start);
    // The mismatch was found before any data moved: the group still works.
    setValue(x, 0, r + 1.0);
    g.allReduce(x)->wait();
    EXPECT_EQ(getValue(x, 0), 3.0);
  }));
  const std::string tail =
      "collective mismatch at sequence 1: rank 0 called all_reduce(f32[4], sum), rank 1 called broadcast(f32[4], "
      "root=0)";
  EXPECT_EQ(errors[0], "all_reduce: " + tail);
  EXPECT_EQ(errors[1], "broadcast: " + tail);
  for (double t : took) EXPECT_LT(t, 5.0) << "reported at once, not at the 10 s timeout";
}

TEST(Mismatch, ShapesAndDTypesAreCompared) {
  auto groups = makeGroups(3);
  std::vector<std::string> errors(3);
  expectNoErrors(runRanks(3, [&](int r) {
    auto& g = *groups[static_cast<size_t>(r)];
    rd::BufferRef x = cpuBuffer(DType::f32, r == 2 ? 5 : 4, {r == 2 ? 5 : 4});
    errors[static_cast<size_t>(r)] = waitError(g.allReduce(x, rd::ReduceOp::max));
    rd::BufferRef y = cpuBuffer(r == 1 ? DType::i64 : DType::f32, 2, {1, 2});
    EXPECT_EQ(waitError(g.broadcast(y, 0)),
              "broadcast: collective mismatch at sequence 2: rank 0 called broadcast(f32[1,2], root=0), rank 1 "
              "called broadcast(i64[1,2], root=0)");
  }));
  for (const std::string& e : errors)
    EXPECT_EQ(e,
              "all_reduce: collective mismatch at sequence 1: rank 0 called all_reduce(f32[4], max), rank 2 called "
              "all_reduce(f32[5], max)");
}

TEST(Mismatch, ListShapesNeedTheDetailModeToBeShown) {
  // Rank 1 gathers into [2,2] tensors, rank 0 into [4]: the fingerprints'
  // summaries agree, their hashes do not.
  for (rd::DebugLevel level : {rd::DebugLevel::on, rd::DebugLevel::detail}) {
    rd::ProcessGroupOptions options = testOptions();
    options.debug = level;
    auto groups = makeGroups(2, options);
    std::vector<std::string> errors(2);
    expectNoErrors(runRanks(2, [&](int r) {
      rd::BufferRef in = cpuBuffer(DType::f32, 4);
      std::vector<rd::BufferRef> out;
      for (int k = 0; k < 2; ++k)
        out.push_back(cpuBuffer(DType::f32, 4, r == 1 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{4}));
      errors[static_cast<size_t>(r)] = waitError(groups[static_cast<size_t>(r)]->allGather(out, in));
    }));
    EXPECT_EQ(errors[0], errors[1]);
    if (level == rd::DebugLevel::on)
      EXPECT_EQ(errors[0],
                "all_gather: collective mismatch at sequence 1: rank 0 called all_gather(f32[4]), rank 1 called "
                "all_gather(f32[4]) (the shapes of their tensor lists differ; KILN_DIST_DEBUG=detail shows the "
                "whole signatures)");
    else
      EXPECT_EQ(errors[0],
                "all_gather: collective mismatch at sequence 1 (KILN_DIST_DEBUG=detail): rank 0 called "
                "all_gather(in=[f32[4]], out=[f32[4], f32[4]]), rank 1 called all_gather(in=[f32[4]], "
                "out=[f32[2,2], f32[2,2]])");
  }
}

TEST(Mismatch, AFailedArgumentCheckTakesNoSequenceNumber) {
  auto groups = makeGroups(2);
  expectNoErrors(runRanks(2, [&](int r) {
    auto& g = *groups[static_cast<size_t>(r)];
    rd::BufferRef ints = cpuBuffer(DType::i32, 2);
    if (r == 1) {
      EXPECT_THROW(g.allReduce(ints, rd::ReduceOp::avg), Error);
    }
    auto w = g.allReduce(ints);
    w->wait();
    EXPECT_EQ(w->sequence(), 1u);
  }));
}

TEST(Mismatch, DetailModeAgreesWhenTheCallsAgree) {
  rd::ProcessGroupOptions options = testOptions();
  options.debug = rd::DebugLevel::detail;
  auto groups = makeGroups(3, options);
  expectNoErrors(runRanks(3, [&](int r) {
    for (int i = 0; i < 3; ++i) {
      rd::BufferRef x = cpuBuffer(DType::f64, 3);
      setValue(x, 0, r);
      groups[static_cast<size_t>(r)]->allReduce(x)->wait();
      EXPECT_EQ(getValue(x, 0), 3.0);
    }
  }));
}

TEST(DeadPeer, ARankThatLeavesIsNamedByEverySurvivor) {
  constexpr int n = 3;
  auto groups = makeGroups(n, testOptions(2s));
  std::vector<std::string> errors(n);
  std::vector<double> took(n);
  expectNoErrors(runRanks(n, [&](int r) {
    auto& g = *groups[static_cast<size_t>(r)];
    rd::BufferRef x = cpuBuffer(DType::f32, 8);
    g.allReduce(x)->wait();
    g.barrier()->wait();
    if (r == 2) {
      g.abort();  // this rank stops participating
      return;
    }
    std::this_thread::sleep_for(100ms);
    const auto start = Clock::now();
    errors[static_cast<size_t>(r)] = waitError(g.allReduce(x));
    took[static_cast<size_t>(r)] = secondsSince(start);
    EXPECT_TRUE(g.broken());
    try {
      g.allReduce(x);
      ADD_FAILURE() << "a broken group accepted a call";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("all_reduce: the gloo process group (rank " + std::to_string(r) +
                                                " of 3) is unusable after an earlier failure: all_reduce: sequence 3 "
                                                "failed on rank",
                                            0),
                0u)
          << e.what();
    }
  }));
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("all_reduce: sequence 3 failed on rank " + std::to_string(r) +
                                                  " of 3 (gloo, timeout 2000 ms): rank 2 left the group"),
              std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_LT(took[static_cast<size_t>(r)], 3.0) << "within the timeout + 1 s";
  }
  // The rank that left: its own later calls fail at once.
  EXPECT_EQ(errorOf([&] { groups[2]->barrier(); }), "barrier: the gloo process group (rank 2 of 3) has been shut down");
}

TEST(DeadPeer, ARankThatStopsCallingIsNamedWithinTheTimeout) {
  // Rank 2 is alive but never calls the collective (stuck elsewhere): the
  // others time out on it (or on a rank waiting for it) and name it.
  constexpr int n = 3;
  auto groups = makeGroups(n, testOptions(1s));
  std::vector<std::string> errors(n);
  std::vector<double> took(n);
  expectNoErrors(runRanks(n, [&](int r) {
    auto& g = *groups[static_cast<size_t>(r)];
    rd::BufferRef x = cpuBuffer(DType::f32, 8);
    if (r == 2) {
      std::this_thread::sleep_for(2500ms);
      return;
    }
    const auto start = Clock::now();
    errors[static_cast<size_t>(r)] = waitError(g.allReduce(x));
    took[static_cast<size_t>(r)] = secondsSince(start);
  }));
  for (int r = 0; r < 2; ++r) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_EQ(
        e.rfind("all_reduce: sequence 1 failed on rank " + std::to_string(r) + " of 3 (gloo, timeout 1000 ms): ", 0),
        0u)
        << e;
    EXPECT_NE(e.find("timed out waiting for rank 2 (stuck, dead, or not calling all_reduce)"), std::string::npos) << e;
    EXPECT_LT(took[static_cast<size_t>(r)], 2.0) << "within the timeout + 1 s";
    EXPECT_GT(took[static_cast<size_t>(r)], 0.9) << "not before the timeout";
  }
}

TEST(DeadPeer, ARankThatNeverJoinsIsNamedAtRendezvous) {
  auto store = std::make_shared<rd::HashStore>();
  const auto errors = runRanks(2, [&](int r) { rd::createProcessGroup("gloo", store, r, 3, testOptions(500ms)); });
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(errors[static_cast<size_t>(r)],
              "init_process_group: gloo rank " + std::to_string(r) + " of 3: rank(s) 2 did not join within 500 ms");
}

TEST(DeadPeer, ASendWithoutAReceiverTimesOutNamingThePeer) {
  auto groups = makeGroups(2, testOptions(1s));
  rd::BufferRef x = cpuBuffer(DType::f32, 4);
  const auto start = Clock::now();
  const std::string e = waitError(groups[0]->send(x, 1, 3));
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_EQ(e.rfind("send: send to rank 1 (tag 3) failed on rank 0 of 2 (gloo, timeout 1000 ms): timed out waiting "
                    "for rank 1 (stuck, dead, or not calling recv)",
                    0),
            0u)
      << e;
}

TEST(Mismatch, ASendAndARecvThatDisagreeAreReportedNotHung) {
  auto groups = makeGroups(2, testOptions(2s));
  std::vector<std::string> errors(2);
  std::vector<double> took(2);
  expectNoErrors(runRanks(2, [&](int r) {
    const auto start = Clock::now();
    if (r == 0) {
      errors[0] = waitError(groups[0]->send(cpuBuffer(DType::f32, 4), 1));
    } else {
      errors[1] = waitError(groups[1]->recv(cpuBuffer(DType::f32, 8, {2, 4}), 0));
    }
    took[static_cast<size_t>(r)] = secondsSince(start);
  }));
  EXPECT_EQ(errors[1],
            "recv: mismatch with rank 0 (tag 0): rank 0 called send(f32[4], to=1, tag=0), rank 1 called recv(f32[2,4], "
            "from=0, tag=0)");
  // Gloo delivered the 16 bytes into the 32-byte receive: the sender
  // cannot tell; the receiver reports, and its group is broken (the data
  // it got is not what it asked for).
  EXPECT_EQ(errors[0], "no error");
  EXPECT_TRUE(groups[1]->broken());
  for (double t : took) EXPECT_LT(t, 3.0);
}

TEST(Shutdown, AbortEndsAPendingReceiveAtOnce) {
  auto groups = makeGroups(2);
  rd::BufferRef x = cpuBuffer(DType::f32, 4);
  auto pending = groups[0]->recv(x, 1);
  std::this_thread::sleep_for(100ms);
  const auto start = Clock::now();
  groups[0]->abort();
  EXPECT_LT(secondsSince(start), 1.0) << "not at the 10 s timeout";
  EXPECT_EQ(waitError(pending), "recv: the gloo process group (rank 0 of 2) was shut down before the call completed");
  // Rank 1 sees rank 0 gone: its call fails naming rank 0.
  const std::string e = waitError(groups[1]->send(x, 0));
  EXPECT_EQ(
      e.rfind("send: send to rank 0 (tag 0) failed on rank 1 of 2 (gloo, timeout 10000 ms): rank 0 left the group", 0),
      0u)
      << e;
}

TEST(Shutdown, ShutdownAfterTheLastCallSparesSlowerPeers) {
  // Gloo resets connections when a context goes: a rank that leaves right
  // after its last call could fail a slower peer's call (DIST_NOTES' exit
  // race). shutdown() is a barrier first, so every rank's call succeeds.
  for (int round = 0; round < 3; ++round) {
    auto groups = makeGroups(4);
    expectNoErrors(runRanks(4, [&](int r) {
      rd::BufferRef x = cpuBuffer(DType::f32, 1 << 12);
      groups[static_cast<size_t>(r)]->allReduce(x)->wait();
      groups[static_cast<size_t>(r)]->shutdown();
    }));
  }
}

}  // namespace
}  // namespace kiln::testing::dist

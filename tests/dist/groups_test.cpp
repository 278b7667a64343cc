// Process groups as objects: sub-groups, asynchronous Work, argument
// checks, and the backends' availability (NCCL without a GPU here).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/common/error_of.h"
#include "tests/common/scoped_env.h"
#include "tests/dist/harness.h"

namespace kiln::testing::dist {
namespace {

TEST(SubGroups, MembersReduceAmongThemselvesAndOthersGetNone) {
  constexpr int n = 4;
  auto world = makeGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    auto& g = *world[static_cast<size_t>(r)];
    auto odd = g.newGroup({3, 1});  // sorted: ranks 1 and 3
    auto low = g.newGroup({0, 1, 2});
    EXPECT_EQ(odd != nullptr, r == 1 || r == 3);
    EXPECT_EQ(low != nullptr, r <= 2);
    rd::BufferRef x = cpuBuffer(DType::i64, 2);
    if (odd) {
      EXPECT_EQ(odd->size(), 2);
      EXPECT_EQ(odd->rank(), r / 2);
      setValue(x, 0, r);
      odd->allReduce(x)->wait();
      EXPECT_EQ(getValue(x, 0), 1 + 3);
    }
    if (low) {
      EXPECT_EQ(low->size(), 3);
      setValue(x, 1, r + 1);
      low->allReduce(x, rd::ReduceOp::product)->wait();
      EXPECT_EQ(getValue(x, 1), 1 * 2 * 3);
    }
    // The world group still works, with its own sequence numbers.
    rd::BufferRef y = cpuBuffer(DType::f32, 1);
    setValue(y, 0, 1);
    auto w = g.allReduce(y);
    w->wait();
    EXPECT_EQ(getValue(y, 0), 4.0);
    EXPECT_EQ(w->sequence(), 1u);
  }));
}

TEST(SubGroups, RanksAreChecked) {
  auto world = makeGroups(1);
  EXPECT_EQ(errorOf([&] { world[0]->newGroup({0, 4}); }), "new_group: rank 4 is not in this group of 1 ranks (0 to 0)");
  EXPECT_EQ(errorOf([&] { world[0]->newGroup({0, 0}); }), "new_group: rank 0 is listed twice");
  EXPECT_EQ(errorOf([&] { world[0]->newGroup({}); }), "new_group: expected at least one rank");
}

TEST(AsyncWork, CallsRunInIssueOrderAndCanBeWaitedInAnyOrder) {
  constexpr int n = 3, calls = 8;
  auto groups = makeGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    std::vector<rd::BufferRef> xs;
    std::vector<std::shared_ptr<rd::Work>> works;
    for (int i = 0; i < calls; ++i) {
      xs.push_back(cpuBuffer(DType::f32, 16));
      setValue(xs.back(), 0, r * 100 + i);
      works.push_back(groups[static_cast<size_t>(r)]->allReduce(xs.back()));
    }
    for (int i = calls - 1; i >= 0; --i) {
      works[static_cast<size_t>(i)]->wait();
      EXPECT_TRUE(works[static_cast<size_t>(i)]->isCompleted());
      EXPECT_TRUE(works[static_cast<size_t>(i)]->isSuccess());
      EXPECT_EQ(works[static_cast<size_t>(i)]->exception(), nullptr);
      EXPECT_EQ(works[static_cast<size_t>(i)]->sequence(), static_cast<uint64_t>(i + 1));
      EXPECT_EQ(works[static_cast<size_t>(i)]->description(), "all_reduce(f32[16], sum)");
      EXPECT_EQ(getValue(xs[static_cast<size_t>(i)], 0), 300 + 3 * i);
    }
  }));
}

TEST(AsyncWork, WaitForReturnsFalseWhileTheCallWaitsForItsPeers) {
  auto groups = makeGroups(2);
  expectNoErrors(runRanks(2, [&](int r) {
    rd::BufferRef x = cpuBuffer(DType::f32, 4);
    if (r == 1) std::this_thread::sleep_for(1s);
    auto w = groups[static_cast<size_t>(r)]->allReduce(x);
    if (r == 0) {
      EXPECT_FALSE(w->waitFor(100ms));
      EXPECT_FALSE(w->isCompleted());
      EXPECT_EQ(w->exception(), nullptr);
    }
    EXPECT_TRUE(w->waitFor(5s));
    EXPECT_TRUE(w->isSuccess());
  }));
}

TEST(Arguments, EveryCollectiveChecksWhatItIsGiven) {
  auto groups = makeGroups(2);
  rd::ProcessGroup& g = *groups[0];
  rd::BufferRef f = cpuBuffer(DType::f32, 4), d = cpuBuffer(DType::f64, 4), ints = cpuBuffer(DType::i32, 4);
  EXPECT_EQ(errorOf([&] { g.allGather({f}, f); }), "all_gather: expected 2 output tensors (one per rank), got 1");
  EXPECT_EQ(errorOf([&] {
              g.allGather({f, cpuBuffer(DType::f32, 3)}, f);
            }),
            "all_gather: expected every output tensor to hold 4 elements, got f32[3]@cpu");
  EXPECT_EQ(errorOf([&] {
              g.allGather({f, d}, f);
            }),
            "all_gather: expected every tensor of one dtype, got f32[4]@cpu and f64[4]@cpu");
  EXPECT_EQ(errorOf([&] { g.reduceScatter(f, {f}); }),
            "reduce_scatter: expected 2 input tensors (one per rank), got 1");
  EXPECT_EQ(errorOf([&] { g.allToAll({f, f}, {f}); }), "all_to_all: expected 2 input tensors (one per rank), got 1");
  EXPECT_EQ(errorOf([&] { g.broadcast(f, 2); }), "broadcast: root 2 is not a rank of this group of 2");
  EXPECT_EQ(errorOf([&] { g.send(f, 0); }), "send: peer 0 is not another rank of this group of 2 (this is rank 0)");
  EXPECT_EQ(errorOf([&] { g.recv(f, 1, -1); }), "recv: tag -1 is negative");
  EXPECT_EQ(errorOf([&] { g.allReduce(ints, rd::ReduceOp::avg); }),
            "all_reduce: avg needs a floating-point dtype, got i32[4]@cpu");
  rd::BufferRef past = f;
  past.offset = 8;
  EXPECT_EQ(errorOf([&] { g.allReduce(past); }),
            "all_reduce: f32[4]@cpu at byte offset 8 runs past the end of its buffer of 16 bytes");
  rd::BufferRef onCuda;
  onCuda.numel = 4;
  onCuda.device = Device::cuda(0);
  EXPECT_EQ(errorOf([&] { g.allReduce(onCuda); }),
            "all_reduce: the gloo backend runs on cpu and opencl tensors, got f32[4]@cuda:0 (use the nccl backend for "
            "cuda tensors)");
  EXPECT_FALSE(g.supports(Device::cuda(0)));
  EXPECT_TRUE(g.supports(Device::cpu()));
  EXPECT_TRUE(g.supports(Device::opencl(0)));
  // Nothing was numbered: the next call is sequence 1 on both ranks.
  expectNoErrors(runRanks(2, [&](int r) { EXPECT_EQ(groups[static_cast<size_t>(r)]->barrier()->sequence(), 1u); }));
}

TEST(Arguments, GroupsAreCheckedWhenMade) {
  auto store = std::make_shared<rd::HashStore>();
  EXPECT_EQ(errorOf([&] { rd::createProcessGroup("mpi", store, 0, 1); }),
            "init_process_group: unknown backend 'mpi' (expected gloo or nccl)");
  EXPECT_EQ(errorOf([&] { rd::createProcessGroup("gloo", store, 2, 2); }),
            "init_process_group: rank 2 is not in a group of 2 ranks (0 to 1)");
  EXPECT_EQ(errorOf([&] { rd::createProcessGroup("gloo", nullptr, 0, 1); }),
            "init_process_group: no store to meet through");
  rd::ProcessGroupOptions zero;
  zero.timeout = 0ms;
  EXPECT_EQ(errorOf([&] { rd::createProcessGroup("gloo", store, 0, 1, zero); }),
            "init_process_group: the timeout must be positive, got 0 ms");
}

TEST(Arguments, KilnDistDebugIsRead) {
  {
    testutil::ScopedEnv env("KILN_DIST_DEBUG", "detail");
    EXPECT_EQ(rd::debugLevelFromEnvironment(), rd::DebugLevel::detail);
    EXPECT_EQ(makeGroups(1)[0]->debugLevel(), rd::DebugLevel::detail);
  }
  {
    testutil::ScopedEnv env("KILN_DIST_DEBUG", "off");
    EXPECT_EQ(rd::debugLevelFromEnvironment(), rd::DebugLevel::off);
  }
  {
    testutil::ScopedEnv env("KILN_DIST_DEBUG", nullptr);
    EXPECT_EQ(rd::debugLevelFromEnvironment(), rd::DebugLevel::on);
  }
  testutil::ScopedEnv env("KILN_DIST_DEBUG", "verbose");
  EXPECT_EQ(errorOf([] { rd::debugLevelFromEnvironment(); }),
            "KILN_DIST_DEBUG: expected off, on or detail, got 'verbose'");
}

TEST(Nccl, WithoutAGpuTheBackendSaysSo) {
  std::string why;
  if (isAvailable(DeviceType::cuda)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(rd::isBackendAvailable("nccl", &why));
  EXPECT_EQ(why.rfind("nccl: no CUDA device: ", 0), 0u) << why;
  auto store = std::make_shared<rd::HashStore>();
  const std::string e = errorOf([&] { rd::createProcessGroup("nccl", store, 0, 1); });
  EXPECT_EQ(e, why);
}

TEST(Nccl, EachBackendRefusesTheOthersTensors) {
  rd::BufferRef cpu;
  cpu.numel = 4;
  EXPECT_EQ(rd::deviceMismatchMessage("nccl", rd::OpKind::allReduce, cpu),
            "all_reduce: the nccl backend runs on cuda tensors, got f32[4]@cpu (use the gloo backend for cpu and "
            "opencl tensors)");
  rd::BufferRef cuda = cpu;
  cuda.device = Device::cuda(1);
  EXPECT_EQ(rd::deviceMismatchMessage("nccl", rd::OpKind::broadcast, cuda), "");
  EXPECT_EQ(rd::deviceMismatchMessage("gloo", rd::OpKind::broadcast, cuda),
            "broadcast: the gloo backend runs on cpu and opencl tensors, got f32[4]@cuda:1 (use the nccl backend for "
            "cuda tensors)");
}

TEST(Gloo, IsBuiltIn) {
  std::string why;
  EXPECT_TRUE(rd::isBackendAvailable("gloo", &why)) << why;
  EXPECT_FALSE(rd::isBackendAvailable("mpi", &why));
  EXPECT_EQ(why, "unknown backend 'mpi' (expected gloo or nccl)");
}

}  // namespace
}  // namespace kiln::testing::dist

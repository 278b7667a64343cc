// kiln::dist on Tensors (frontend/distributed.h): the collectives write
// their results into the tensors in place, check that the tensors can be
// used so, and the default group's life cycle (dist::init ... destroy).
#include <gtest/gtest.h>

#include "frontend/kiln.h"
#include "tests/common/error_of.h"
#include "tests/common/scoped_env.h"
#include "tests/dist/harness.h"

namespace kiln::testing::dist {
namespace {

TEST(Frontend, CollectivesOnTensors) {
  constexpr int n = 3;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    const kiln::dist::ProcessGroup& g = groups[static_cast<size_t>(r)];
    EXPECT_EQ(g.rank(), r);
    EXPECT_EQ(g.size(), n);
    EXPECT_EQ(g.backend(), "gloo");
    const float me = static_cast<float>(r);

    Tensor sum = full({2, 3}, me + 1);
    const uint64_t before = sum.version();
    kiln::dist::Work w = g.allReduce(sum, kiln::dist::ReduceOp::sum);
    w.wait();
    EXPECT_TRUE(w.isSuccess());
    EXPECT_EQ(w.description(), "all_reduce(f32[2,3], sum)");
    EXPECT_EQ(sum.toVector(), std::vector<float>(6, 6.0f));
    EXPECT_GT(sum.version(), before) << "an in-place write moves the version";

    Tensor b = fromVector(std::vector<int64_t>{r, 10 * r}, {2});
    g.broadcast(b, 2).wait();
    EXPECT_EQ(b.toVector<int64_t>(), (std::vector<int64_t>{2, 20}));

    std::vector<Tensor> gathered;  // empty: made like the input
    g.allGather(gathered, full({2}, me, DType::f64)).wait();
    ASSERT_EQ(gathered.size(), 3u);
    for (int k = 0; k < n; ++k)
      EXPECT_EQ(gathered[static_cast<size_t>(k)].toVector<double>(), std::vector<double>(2, k));

    Tensor part = zeros({2});
    g.reduceScatter(part, {full({2}, me), full({2}, 10 * me), full({2}, 100 * me)}, kiln::dist::ReduceOp::max).wait();
    EXPECT_EQ(part.toVector(), std::vector<float>(2, 2.0f * (r == 0 ? 1 : r == 1 ? 10 : 100)));

    std::vector<Tensor> received;
    std::vector<Tensor> sent;
    for (int k = 0; k < n; ++k) sent.push_back(full({1}, 10 * r + k, DType::i32));
    g.allToAll(received, sent).wait();
    for (int k = 0; k < n; ++k) EXPECT_EQ(received[static_cast<size_t>(k)].toVector<int32_t>()[0], 10 * k + r);

    Tensor message = full({3}, me);
    auto out = g.send(message, (r + 1) % n, 1);
    Tensor in = zeros({3});
    g.recv(in, (r + n - 1) % n, 1).wait();
    out.wait();
    EXPECT_EQ(in.toVector(), std::vector<float>(3, static_cast<float>((r + n - 1) % n)));
    g.barrier().wait();
  }));
}

TEST(Frontend, TensorsMustBeUsableInPlace) {
  auto groups = makeFrontendGroups(1);
  Tensor t = zeros({2, 3}).t();
  EXPECT_EQ(errorOf([&] { groups[0].allReduce(t); }),
            "all_reduce: expected a contiguous tensor, got f32[3,2]@cpu with strides [1,3] (call contiguous() first)");
  Tensor undefined;
  EXPECT_EQ(errorOf([&] { groups[0].broadcast(undefined, 0); }), "broadcast: an undefined tensor");
  // A contiguous view at an offset is used in place.
  Tensor base = arange(6.0);
  Tensor tail = base.slice(0, 3, 6);
  groups[0].allReduce(tail, kiln::dist::ReduceOp::avg).wait();
  EXPECT_EQ(base.toVector(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(Frontend, NonMembersOfASubGroupGetAHandleThatSaysSo) {
  constexpr int n = 3;
  auto groups = makeFrontendGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    kiln::dist::ProcessGroup pair = groups[static_cast<size_t>(r)].newGroup({0, 2});
    Tensor x = full({1}, 1.0);
    if (r == 1) {
      EXPECT_FALSE(pair.isMember());
      EXPECT_EQ(pair.rank(), -1);
      EXPECT_EQ(errorOf([&] { pair.allReduce(x); }), "all_reduce: this rank is not a member of the group");
      return;
    }
    EXPECT_TRUE(pair.isMember());
    pair.allReduce(x).wait();
    EXPECT_EQ(x.toVector(), std::vector<float>{2.0f});
  }));
}

TEST(Frontend, TheDefaultGroup) {
  EXPECT_FALSE(kiln::dist::isInitialized());
  EXPECT_EQ(errorOf([] { kiln::dist::getRank(); }),
            "dist: the default process group is not initialized (call dist::init first)");
  {
    // No store and no launcher in the environment: a world of one process.
    testutil::ScopedEnv rank("RANK", nullptr), world("WORLD_SIZE", nullptr), ompi("OMPI_COMM_WORLD_RANK", nullptr),
        slurm("SLURM_PROCID", nullptr);
    kiln::dist::init("gloo");
    EXPECT_EQ(kiln::dist::getRank(), 0);
    EXPECT_EQ(kiln::dist::getWorldSize(), 1);
    Tensor one = ones({2});
    kiln::dist::allReduce(one).wait();
    EXPECT_EQ(one.toVector(), std::vector<float>(2, 1.0f));
    kiln::dist::destroyProcessGroup();
  }
  kiln::dist::InitOptions init;
  init.store = std::make_shared<kiln::dist::HashStore>();
  init.rank = 0;
  init.worldSize = 1;
  init.options.hostname = "127.0.0.1";
  kiln::dist::init("gloo", init);
  EXPECT_TRUE(kiln::dist::isInitialized());
  EXPECT_EQ(kiln::dist::getRank(), 0);
  EXPECT_EQ(kiln::dist::getWorldSize(), 1);
  EXPECT_EQ(errorOf([&] { kiln::dist::init("gloo", init); }),
            "dist::init: the default process group exists already (rank 0 of 1); call dist::destroyProcessGroup() "
            "first");
  Tensor x = full({4}, 3.0);
  kiln::dist::allReduce(x).wait();
  kiln::dist::barrier().wait();
  EXPECT_EQ(x.toVector(), std::vector<float>(4, 3.0f));
  EXPECT_TRUE(kiln::dist::newGroup({0}).isMember());
  kiln::dist::destroyProcessGroup();
  // The group's keys went under the default group's prefix.
  EXPECT_TRUE(init.store->check({"kiln/default_pg/0/kiln/left/0"}));
  EXPECT_FALSE(kiln::dist::isInitialized());
  EXPECT_EQ(errorOf([] { kiln::dist::getWorldSize(); }),
            "dist: the default process group is not initialized (call dist::init first)");
}

TEST(Frontend, OpenCLTensors) {
  std::string why;
  if (!isAvailable(DeviceType::opencl, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  auto groups = makeFrontendGroups(2);
  expectNoErrors(runRanks(2, [&](int r) {
    Stream stream = Stream::create(Device::opencl(0));
    StreamGuard guard(stream);
    Tensor x = full({5}, r + 1.0, DType::f32, Device::opencl(0)) * 2.0;  // a kernel pending on the stream
    groups[static_cast<size_t>(r)].allReduce(x).wait();
    EXPECT_EQ(x.toVector(), std::vector<float>(5, 6.0f));
    std::vector<Tensor> all;
    groups[static_cast<size_t>(r)].allGather(all, x.to(DType::f16)).wait();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[1].device(), Device::opencl(0));
    EXPECT_EQ(all[1].to(DType::f32).toVector(), std::vector<float>(5, 6.0f));
  }));
}

}  // namespace
}  // namespace kiln::testing::dist

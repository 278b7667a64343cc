// A regression test of Note [Cached Gloo algorithms] (found by
// examples/train_digits_ddp.cpp, which hung in 1 run of 3 under kiln-run
// with 2 processes): the cache once reused instances when every rank had
// *an* instance for the call's key, but the key holds the rank's own host
// addresses, and each instance keeps the Gloo slot it took from nextSlot()
// when it was built. Two ranks whose buffers hit instances built at
// different calls ran them on different slots, and each waited for data
// the other sent elsewhere: a read timeout on both. Now the ranks reuse
// only instances built by the same call (Fingerprint::cachedAt).
#include <gtest/gtest.h>

#include "tests/dist/harness.h"

namespace kiln::testing::dist {
namespace {

TEST(GlooCacheSlots, RanksHittingInstancesOfDifferentCallsBuildNewOnes) {
  auto groups = makeGroups(2, testOptions(2s));
  expectNoErrors(runRanks(2, [&](int r) {
    rd::ProcessGroup& g = *groups[static_cast<size_t>(r)];
    rd::BufferRef a = cpuBuffer(DType::f64, 1), b = cpuBuffer(DType::f64, 1);
    setValue(a, 0, r);
    setValue(b, 0, r);
    g.allReduce(a, rd::ReduceOp::max)->wait();  // builds and caches an instance on a's address (slot s1)
    g.allReduce(b, rd::ReduceOp::max)->wait();  // ... and one on b's (slot s2)
    // The same call on both ranks (f64[1], max), on a buffer each has used
    // before: both hit their cache, rank 0 the instance on slot s1, rank 1
    // the one on s2, so both must build new ones instead.
    rd::BufferRef& again = r == 0 ? a : b;
    setValue(again, 0, 10 + r);
    g.allReduce(again, rd::ReduceOp::max)->wait();
    EXPECT_EQ(getValue(again, 0), 11.0) << "rank " << r;
    // And the same buffers on both ranks again: instances of one call, reused.
    setValue(a, 0, 20 + r);
    g.allReduce(a, rd::ReduceOp::max)->wait();
    EXPECT_EQ(getValue(a, 0), 21.0) << "rank " << r;
    setValue(a, 0, 30 + r);
    g.allReduce(a, rd::ReduceOp::max)->wait();
    EXPECT_EQ(getValue(a, 0), 31.0) << "rank " << r;
  }));
}

}  // namespace
}  // namespace kiln::testing::dist

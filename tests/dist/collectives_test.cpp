// Every collective of the gloo backend, for every dtype and reduce op, on
// 2, 3 and 4 ranks (threads), against the same computation done locally;
// calls split in pieces; a group of one rank.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/dist/harness.h"

namespace kiln::testing::dist {
namespace {

constexpr int64_t kNumel = 5;

/// Rank r's element i: small integers, so that every sum and product the
/// tests make is exact in every dtype (bf16 holds integers up to 256).
double valueOf(int r, int64_t i, DType dtype) {
  if (dtype == DType::boolean) return (i % 3 == 0 || r == i % 4) ? 1 : 0;
  return 1.0 + static_cast<double>((r * 3 + i) % 4);
}

std::string where(DType dtype, int rank, int64_t i) {
  return fmt::format("{} on rank {} at {}", dtypeName(dtype), rank, i);
}

class Collectives : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
};

TEST_P(Collectives, AllReduceEveryDTypeAndOp) {
  auto groups = makeGroups(n());
  expectNoErrors(runRanks(n(), [&](int r) {
    for (DType dtype : kAllDTypes)
      for (rd::ReduceOp op : kAllOps) {
        if (op == rd::ReduceOp::avg && !isFloatingPoint(dtype)) continue;
        rd::BufferRef b = cpuBuffer(dtype, kNumel);
        for (int64_t i = 0; i < kNumel; ++i) setValue(b, i, valueOf(r, i, dtype));
        groups[static_cast<size_t>(r)]->allReduce(b, op)->wait();
        for (int64_t i = 0; i < kNumel; ++i) {
          std::vector<double> all;
          for (int k = 0; k < n(); ++k) all.push_back(valueOf(k, i, dtype));
          EXPECT_NEAR(getValue(b, i), reduceReference(all, op, dtype), tolerance(dtype, op))
              << rd::reduceOpName(op) << " " << where(dtype, r, i);
        }
      }
  }));
}

TEST_P(Collectives, BroadcastEveryDTypeFromEveryRoot) {
  auto groups = makeGroups(n());
  expectNoErrors(runRanks(n(), [&](int r) {
    for (DType dtype : kAllDTypes)
      for (int root = 0; root < n(); ++root) {
        rd::BufferRef b = cpuBuffer(dtype, kNumel, {1, kNumel});
        for (int64_t i = 0; i < kNumel; ++i) setValue(b, i, valueOf(r, i, dtype));
        groups[static_cast<size_t>(r)]->broadcast(b, root)->wait();
        for (int64_t i = 0; i < kNumel; ++i)
          EXPECT_EQ(getValue(b, i), valueOf(root, i, dtype)) << "root " << root << " " << where(dtype, r, i);
      }
  }));
}

TEST_P(Collectives, AllGatherEveryDType) {
  auto groups = makeGroups(n());
  expectNoErrors(runRanks(n(), [&](int r) {
    for (DType dtype : kAllDTypes)
      for (int round = 0; round < 2; ++round) {  // the second reuses the cached algorithm
        rd::BufferRef in = cpuBuffer(dtype, kNumel);
        for (int64_t i = 0; i < kNumel; ++i) setValue(in, i, valueOf(r + round, i, dtype));
        std::vector<rd::BufferRef> out;
        for (int k = 0; k < n(); ++k) out.push_back(cpuBuffer(dtype, kNumel));
        groups[static_cast<size_t>(r)]->allGather(out, in)->wait();
        for (int k = 0; k < n(); ++k)
          for (int64_t i = 0; i < kNumel; ++i)
            EXPECT_EQ(getValue(out[static_cast<size_t>(k)], i), valueOf(k + round, i, dtype))
                << "from rank " << k << " " << where(dtype, r, i);
      }
  }));
}

TEST_P(Collectives, ReduceScatterEveryDTypeAndOp) {
  auto groups = makeGroups(n());
  expectNoErrors(runRanks(n(), [&](int r) {
    for (DType dtype : kAllDTypes)
      for (rd::ReduceOp op : kAllOps) {
        if (op == rd::ReduceOp::avg && !isFloatingPoint(dtype)) continue;
        std::vector<rd::BufferRef> in;
        for (int k = 0; k < n(); ++k) {
          in.push_back(cpuBuffer(dtype, kNumel));
          for (int64_t i = 0; i < kNumel; ++i) setValue(in.back(), i, valueOf(r, k * kNumel + i, dtype));
        }
        rd::BufferRef out = cpuBuffer(dtype, kNumel);
        groups[static_cast<size_t>(r)]->reduceScatter(out, in, op)->wait();
        for (int64_t i = 0; i < kNumel; ++i) {
          std::vector<double> all;
          for (int k = 0; k < n(); ++k) all.push_back(valueOf(k, r * kNumel + i, dtype));
          EXPECT_NEAR(getValue(out, i), reduceReference(all, op, dtype), tolerance(dtype, op))
              << rd::reduceOpName(op) << " " << where(dtype, r, i);
        }
      }
  }));
}

TEST_P(Collectives, AllToAllEveryDType) {
  auto groups = makeGroups(n());
  // What rank `from` sends to rank `to`: distinct, exact in every dtype.
  auto chunk = [](int from, int to, int64_t i, DType dtype) {
    return dtype == DType::boolean ? double((from + to + i) % 2) : double(from * 16 + to * 4 + i % 4);
  };
  expectNoErrors(runRanks(n(), [&](int r) {
    for (DType dtype : kAllDTypes) {
      std::vector<rd::BufferRef> in, out;
      for (int k = 0; k < n(); ++k) {
        in.push_back(cpuBuffer(dtype, kNumel));
        out.push_back(cpuBuffer(dtype, kNumel));
        for (int64_t i = 0; i < kNumel; ++i) setValue(in.back(), i, chunk(r, k, i, dtype));
      }
      groups[static_cast<size_t>(r)]->allToAll(out, in)->wait();
      for (int k = 0; k < n(); ++k)
        for (int64_t i = 0; i < kNumel; ++i)
          EXPECT_EQ(getValue(out[static_cast<size_t>(k)], i), chunk(k, r, i, dtype))
              << "from rank " << k << " " << where(dtype, r, i);
    }
  }));
}

TEST_P(Collectives, SendRecvAroundTheRingEveryDType) {
  auto groups = makeGroups(n());
  expectNoErrors(runRanks(n(), [&](int r) {
    const int next = (r + 1) % n(), previous = (r + n() - 1) % n();
    for (DType dtype : kAllDTypes) {
      rd::BufferRef out = cpuBuffer(dtype, kNumel), in = cpuBuffer(dtype, kNumel);
      for (int64_t i = 0; i < kNumel; ++i) setValue(out, i, valueOf(r, i, dtype));
      // Both posted before either is waited on: a receive never waits behind a send.
      auto received = groups[static_cast<size_t>(r)]->recv(in, previous, 7);
      auto sent = groups[static_cast<size_t>(r)]->send(out, next, 7);
      sent->wait();
      received->wait();
      for (int64_t i = 0; i < kNumel; ++i)
        EXPECT_EQ(getValue(in, i), valueOf(previous, i, dtype)) << where(dtype, r, i);
    }
  }));
}

TEST_P(Collectives, BarrierWaitsForTheLastRank) {
  auto groups = makeGroups(n());
  std::vector<double> waited(static_cast<size_t>(n()));
  expectNoErrors(runRanks(n(), [&](int r) {
    if (r == 0) std::this_thread::sleep_for(300ms);
    const auto start = std::chrono::steady_clock::now();
    groups[static_cast<size_t>(r)]->barrier()->wait();
    waited[static_cast<size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }));
  for (int r = 1; r < n(); ++r) EXPECT_GT(waited[static_cast<size_t>(r)], 0.2) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return fmt::format("n{}", info.param); });

TEST(CollectivePieces, CallsSplitIntoPiecesGiveTheSameResults) {
  // Gloo counts elements in an int; a call over the limit is split. The
  // limit is lowered to 3 so that 10 elements take 4 pieces.
  constexpr int n = 3;
  constexpr int64_t numel = 10;
  rd::ProcessGroupOptions options = testOptions();
  options.maxElementsPerCall = 3;
  auto groups = makeGroups(n, options);
  expectNoErrors(runRanks(n, [&](int r) {
    rd::ProcessGroup& g = *groups[static_cast<size_t>(r)];
    for (DType dtype : {DType::f32, DType::f16, DType::i64}) {
      rd::BufferRef sum = cpuBuffer(dtype, numel), bcast = cpuBuffer(dtype, numel);
      std::vector<rd::BufferRef> gathered, scatterIn;
      for (int k = 0; k < n; ++k) {
        gathered.push_back(cpuBuffer(dtype, numel));
        scatterIn.push_back(cpuBuffer(dtype, numel));
        for (int64_t i = 0; i < numel; ++i) setValue(scatterIn.back(), i, valueOf(r, k * numel + i, dtype));
      }
      for (int64_t i = 0; i < numel; ++i) {
        setValue(sum, i, valueOf(r, i, dtype));
        setValue(bcast, i, valueOf(r, i, dtype));
      }
      rd::BufferRef scattered = cpuBuffer(dtype, numel);
      g.allReduce(sum, rd::ReduceOp::max)->wait();
      g.broadcast(bcast, 1)->wait();
      g.allGather(gathered, bcast)->wait();
      g.reduceScatter(scattered, scatterIn, rd::ReduceOp::sum)->wait();
      for (int64_t i = 0; i < numel; ++i) {
        std::vector<double> column, scatterColumn;
        for (int k = 0; k < n; ++k) {
          column.push_back(valueOf(k, i, dtype));
          scatterColumn.push_back(valueOf(k, r * numel + i, dtype));
        }
        EXPECT_EQ(getValue(sum, i), reduceReference(column, rd::ReduceOp::max, dtype)) << where(dtype, r, i);
        EXPECT_EQ(getValue(bcast, i), valueOf(1, i, dtype)) << where(dtype, r, i);
        for (int k = 0; k < n; ++k) EXPECT_EQ(getValue(gathered[static_cast<size_t>(k)], i), valueOf(1, i, dtype));
        EXPECT_EQ(getValue(scattered, i), reduceReference(scatterColumn, rd::ReduceOp::sum, dtype))
            << where(dtype, r, i);
      }
    }
  }));
}

TEST(CollectiveCache, RepeatedCallsOnTheSameBuffersStayCorrect) {
  // Note [Cached Gloo algorithms]: the second and later calls on the same
  // buffers reuse the algorithm; fresh values each time must come through.
  constexpr int n = 3;
  auto groups = makeGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    rd::BufferRef a = cpuBuffer(DType::f32, 4), b = cpuBuffer(DType::f32, 4);
    for (int round = 0; round < 6; ++round) {
      rd::BufferRef& x = round % 3 == 2 ? b : a;
      for (int64_t i = 0; i < 4; ++i) setValue(x, i, r * 10 + round + i);
      groups[static_cast<size_t>(r)]->allReduce(x, rd::ReduceOp::sum)->wait();
      for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(getValue(x, i), (0 + 10 + 20) + 3 * (round + i)) << "round " << round;
    }
  }));
}

TEST(CollectiveCache, OneRankWithoutTheCachedAlgorithmMakesEveryRankBuildAnew) {
  // Rank 0 uses a new buffer in round 2 (a cache miss) while the others
  // reuse theirs (hits): the fingerprints tell every rank to build anew.
  constexpr int n = 2;
  auto groups = makeGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    rd::BufferRef x = cpuBuffer(DType::i32, 3);
    for (int round = 0; round < 4; ++round) {
      if (r == 0 && round == 2) x = cpuBuffer(DType::i32, 3);
      for (int64_t i = 0; i < 3; ++i) setValue(x, i, r + round + i);
      groups[static_cast<size_t>(r)]->allReduce(x)->wait();
      for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(getValue(x, i), 1 + 2 * (round + i)) << "round " << round;
    }
  }));
}

TEST(CollectiveCache, HitsOfDifferentBuildsBuildAnew) {
  // Rank 0 alternates buffers a, b, a while rank 1 keeps one: in round 1
  // rank 0 misses, so both build (rank 1 replacing its entry); in round 2
  // both hit, rank 0 the build of round 0 and rank 1 that of round 1.
  // Reusing both would run instances of different slots against each other
  // (a hang until the timeout); the fingerprints' builds differ, so every
  // rank builds anew.
  constexpr int n = 2;
  auto groups = makeGroups(n, testOptions(std::chrono::milliseconds(5000)));
  expectNoErrors(runRanks(n, [&](int r) {
    rd::BufferRef a = cpuBuffer(DType::f32, 5), b = cpuBuffer(DType::f32, 5);
    for (int round = 0; round < 5; ++round) {
      rd::BufferRef& x = r == 0 && round % 2 == 1 ? b : a;
      for (int64_t i = 0; i < 5; ++i) setValue(x, i, r + round + i);
      groups[static_cast<size_t>(r)]->allReduce(x)->wait();
      for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(getValue(x, i), 1 + 2 * (round + i)) << "round " << round;
    }
  }));
}

TEST(CollectiveCache, BuffersUsedAtDifferentCallsBuildAnew) {
  // Found by examples/train_digits_ddp.cpp (fresh one-element tensors per
  // call): each rank all-reduces its buffers a and b, then rank 0 a and
  // rank 1 b, each a hit, of builds of different calls.
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

TEST(CollectiveCache, LargeAllReducesReuseAndEvictTheirInstances) {
  // All-reduces above 1 MiB are cached too, the last two: three buffers in
  // turn evict each other, one reused twice in a row hits; every result
  // must come through.
  constexpr int n = 2;
  constexpr int64_t count = (int64_t{1} << 18) + 7;  // 1 MiB + 28 bytes of f32
  auto groups = makeGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    std::vector<rd::BufferRef> xs{cpuBuffer(DType::f32, count), cpuBuffer(DType::f32, count),
                                  cpuBuffer(DType::f32, count)};
    for (int round = 0; round < 8; ++round) {
      rd::BufferRef& x = xs[static_cast<size_t>(round < 4 ? round % 3 : 2)];
      for (int64_t i : {int64_t{0}, count / 2, count - 1}) setValue(x, i, r + round + i % 5);
      groups[static_cast<size_t>(r)]->allReduce(x)->wait();
      for (int64_t i : {int64_t{0}, count / 2, count - 1})
        EXPECT_EQ(getValue(x, i), 1 + 2 * (round + i % 5)) << "round " << round << " element " << i;
    }
  }));
}

TEST(CollectiveCache, WithoutFingerprintsCallsStayCorrect) {
  // KILN_DIST_DEBUG=off: all-reduces run on the group's staging (Note
  // [Staged all-reduces without fingerprints]), broadcasts build anew.
  rd::ProcessGroupOptions options = testOptions();
  options.debug = rd::DebugLevel::off;
  constexpr int n = 3;
  auto groups = makeGroups(n, options);
  expectNoErrors(runRanks(n, [&](int r) {
    rd::BufferRef x = cpuBuffer(DType::bf16, 6);
    for (int round = 0; round < 4; ++round) {
      for (int64_t i = 0; i < 6; ++i) setValue(x, i, r + round);
      groups[static_cast<size_t>(r)]->allReduce(x, rd::ReduceOp::max)->wait();
      groups[static_cast<size_t>(r)]->broadcast(x, round % n)->wait();
      for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(getValue(x, i), 2 + round) << "round " << round;
    }
  }));
}

TEST(TinyCalls, EmptyAndOneElementTensorsOnThreeRanks) {
  // Fewer elements than ranks: Gloo's halving-doubling splits into empty chunks.
  constexpr int n = 3;
  auto groups = makeGroups(n);
  expectNoErrors(runRanks(n, [&](int r) {
    rd::ProcessGroup& g = *groups[static_cast<size_t>(r)];
    for (int64_t numel : {0, 1, 2}) {
      rd::BufferRef x = cpuBuffer(DType::f32, numel), y = cpuBuffer(DType::f32, numel);
      std::vector<rd::BufferRef> many, parts;
      for (int k = 0; k < n; ++k) {
        many.push_back(cpuBuffer(DType::f32, numel));
        parts.push_back(cpuBuffer(DType::f32, numel));
        for (int64_t i = 0; i < numel; ++i) setValue(parts.back(), i, k + r);
      }
      for (int64_t i = 0; i < numel; ++i) setValue(x, i, r + 1), setValue(y, i, r + 1);
      g.allReduce(x)->wait();
      g.broadcast(y, 2)->wait();
      g.allGather(many, y)->wait();
      rd::BufferRef out = cpuBuffer(DType::f32, numel);
      g.reduceScatter(out, parts, rd::ReduceOp::sum)->wait();
      for (int64_t i = 0; i < numel; ++i) {
        EXPECT_EQ(getValue(x, i), 6.0) << numel;
        EXPECT_EQ(getValue(y, i), 3.0) << numel;
        for (int k = 0; k < n; ++k) EXPECT_EQ(getValue(many[static_cast<size_t>(k)], i), 3.0) << numel;
        EXPECT_EQ(getValue(out, i), 3 * r + 3) << numel;
      }
    }
  }));
}

TEST(OneRank, EveryCollectiveIsLocal) {
  auto groups = makeGroups(1);
  rd::ProcessGroup& g = *groups[0];
  rd::BufferRef x = cpuBuffer(DType::f32, 3);
  for (int64_t i = 0; i < 3; ++i) setValue(x, i, 2.0 + i);
  g.allReduce(x, rd::ReduceOp::avg)->wait();
  g.broadcast(x, 0)->wait();
  rd::BufferRef gathered = cpuBuffer(DType::f32, 3), scattered = cpuBuffer(DType::f32, 3),
                exchanged = cpuBuffer(DType::f32, 3);
  g.allGather({gathered}, x)->wait();
  g.reduceScatter(scattered, {x}, rd::ReduceOp::sum)->wait();
  g.allToAll({exchanged}, {x})->wait();
  g.barrier()->wait();
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(getValue(x, i), 2.0 + i);
    EXPECT_EQ(getValue(gathered, i), 2.0 + i);
    EXPECT_EQ(getValue(scattered, i), 2.0 + i);
    EXPECT_EQ(getValue(exchanged, i), 2.0 + i);
  }
}

}  // namespace
}  // namespace kiln::testing::dist

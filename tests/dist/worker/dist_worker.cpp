// A rank of the multi-process tests (tests/dist/multiprocess_test.cpp):
// `dist_worker RANK WORLD PORT MODE` meets the others through the TCP store
// the test serves on 127.0.0.1:PORT and runs kiln::dist on tensors.
//   collectives  every collective on a few dtypes, checked; then
//                destroyProcessGroup (a barrier, then leaving)
//   die          one all-reduce; then the last rank exits at once (as a
//                crash would, leaving nothing in the store) and the others
//                call all_reduce again and print its error and how long it
//                took ("error after S s: ...")
//   ddp          6 steps of DDP on this rank's samples, eager and compiled
//                (kiln::compile of the whole step), next to one process on
//                every rank's samples: compiled within 1e-6 of eager, both
//                within 1e-5 of the single process; prints "ddp ok" and the
//                largest differences
//   ddp_die      compiled DDP steps; in the third, the last rank exits in
//                the middle of its backward (from a gradient hook, after
//                its first buckets started, before its last one is
//                complete) and the others print the error
//                of their step and how long it took
// Exits 0 when its part went as expected, 1 saying why otherwise.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "frontend/kiln.h"
#include "frontend/autograd/hooks.h"
#include "runtime/dist_tcp_store.h"
#include "tests/dist/ddp_fixtures.h"

namespace {

using namespace kiln;

int check(bool ok, const std::string& what) {
  if (!ok) std::printf("FAILED: %s\n", what.c_str());
  return ok ? 0 : 1;
}

int collectives(int rank, int world) {
  int failures = 0;
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i64, DType::boolean}) {
    const std::string name(dtypeName(dtype));
    Tensor x = full({5}, dtype == DType::boolean ? rank % 2 : rank + 1, dtype);
    dist::allReduce(x, dist::ReduceOp::max).wait();
    const double want = dtype == DType::boolean ? (world > 1 ? 1 : 0) : world;
    failures += check(x.to(DType::f64).toVector<double>() == std::vector<double>(5, want), "all_reduce max " + name);
    std::vector<Tensor> all;
    dist::allGather(all, full({2}, rank, dtype == DType::boolean ? DType::i32 : dtype)).wait();
    for (int r = 0; r < world; ++r)
      failures += check(all[static_cast<size_t>(r)].to(DType::f64).toVector<double>() == std::vector<double>(2, r),
                        "all_gather " + name);
  }
  Tensor b = full({3}, rank);
  dist::broadcast(b, world - 1).wait();
  failures += check(b.toVector() == std::vector<float>(3, static_cast<float>(world - 1)), "broadcast");
  Tensor mine = full({1}, rank), theirs = zeros({1});
  auto sent = dist::send(mine, (rank + 1) % world, 4);
  dist::recv(theirs, (rank + world - 1) % world, 4).wait();
  sent.wait();
  failures += check(theirs.item() == static_cast<float>((rank + world - 1) % world), "send/recv");
  dist::destroyProcessGroup();
  return failures ? 1 : 0;
}

/// Runs `call`, which must fail: prints "error after S s: MESSAGE" and
/// returns 0, or says it did not fail and returns 1.
int expectError(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  try {
    call();
  } catch (const Error& e) {
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("error after %.2f s: %s\n", took, e.what());
    return 0;
  }
  std::printf("FAILED: no error\n");
  return 1;
}

int die(int rank, int world) {
  Tensor x = ones({64});
  dist::allReduce(x).wait();
  if (rank == world - 1) _exit(0);  // no shutdown: the others find out from their sockets
  return expectError([&] { dist::allReduce(x).wait(); });
}

using kiln::testing::dist::compareCompiledDdp;
using kiln::testing::dist::compileSgdStep;
using kiln::testing::dist::ddpSamples;
using kiln::testing::dist::makeDdpMlp;
using kiln::testing::dist::smallBuckets;

int ddp(int rank, int world) {
  const kiln::testing::dist::DdpComparison c = compareCompiledDdp(dist::defaultGroup(), rank, world);
  std::printf("compiled vs eager %.3g, vs one process %.3g, buckets %zu, bucket 0 overlaps %d steps\n",
              std::max({c.lossVsEager, c.paramsVsEager, c.gradsVsEager}), c.paramsVsOneProcess, c.overlaps.size(),
              c.overlaps.empty() ? 0 : c.overlaps[0]);
  int failures = check(std::max({c.lossVsEager, c.paramsVsEager, c.gradsVsEager}) <= 1e-6,
                       "compiled DDP within 1e-6 of eager DDP");
  failures += check(c.paramsVsOneProcess <= 1e-5, "compiled DDP within 1e-5 of one process");
  failures += check(c.overlaps.size() == 3 && c.overlaps[0] >= 3, "three buckets, the first overlapping backward");
  if (failures == 0) std::printf("ddp ok\n");
  dist::destroyProcessGroup();
  return failures ? 1 : 0;
}

int ddpDie(int rank, int world) {
  const dist::ProcessGroup g = dist::defaultGroup();
  nn::Sequential model = makeDdpMlp();
  nn::DistributedDataParallel ddp(model, smallBuckets(g));
  optim::SGD opt(ddp->parameters(), {.lr = 0.1});
  auto step = compileSgdStep(ddp, opt);
  const auto [x, y] = ddpSamples(rank * 4, 4, 0);
  step(x, y);
  step(x, y);
  if (rank == world - 1) {
    // Eager from here: the first layer's weight and bias are the last
    // bucket; by the first of them to arrive, buckets 0 and 1 have started.
    // Dying there, before the bucket is complete, means rank 2 never sends
    // it: dying on the bucket's last gradient instead raced with DDP's own
    // hook, which launches the bucket first, and its all-reduce could
    // finish before the exit, so that the others' step succeeded.
    for (int i : {0, 1})
      autograd::registerPostAccumulateGradHook(model->parameters()[static_cast<size_t>(i)],
                                               [](const Tensor&) { _exit(0); });
    opt.zeroGrad();
    mseLoss(ddp(x), y).backward();
    std::printf("FAILED: still alive after the backward\n");
    return 1;
  }
  return expectError([&] { step(x, y); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: dist_worker RANK WORLD PORT MODE\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]), world = std::atoi(argv[2]);
  const std::string mode = argv[4];
  try {
    dist::InitOptions init;
    init.store = std::make_shared<runtime::dist::TCPStore>("127.0.0.1", static_cast<uint16_t>(std::atoi(argv[3])),
                                                           false, std::chrono::seconds(20));
    init.rank = rank;
    init.worldSize = world;
    const bool dies = mode == "die" || mode == "ddp_die";
    init.options.timeout = std::chrono::seconds(dies ? 2 : 20);
    init.options.hostname = "127.0.0.1";
    dist::init("gloo", init);
    int code = 2;
    if (mode == "collectives") code = collectives(rank, world);
    if (mode == "die") code = die(rank, world);
    if (mode == "ddp") code = ddp(rank, world);
    if (mode == "ddp_die") code = ddpDie(rank, world);
    if (code == 2) std::printf("FAILED: unknown mode %s\n", mode.c_str());
    std::fflush(stdout);
    _exit(code);  // the group's threads may still hold a dead context (die)
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    std::fflush(stdout);
    _exit(1);
  }
}

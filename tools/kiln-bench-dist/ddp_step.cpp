// The DDP step of one job of ranks (worker.h): kiln-bench's MLP
// (tools::MlpSizes: mlp_train_step_small's 64-64-64-10 on a batch of 8, or
// --mlp full, mlp_train_step's 784-1024-1024-10 on 256) wrapped in
// nn::DistributedDataParallel, crossEntropy, backward, SGD. With two or
// more ranks, in the same processes and interleaved with it (A B C, then
// C B A):
//   compute        the same model and batch without DDP (forward, backward, SGD)
//   communication  the all-reduces DDP makes, alone: one flat f32 tensor per
//                  bucket of the same bytes, started in bucket order, then
//                  waited for, on the same group
// so that the step can be compared with compute + communication: below it,
// communication overlapped the backward. The same step under kiln::compile
// (one program: kernels, BLAS calls, each bucket's all_reduce started when
// the bucket is filled and waited for before the optimizer reads it) next to
// the compute alone compiled, and the steps each bucket's all-reduce
// overlapped in the program (docs/distributed.md, "Compiled collectives").
#include <fmt/format.h>

#include <iostream>
#include <random>

#include "frontend/kiln.h"
#include "runtime/thread_pool.h"
#include "tools/common/models.h"
#include "tools/kiln-bench-dist/timing.h"
#include "tools/kiln-bench-dist/worker.h"

namespace kiln::bench::dist {

namespace {

tools::MlpSizes mlpSizes(const std::string& name) {
  if (name == "full") return {};
  return {.in = 64, .hidden = 64, .classes = 10, .batch = 8};
}

nn::Sequential makeMlp(const tools::MlpSizes& s) {
  return nn::Sequential(nn::Linear(s.in, s.hidden), nn::ReLU(), nn::Linear(s.hidden, s.hidden), nn::ReLU(),
                        nn::Linear(s.hidden, s.classes));
}

/// One SGD step of `model` on (x, labels): zeroGrad, crossEntropy,
/// backward, step; returns the loss. Eager, or traced by kiln::compile.
template <typename Model>
Tensor sgdStep(Model& model, optim::SGD& opt, const Tensor& x, const Tensor& labels) {
  opt.zeroGrad();
  Tensor loss = crossEntropy(model(x), labels);
  loss.backward();
  opt.step();
  return loss;
}

struct Phase {
  std::string name;
  std::function<void()> call;
  std::vector<double> samples;
};

}  // namespace

nlohmann::json ddpStep(const Options& options, const Rank& me) {
  const tools::MlpSizes s = mlpSizes(options.mlp);
  kiln::dist::Options po;
  po.hostname = "127.0.0.1";
  po.timeout = std::chrono::seconds(options.callTimeoutS);
  kiln::dist::ProcessGroup group = kiln::dist::ProcessGroup::create(
      "gloo", std::make_shared<runtime::dist::PrefixStore>("bench/ddp", me.store), me.rank, me.size, po);

  // Each rank its own batch, as data parallelism has it.
  Generator gen(42 + static_cast<uint64_t>(me.rank));
  std::mt19937_64 rng(42 + static_cast<uint64_t>(me.rank));
  std::vector<int64_t> labelValues(static_cast<size_t>(s.batch));
  for (int64_t& l : labelValues) l = static_cast<int64_t>(rng() % static_cast<uint64_t>(s.classes));
  const Tensor x = randn({s.batch, s.in}, gen);
  const Tensor labels = fromVector(labelValues, {s.batch});

  manualSeed(1);
  nn::Sequential model = makeMlp(s);
  nn::DistributedDataParallel ddp(model, nn::DistributedDataParallelOptions{.processGroup = group});
  optim::SGD opt(ddp->parameters(), {.lr = 0.01});
  std::vector<Phase> phases;
  phases.push_back({"step", [&] { sgdStep(ddp, opt, x, labels); }, {}});
  manualSeed(1);
  nn::Sequential compiledModel = makeMlp(s);
  nn::DistributedDataParallel compiledDdp(compiledModel,
                                          nn::DistributedDataParallelOptions{.processGroup = group});
  optim::SGD compiledOpt(compiledDdp->parameters(), {.lr = 0.01});
  auto compiledStep = kiln::compile(
      [&](const Tensor& in, const Tensor& target) { return sgdStep(compiledDdp, compiledOpt, in, target); });
  phases.push_back({"compiled_step", [&] { compiledStep(x, labels); }, {}});

  // The buckets as DDP made them, as flat tensors of the same bytes.
  const std::vector<Tensor> params = ddp->parameters();
  std::vector<int64_t> bucketBytes;
  for (const auto& bucket : ddp->bucketAssignment()) {
    int64_t bytes = 0;
    for (size_t i : bucket) bytes += params[i].numel() * static_cast<int64_t>(itemSize(params[i].dtype()));
    bucketBytes.push_back(bytes);
  }
  int64_t paramCount = 0;
  for (const Tensor& p : params) paramCount += p.numel();

  manualSeed(1);
  nn::Sequential alone = makeMlp(s);
  optim::SGD aloneOpt(alone->parameters(), {.lr = 0.01});
  std::vector<Tensor> flats;
  for (int64_t b : bucketBytes) flats.push_back(zeros({b / 4}));
  manualSeed(1);
  nn::Sequential aloneCompiledModel = makeMlp(s);
  optim::SGD aloneCompiledOpt(aloneCompiledModel->parameters(), {.lr = 0.01});
  auto aloneCompiled = kiln::compile([&](const Tensor& in, const Tensor& target) {
    return sgdStep(aloneCompiledModel, aloneCompiledOpt, in, target);
  });
  if (me.size > 1) {
    phases.push_back({"compiled_compute", [&] { aloneCompiled(x, labels); }, {}});
    phases.push_back({"compute", [&] { sgdStep(alone, aloneOpt, x, labels); }, {}});
    phases.push_back({"communication",
                      [&] {
                        std::vector<kiln::dist::Work> works;
                        for (Tensor& f : flats) works.push_back(group.allReduce(f));
                        for (const kiln::dist::Work& w : works) w.wait();
                      },
                      {}});
  }
  if (me.rank == 0) std::cerr << fmt::format("kiln-bench-dist: DDP step at {} processes\n", me.size);
  const int first = options.ddpSteps / 2, second = options.ddpSteps - first;
  for (Phase& p : phases) p.samples = timeCalls(std::max(options.warmup, 2), first, p.call);
  for (auto it = phases.rbegin(); it != phases.rend(); ++it) {
    std::vector<double> more = timeCalls(0, second, it->call);
    it->samples.insert(it->samples.end(), more.begin(), more.end());
  }
  nlohmann::json row;
  row["name"] = "ddp_step";
  row["processes"] = me.size;
  row["mlp"] = fmt::format("{}-{}-{}-{}, batch {}", s.in, s.hidden, s.hidden, s.classes, s.batch);
  row["parameters"] = paramCount;
  row["bucket_bytes"] = bucketBytes;
  row["steps"] = options.ddpSteps;
  row["optimizer"] = "SGD";
  for (Phase& p : phases) row[p.name + "_ms"] = median(slowestRank(group, p.samples));
  row["compiled_bucket_overlaps"] = compiledStep.lastCollectiveOverlaps();
  if (me.size > 1) {
    const double sum = row["compute_ms"].get<double>() + row["communication_ms"].get<double>();
    row["compute_plus_communication_ms"] = sum;
    row["overlapped"] = row["step_ms"].get<double>() < sum;
    const double compiledSum = row["compiled_compute_ms"].get<double>() + row["communication_ms"].get<double>();
    row["compiled_compute_plus_communication_ms"] = compiledSum;
    row["compiled_overlapped"] = row["compiled_step_ms"].get<double>() < compiledSum;
  } else {
    for (const char* key : {"compute_ms", "communication_ms", "compute_plus_communication_ms", "overlapped",
                            "compiled_compute_ms", "compiled_compute_plus_communication_ms", "compiled_overlapped"})
      row[key] = nullptr;
  }
  row["threads"] = runtime::ThreadPool::instance().numThreads();
  group.shutdown();
  return nlohmann::json::array({row});
}

}  // namespace kiln::bench::dist

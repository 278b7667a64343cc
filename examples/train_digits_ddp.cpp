// train_digits.cpp on several processes: the same MLP, data and options,
// trained data-parallel as with PyTorch's DistributedDataParallel. Every
// rank holds a replica of the model (nn::DistributedDataParallel copies
// rank 0's parameters to the others), reads its own shard of each epoch's
// shuffled training set (data::DistributedSampler) and averages the
// gradients with the others during backward, so every replica takes the
// same AdamW step. Run it under kiln-run (docs/distributed.md, "Worked
// example"):
//
//   kiln-run --nproc-per-node 2 train_digits_ddp [--data data/digits.csv] [--epochs 30]
//            [--batch 64] [--lr 3e-3] [--seed 0] [--min-accuracy A] [--timeout 300]
//
// --batch is the global batch, as in train_digits: each rank takes
// batch / world size images per step, so one step sees as many images as
// one step of train_digits. Each rank evaluates the whole test split; the
// ranks check that their accuracies agree (replicas that drifted apart are
// an error), and rank 0 prints the loss (averaged over the ranks) and the
// accuracy per epoch, then `test accuracy: A%` as train_digits does. With
// --min-accuracy every rank exits with status 1 when the final accuracy is
// below it. --timeout (seconds) bounds every collective and the rendezvous.
// Without kiln-run it runs as a world of one process.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "digits.h"

namespace {

/// Every rank's epoch statistics, {loss sum, test accuracy}, gathered from
/// one tensor kept for the whole run.
class EpochStats {
 public:
  std::vector<std::pair<double, double>> gather(double lossSum, double accuracy) {
    mine_.copy_(kiln::fromVector(std::vector<double>{lossSum, accuracy}, {2}));
    kiln::dist::allGather(all_, mine_).wait();
    std::vector<std::pair<double, double>> out;
    for (const kiln::Tensor& t : all_) {
      const std::vector<double> v = t.toVector<double>();
      out.emplace_back(v[0], v[1]);
    }
    return out;
  }

 private:
  kiln::Tensor mine_ = kiln::fromVector(std::vector<double>{0, 0}, {2});
  std::vector<kiln::Tensor> all_;
};

/// One rank's training; returns the final test accuracy, the same on every
/// rank (kiln::Error otherwise).
double fit(const digits::Options& o, const digits::Dataset& train, const digits::Dataset& test, bool print) {
  const int rank = kiln::dist::getRank(), world = kiln::dist::getWorldSize();
  if (o.batch % world != 0)
    throw kiln::Error("--batch " + std::to_string(o.batch) + " is not a multiple of the world size " +
                      std::to_string(world) + " (it is the global batch, split evenly over the ranks)");
  const auto perRank = static_cast<size_t>(o.batch / world);
  if (print) std::printf("%d ranks, %zu images per rank and step (%d in all)\n", world, perRank, o.batch);

  kiln::manualSeed(o.seed);
  kiln::nn::Sequential model = digits::makeModel();
  kiln::nn::DistributedDataParallel ddp(model);  // the default group; rank 0's parameters win
  // Each rank draws its own dropout masks, as one process draws different
  // masks for different images; with one rank this is train_digits' seed.
  kiln::manualSeed(o.seed + static_cast<uint64_t>(rank));
  kiln::optim::AdamWOptions options;
  options.lr = o.lr;
  kiln::optim::AdamW optimizer(ddp->parameters(), options);

  kiln::data::DistributedSampler sampler(train.size(), world, rank, {.seed = o.seed});
  EpochStats stats;
  double acc = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    sampler.setEpoch(static_cast<uint64_t>(epoch));  // the same new order on every rank
    const std::vector<int64_t> mine = sampler.indices();
    double lossSum = 0;
    int batches = 0;
    for (size_t start = 0; start < mine.size(); start += perRank) {
      const size_t end = std::min(mine.size(), start + perRank);
      auto [x, y] = digits::batch(train, std::vector<int64_t>(mine.begin() + start, mine.begin() + end));
      const kiln::Tensor loss = kiln::crossEntropy(ddp(x), y);
      optimizer.zeroGrad();
      loss.backward();  // the gradients are averaged over the ranks here
      optimizer.step();
      lossSum += loss.item();
      ++batches;
    }
    // The wrapped model, not ddp: evaluation is no synchronized iteration.
    acc = digits::accuracy(model, test);
    double meanLoss = 0;
    for (auto [rankLoss, rankAcc] : stats.gather(lossSum, acc)) {
      meanLoss += rankLoss / batches / world;
      if (rankAcc != acc)
        throw kiln::Error("the replicas disagree after epoch " + std::to_string(epoch) + ": test accuracy " +
                          std::to_string(acc) + " on rank " + std::to_string(rank) + ", " + std::to_string(rankAcc) +
                          " on another");
    }
    if (print) std::printf("epoch %2d  loss %.4f  test accuracy %.2f%%\n", epoch, meanLoss, 100 * acc);
  }
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train_digits_ddp: an MLP on the UCI handwritten digits, data-parallel over the ranks of kiln-run"};
  digits::Options o;
  digits::addOptions(app, o);
  double timeout = 300;
  app.add_option("--timeout", timeout, "seconds a rank waits for the others in a collective or at the start")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines through kiln-run's pipes, as they come
  digits::Dataset train, test;
  if (!digits::load(o.data, train, test)) {
    std::fprintf(stderr, "train_digits_ddp: cannot read %s (run scripts/fetch_data.sh)\n", o.data.c_str());
    return 2;
  }
  try {
    kiln::dist::InitOptions init;  // rank and world from kiln-run's environment
    init.options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
    kiln::dist::init("gloo", init);
    const bool print = kiln::dist::getRank() == 0;
    if (print)
      std::printf("digits: %lld train, %lld test images\n", static_cast<long long>(train.size()),
                  static_cast<long long>(test.size()));
    const double acc = fit(o, train, test, print);
    const bool below = o.minAccuracy >= 0 && acc < o.minAccuracy;  // the same on every rank
    if (print) std::printf("test accuracy: %.2f%%\n", 100 * acc);
    if (print && below)
      std::fprintf(stderr, "train_digits_ddp: test accuracy %.4f is below %.4f\n", acc, o.minAccuracy);
    // Rank 0 has printed: a barrier, then leaving. (A rank that left at once
    // could also fail a slower one's last call: Gloo resets its sockets at
    // exit; docs/distributed.md, "Leaving".)
    kiln::dist::destroyProcessGroup();
    if (below) return 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "train_digits_ddp: %s\n", e.what());
    return 1;
  }
  return 0;
}

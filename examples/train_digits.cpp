// Trains a small MLP on the UCI handwritten digits (1797 8x8 images, 10
// classes) with kiln's eager tensors, autograd, nn and optim, as one would
// with PyTorch:
//
//   Linear(64, 128) - ReLU - Dropout(0.1) - LayerNorm(128) - Linear(128, 10)
//
// trained with AdamW on cross-entropy, in minibatches, printing the loss per
// epoch and the accuracy on a fixed test split (every fifth image: 360 test,
// 1437 train). The model and the data are examples/digits.h, shared with the
// distributed version, train_digits_ddp.cpp.
//
//   train_digits [--data data/digits.csv] [--epochs 30] [--batch 64] [--lr 3e-3]
//                [--seed 0] [--min-accuracy A] [--autocast bf16|f16]
//
// With --autocast the forward pass, the loss and the test evaluation run
// under kiln::autocast on the CPU in that dtype (mixed precision: the
// linear layers in bf16/f16, layer_norm and the loss in f32, the parameters
// and the optimizer in f32; docs/amp.md).
//
// data/digits.csv comes from scripts/fetch_data.sh (Debian's python3-sklearn
// ships it). With --min-accuracy the exit status is 1 when the final test
// accuracy is below A (the end-to-end test uses 0.95).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "digits.h"

int main(int argc, char** argv) {
  CLI::App app{"train_digits: an MLP on the UCI handwritten digits, on one process"};
  digits::Options o;
  digits::addOptions(app, o);
  std::string autocastName;
  app.add_option("--autocast", autocastName, "run forward and loss under kiln::autocast in this dtype (bf16, f16)")
      ->check(CLI::IsMember({"bf16", "f16"}));
  CLI11_PARSE(app, argc, argv);
  digits::Dataset train, test;
  if (!digits::load(o.data, train, test)) {
    std::fprintf(stderr, "train_digits: cannot read %s (run scripts/fetch_data.sh)\n", o.data.c_str());
    return 2;
  }
  std::printf("digits: %lld train, %lld test images%s\n", static_cast<long long>(train.size()),
              static_cast<long long>(test.size()), autocastName.empty() ? "" : (", autocast " + autocastName).c_str());

  try {
    // The scope is off (enabled false) without --autocast.
    const kiln::DType low = autocastName.empty() ? kiln::DType::bf16 : *kiln::parseDType(autocastName);
    const bool mixed = !autocastName.empty();
    kiln::manualSeed(o.seed);
    kiln::nn::Sequential model = digits::makeModel();
    kiln::optim::AdamWOptions options;
    options.lr = o.lr;
    kiln::optim::AdamW optimizer(model->parameters(), options);

    std::mt19937_64 shuffle(o.seed);
    std::vector<int64_t> order(static_cast<size_t>(train.size()));
    std::iota(order.begin(), order.end(), 0);
    double acc = 0;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
      const double loss = digits::trainEpoch(optimizer, train, order, o.batch, shuffle, [&](auto& x, auto& y) {
        auto ac = kiln::autocast(kiln::DeviceType::cpu, low, mixed);
        return kiln::crossEntropy(model->forward(x), y);
      });
      {
        auto ac = kiln::autocast(kiln::DeviceType::cpu, low, mixed);
        acc = digits::accuracy(model, test);
      }
      std::printf("epoch %2d  loss %.4f  test accuracy %.2f%%\n", epoch, loss, 100 * acc);
    }
    std::printf("test accuracy: %.2f%%\n", 100 * acc);
    if (o.minAccuracy >= 0 && acc < o.minAccuracy) {
      std::fprintf(stderr, "train_digits: test accuracy %.4f is below %.4f\n", acc, o.minAccuracy);
      return 1;
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "train_digits: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Trains a small convolutional network on the UCI handwritten digits (1797
// 8x8 images, 10 classes), the data and the test split of train_digits.cpp
// (examples/digits.h), with kiln's nn::Conv2d, BatchNorm2d and pooling:
//
//   Conv2d(1, 32, 3, pad 1) - BatchNorm2d - ReLU - Conv2d(32, 64, 3, pad 1) - BatchNorm2d - ReLU -
//   MaxPool2d(2) - Conv2d(64, 64, 3, pad 1) - BatchNorm2d - ReLU - AdaptiveAvgPool2d(1) - Flatten -
//   Linear(64, 10)
//
// trained with AdamW on cross-entropy in minibatches, the lr annealed to 0
// along a cosine over the epochs, printing the loss per epoch and the test
// accuracy (evaluation mode: the batch norms use their running statistics).
//
//   train_digits_cnn [--data data/digits.csv] [--epochs 30] [--batch 64] [--lr 3e-3]
//                    [--seed 0] [--min-accuracy A]
//
// With --min-accuracy the exit status is 1 when the final test accuracy is
// below A (the end-to-end test asks for 0.98).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "digits.h"

int main(int argc, char** argv) {
  CLI::App app{"train_digits_cnn: a small CNN on the UCI handwritten digits"};
  digits::Options o;
  digits::addOptions(app, o);
  CLI11_PARSE(app, argc, argv);
  digits::Dataset train, test;
  if (!digits::load(o.data, train, test)) {
    std::fprintf(stderr, "train_digits_cnn: cannot read %s (run scripts/fetch_data.sh)\n", o.data.c_str());
    return 2;
  }
  std::printf("digits: %lld train, %lld test images\n", static_cast<long long>(train.size()),
              static_cast<long long>(test.size()));

  try {
    kiln::manualSeed(o.seed);
    kiln::nn::Sequential model = digits::makeCnn();
    kiln::optim::AdamWOptions options;
    options.lr = o.lr;
    kiln::optim::AdamW optimizer(model->parameters(), options);
    // The lr falls to 0 along a cosine over the run, so that the last
    // epochs settle instead of wandering around 98-99% (constant lr).
    kiln::optim::CosineAnnealingLR schedule(optimizer, o.epochs);

    std::mt19937_64 shuffle(o.seed);
    std::vector<int64_t> order(static_cast<size_t>(train.size()));
    std::iota(order.begin(), order.end(), 0);
    double acc = 0;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
      const double loss = digits::trainEpoch(optimizer, train, order, o.batch, shuffle, [&](auto& x, auto& y) {
        return kiln::crossEntropy(model->forward(x), y);
      });
      schedule.step();
      acc = digits::accuracy(model, test);
      std::printf("epoch %2d  loss %.4f  test accuracy %.2f%%\n", epoch, loss, 100 * acc);
      std::fflush(stdout);
    }
    std::printf("test accuracy: %.2f%%\n", 100 * acc);
    if (o.minAccuracy >= 0 && acc < o.minAccuracy) {
      std::fprintf(stderr, "train_digits_cnn: test accuracy %.4f is below %.4f\n", acc, o.minAccuracy);
      return 1;
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "train_digits_cnn: %s\n", e.what());
    return 1;
  }
  return 0;
}

// What examples/train_digits.cpp and train_digits_ddp.cpp share, so that the
// single-process and the distributed example train the same model on the
// same data: the UCI handwritten digits (1797 8x8 images, 10 classes) split
// into a fixed test set (every fifth image: 360 test, 1437 train), the MLP
//
//   Linear(64, 128) - ReLU - Dropout(0.1) - LayerNorm(128) - Linear(128, 10)
//
// (and train_digits_cnn.cpp's small CNN), the test accuracy, and the
// command line they take (CLI11). data/digits.csv comes from
// scripts/fetch_data.sh (Debian's python3-sklearn ships it).
#pragma once

#include <kiln/frontend/kiln.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace digits {

/// The command line of both examples.
struct Options {
  std::string data = "data/digits.csv";
  int epochs = 30;
  int batch = 64;  // the global batch: the distributed example splits it over the ranks
  double lr = 3e-3;
  uint64_t seed = 0;
  double minAccuracy = -1;  // below 0: no check
};

inline void addOptions(CLI::App& app, Options& o) {
  app.add_option("--data", o.data, "the digits, one image a line (scripts/fetch_data.sh)")->capture_default_str();
  app.add_option("--epochs", o.epochs, "passes over the training set")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch", o.batch, "images per optimizer step")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr", o.lr, "AdamW's learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", o.seed, "seeds the initialization, the shuffle and dropout")->capture_default_str();
  app.add_option("--min-accuracy", o.minAccuracy, "exit with status 1 when the final test accuracy is below this")
      ->check(CLI::Range(0.0, 1.0));
}

struct Dataset {
  std::vector<float> pixels;  // n x 64, scaled to [0, 1]
  std::vector<int64_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

/// Reads data/digits.csv: per line 64 pixel values 0..16 and the label.
inline bool load(const std::string& path, Dataset& train, Dataset& test) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  for (int64_t row = 0; std::getline(in, line); ++row) {
    std::stringstream fields(line);
    std::string field;
    Dataset& into = row % 5 == 0 ? test : train;
    for (int i = 0; i < 64 && std::getline(fields, field, ','); ++i) into.pixels.push_back(std::stof(field) / 16.0f);
    std::getline(fields, field, ',');
    into.labels.push_back(std::stoll(field));
  }
  return train.size() > 0 && test.size() > 0;
}

/// Rows `rows` of `data` as a batch: pixels [n, 64] and labels [n].
inline std::pair<kiln::Tensor, kiln::Tensor> batch(const Dataset& data, const std::vector<int64_t>& rows) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t r : rows) {
    x.insert(x.end(), data.pixels.begin() + r * 64, data.pixels.begin() + (r + 1) * 64);
    y.push_back(data.labels[static_cast<size_t>(r)]);
  }
  const auto n = static_cast<int64_t>(rows.size());
  return {kiln::fromVector(x, {n, 64}), kiln::fromVector(y, {n})};
}

/// The MLP above, initialized from kiln's generator (kiln::manualSeed).
inline kiln::nn::Sequential makeModel() {
  return kiln::nn::Sequential(kiln::nn::Linear(64, 128), kiln::nn::ReLU(), kiln::nn::Dropout(0.1),
                              kiln::nn::LayerNorm(std::vector<int64_t>{128}), kiln::nn::Linear(128, 10));
}

/// Views a batch of pixel rows [n, 64] as images [n, 1, 8, 8], so that the
/// CNN takes the batches the MLP takes.
class ImagesImpl : public kiln::nn::Module {
 public:
  ImagesImpl() : Module("Images") {}
  kiln::Tensor forward(const kiln::Tensor& x) override { return x.view({x.size(0), 1, 8, 8}); }
};
KILN_MODULE(Images);

/// The small CNN of train_digits_cnn.cpp, initialized from kiln's generator:
///
///   Conv2d(1, 32, 3, pad 1) - BatchNorm2d - ReLU - Conv2d(32, 64, 3, pad 1) - BatchNorm2d - ReLU -
///   MaxPool2d(2) - Conv2d(64, 64, 3, pad 1) - BatchNorm2d - ReLU - AdaptiveAvgPool2d(1) - Flatten -
///   Linear(64, 10)
///
/// on [n, 64] rows (viewed as 8x8 images first).
inline kiln::nn::Sequential makeCnn() {
  namespace nn = kiln::nn;
  auto conv = [](int64_t in, int64_t out) {
    return nn::Conv2d(in, out, std::array<int64_t, 2>{3, 3},
                      kiln::Conv2dOptions{.padding = std::array<int64_t, 2>{1, 1}});
  };
  return nn::Sequential(Images(), conv(1, 32), nn::BatchNorm2d(32), nn::ReLU(), conv(32, 64), nn::BatchNorm2d(64),
                        nn::ReLU(), nn::MaxPool2d(2), conv(64, 64), nn::BatchNorm2d(64), nn::ReLU(),
                        nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(64, 10));
}

/// One epoch of both examples: `order` shuffled anew (Fisher-Yates with the
/// engine directly: std::shuffle's order is not the same across standard
/// libraries), minibatches of `batch` rows, each `lossOf(x, y)` then
/// zeroGrad, backward and an optimizer step. Returns the mean loss.
template <typename LossFn>
double trainEpoch(kiln::optim::Optimizer& optimizer, const Dataset& train, std::vector<int64_t>& order, int batch,
                  std::mt19937_64& shuffle, LossFn lossOf) {
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[shuffle() % (i + 1)]);
  double lossSum = 0;
  int batches = 0;
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch)) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch));
    auto [x, y] = digits::batch(train, std::vector<int64_t>(order.begin() + start, order.begin() + end));
    kiln::Tensor loss = lossOf(x, y);
    optimizer.zeroGrad();
    loss.backward();
    optimizer.step();
    lossSum += loss.item();
    ++batches;
  }
  return lossSum / batches;
}

/// The fraction of `data` that `model` classifies right (in eval mode).
inline double accuracy(kiln::nn::Sequential& model, const Dataset& data) {
  kiln::NoGradGuard noGrad;
  model->eval();
  std::vector<int64_t> all(static_cast<size_t>(data.size()));
  std::iota(all.begin(), all.end(), 0);
  auto [x, y] = batch(data, all);
  const kiln::Tensor predicted = kiln::argmax(model->forward(x), 1);
  const kiln::Tensor correct = kiln::sum(predicted == y);
  model->train();
  return static_cast<double>(correct.item<int64_t>()) / static_cast<double>(data.size());
}

}  // namespace digits

// Trains a small MLP on the UCI handwritten digits (1797 8x8 images, 10
// classes) with kiln's eager tensors, autograd, nn and optim, as one would
// with PyTorch:
//
//   Linear(64, 128) - ReLU - Dropout(0.1) - LayerNorm(128) - Linear(128, 10)
//
// trained with AdamW on cross-entropy, in minibatches, printing the loss per
// epoch and the accuracy on a fixed test split (every fifth image: 360 test,
// 1437 train).
//
//   train_digits [--data data/digits.csv] [--epochs 30] [--batch 64] [--lr 3e-3]
//                [--seed 0] [--min-accuracy A]
//
// data/digits.csv comes from scripts/fetch_data.sh (Debian's python3-sklearn
// ships it). With --min-accuracy the exit status is 1 when the final test
// accuracy is below A (the end-to-end test uses 0.95).
#include <kiln/frontend/kiln.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Dataset {
  std::vector<float> pixels;  // n x 64, scaled to [0, 1]
  std::vector<int64_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

/// Reads data/digits.csv: per line 64 pixel values 0..16 and the label.
bool load(const std::string& path, Dataset& train, Dataset& test) {
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
std::pair<kiln::Tensor, kiln::Tensor> batch(const Dataset& data, const std::vector<int64_t>& rows) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t r : rows) {
    x.insert(x.end(), data.pixels.begin() + r * 64, data.pixels.begin() + (r + 1) * 64);
    y.push_back(data.labels[static_cast<size_t>(r)]);
  }
  const auto n = static_cast<int64_t>(rows.size());
  return {kiln::fromVector(x, {n, 64}), kiln::fromVector(y, {n})};
}

double accuracy(kiln::nn::Sequential& model, const Dataset& data) {
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

}  // namespace

int main(int argc, char** argv) {
  std::string path = "data/digits.csv";
  int epochs = 30, batchSize = 64;
  double lr = 3e-3, minAccuracy = -1;
  uint64_t seed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--data") path = value;
    else if (flag == "--epochs") epochs = std::stoi(value);
    else if (flag == "--batch") batchSize = std::stoi(value);
    else if (flag == "--lr") lr = std::stod(value);
    else if (flag == "--seed") seed = std::stoull(value);
    else if (flag == "--min-accuracy") minAccuracy = std::stod(value);
    else {
      std::fprintf(stderr, "train_digits: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  Dataset train, test;
  if (!load(path, train, test)) {
    std::fprintf(stderr, "train_digits: cannot read %s (run scripts/fetch_data.sh)\n", path.c_str());
    return 2;
  }
  std::printf("digits: %lld train, %lld test images\n", static_cast<long long>(train.size()),
              static_cast<long long>(test.size()));

  try {
    kiln::manualSeed(seed);
    kiln::nn::Sequential model(kiln::nn::Linear(64, 128), kiln::nn::ReLU(), kiln::nn::Dropout(0.1),
                               kiln::nn::LayerNorm(std::vector<int64_t>{128}), kiln::nn::Linear(128, 10));
    kiln::optim::AdamWOptions options;
    options.lr = lr;
    kiln::optim::AdamW optimizer(model->parameters(), options);

    std::mt19937_64 shuffle(seed);
    std::vector<int64_t> order(static_cast<size_t>(train.size()));
    std::iota(order.begin(), order.end(), 0);
    double acc = 0;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      // Fisher-Yates with the engine directly: std::shuffle's order is not
      // the same across standard libraries.
      for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[shuffle() % (i + 1)]);
      double lossSum = 0;
      int batches = 0;
      for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batchSize)) {
        const size_t end = std::min(order.size(), start + static_cast<size_t>(batchSize));
        auto [x, y] = batch(train, std::vector<int64_t>(order.begin() + start, order.begin() + end));
        const kiln::Tensor loss = kiln::crossEntropy(model->forward(x), y);
        optimizer.zeroGrad();
        loss.backward();
        optimizer.step();
        lossSum += loss.item();
        ++batches;
      }
      acc = accuracy(model, test);
      std::printf("epoch %2d  loss %.4f  test accuracy %.2f%%\n", epoch, lossSum / batches, 100 * acc);
    }
    std::printf("test accuracy: %.2f%%\n", 100 * acc);
    if (minAccuracy >= 0 && acc < minAccuracy) {
      std::fprintf(stderr, "train_digits: test accuracy %.4f is below %.4f\n", acc, minAccuracy);
      return 1;
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "train_digits: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Data sets, samplers and collation (frontend/data/): TensorDataset,
// map(), CsvDataset and its errors, SequentialSampler, RandomSampler,
// BatchSampler, data::collate.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "frontend/kiln.h"
#include "tests/unit/frontend/data_test_util.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

TEST(TensorDataset, ExamplesAreRowsOfEveryTensor) {
  const Tensor x = arange(0, 6, 1, DType::f32, Device::cpu()).view({3, 2});
  const Tensor y = fromVector(std::vector<int64_t>{7, 8, 9}, {3}, Device::cpu());
  TensorDataset d({x, y});
  EXPECT_EQ(d.size(), 3);
  const Example e = d.get(1);
  EXPECT_EQ(e.data().toVector(), (std::vector<float>{2, 3}));
  EXPECT_EQ(e.target().item<int64_t>(), 8);
  EXPECT_THROW(d.get(3), Error);
  try {
    TensorDataset bad({x, fromVector({1.0f, 2.0f}, {2}, Device::cpu())});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different first dimensions"), std::string::npos) << e.what();
  }
  try {
    (void)Example{x}.target();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Example::target: the example holds 1 tensor(s), a target is the second");
  }
}

TEST(MapDataset, AppliesTheTransformToEachExample) {
  auto base = std::make_shared<TensorDataset>(std::vector<Tensor>{arange(0, 4, 1, DType::f32, Device::cpu())});
  auto squared = map(base, [](Example e) { return Example{mul(e.data(), e.data())}; });
  EXPECT_EQ(squared->size(), 4);
  EXPECT_EQ(squared->get(3).data().item(), 9.0f);
}

TEST(Samplers, SequentialRandomAndBatch) {
  EXPECT_EQ(SequentialSampler(4).indices(3), (std::vector<int64_t>{0, 1, 2, 3}));
  RandomSampler r(50, 11);
  EXPECT_EQ(r.indices(2), RandomSampler(50, 11).indices(2)) << "a function of (seed, epoch)";
  EXPECT_NE(r.indices(2), r.indices(3));
  EXPECT_NE(r.indices(2), RandomSampler(50, 12).indices(2));
  std::vector<int64_t> sorted = r.indices(0), all(50);
  std::sort(sorted.begin(), sorted.end());
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  auto seq = std::make_shared<SequentialSampler>(5);
  EXPECT_EQ(BatchSampler(seq, 2, false).batches(0), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}}));
  EXPECT_EQ(BatchSampler(seq, 2, true).batches(0), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_THROW(BatchSampler(seq, 0, false), Error);
}

TEST(Collate, StacksEachTensorAlongANewFirstDimension) {
  const Example a(fromVector({1.0f, 2.0f}, {2}, Device::cpu()), fromVector(std::vector<int64_t>{5}, {}, Device::cpu()));
  const Example b(fromVector({3.0f, 4.0f}, {2}, Device::cpu()), fromVector(std::vector<int64_t>{6}, {}, Device::cpu()));
  const Batch batch = collate({a, b});
  EXPECT_EQ(batch.data().shape(), (Shape{2, 2}));
  EXPECT_EQ(batch.data().toVector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(batch.target().shape(), (Shape{2}));
  EXPECT_EQ(batch.target().dtype(), DType::i64);
  EXPECT_EQ(batch.target().toVector<int64_t>(), (std::vector<int64_t>{5, 6}));
  EXPECT_FALSE(batch.data().isPinned());
  EXPECT_TRUE(collate({a, b}, /*pinned=*/true).data().isPinned());
  // A view that is not contiguous takes kiln::stack.
  const Tensor m = fromVector({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}, Device::cpu());
  const Batch views = collate({Example{m.t()}, Example{m}});
  EXPECT_EQ(views.data().toVector(), (std::vector<float>{1, 3, 2, 4, 1, 2, 3, 4}));
}

TEST(Collate, MismatchedExamplesAreErrorsNamingTheExample) {
  const Example a{fromVector({1.0f, 2.0f}, {2}, Device::cpu())};
  const Example b{fromVector({1.0f, 2.0f, 3.0f}, {3}, Device::cpu())};
  try {
    (void)collate({a, a, b});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "collate: tensor 0 of example 2 is f32[3]@cpu, of example 0 f32[2]@cpu; a batch needs one shape and "
                 "device");
  }
  try {
    (void)collate({a, Example(a.data(), a.data())});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "collate: example 1 holds 2 tensor(s), example 0 holds 1");
  }
}

/// A file of `text` in a scratch directory of this process.
std::string writeFile(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("kiln-data-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(CsvDataset, ReadsFeaturesAndALabel) {
  const std::string path = writeFile("iris.csv", "a, b,c ,label\n1,2.5,3,0\r\n\n4,5,-6e1,2\n");
  CsvDataset d(path, {.header = true, .labelColumn = -1});
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.columnNames(), (std::vector<std::string>{"a", "b", "c", "label"}));
  const Example e = d.get(1);
  EXPECT_EQ(e.data().dtype(), DType::f32);
  EXPECT_EQ(e.data().toVector(), (std::vector<float>{4, 5, -60}));
  EXPECT_EQ(e.target().dtype(), DType::i64);
  EXPECT_EQ(e.target().item<int64_t>(), 2);
  // A label column in the middle; no header.
  CsvDataset mid(writeFile("mid.csv", "1,9,2\n3,8,4\n"), {.labelColumn = 1});
  EXPECT_EQ(mid.features().toVector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(mid.labels().toVector<int64_t>(), (std::vector<int64_t>{9, 8}));
  // No label: one tensor an example; batches through a loader.
  auto plain = std::make_shared<CsvDataset>(writeFile("plain.csv", "1;2\n3;4\n5;6\n"), CsvOptions{.delimiter = ';'});
  EXPECT_EQ(plain->get(0).size(), 1u);
  DataLoader loader(plain, {.batchSize = 2, .numWorkers = 1});
  std::vector<Shape> shapes;
  for (Batch& b : loader) shapes.push_back(b.data().shape());
  EXPECT_EQ(shapes, (std::vector<Shape>{{2, 2}, {1, 2}}));
}

std::string csvError(const std::string& name, const std::string& text, CsvOptions options = {}) {
  const std::string path = writeFile(name, text);
  try {
    CsvDataset d(path, options);
    return "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    const size_t at = what.find(path);
    return at == std::string::npos ? what : what.substr(0, at) + name + what.substr(at + path.size());
  }
}

TEST(CsvDataset, ErrorsNameTheFileLineAndColumn) {
  EXPECT_EQ(csvError("bad.csv", "x,y\n1,2\n3,abc\n", {.header = true}),
            "CsvDataset: bad.csv:3:2: 'abc' is not a number");
  EXPECT_EQ(csvError("empty-cell.csv", "1,,3\n"), "CsvDataset: empty-cell.csv:1:2: '' is not a number");
  EXPECT_EQ(csvError("ragged.csv", "1,2\n3\n"), "CsvDataset: ragged.csv:2: 1 cells, expected 2 as in the first row");
  EXPECT_EQ(csvError("label.csv", "1,2.5\n", {.labelColumn = 1}),
            "CsvDataset: label.csv:1:2: label '2.5' is not an integer, and the label dtype is i64");
  EXPECT_EQ(csvError("column.csv", "1,2\n", {.labelColumn = 5}),
            "CsvDataset: column.csv:1: label column 5 of a row of 2 columns");
  EXPECT_EQ(csvError("trailing.csv", "1,2x\n"), "CsvDataset: trailing.csv:1:2: '2x' is not a number");
  try {
    CsvDataset d("/nonexistent/kiln.csv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "CsvDataset: cannot open '/nonexistent/kiln.csv'");
  }
}

// docs/data.md's worked example, on the CPU: a CSV, a random transform
// seeded by workerInfo(), two persistent workers, pinned batches through a
// DevicePrefetcher, and a model that learns from them.
TEST(DataExample, TrainsOnACsvThroughTheLoader) {
  std::string text = "f0,f1,f2,f3,label\n";
  for (int i = 0; i < 24; ++i) {
    const int label = i % 3;
    text +=
        fmt::format("{},{},{},{},{}\n", label == 0 ? 2 : -1, label == 1 ? 2 : -1, label == 2 ? 2 : -1, i % 2, label);
  }
  auto rows = std::make_shared<CsvDataset>(writeFile("train.csv", text), CsvOptions{.header = true, .labelColumn = -1});
  auto noisy = map(rows, [](Example e) {
    Generator g(workerInfo()->seed);
    e.tensors[0] = add(e.data(), mul(randn(e.data().shape(), g), 0.01));
    return e;
  });
  DataLoader loader(
      noisy,
      {.batchSize = 8, .shuffle = true, .numWorkers = 2, .pinMemory = true, .persistentWorkers = true, .seed = 42});
  nn::Sequential model{nn::Linear(4, 16), nn::ReLU(), nn::Linear(16, 3)};
  optim::SGD optimizer(model->parameters(), {.lr = 0.2});
  std::vector<double> epochLoss;
  for (int epoch = 0; epoch < 15; ++epoch) {
    double total = 0;
    for (Batch& batch : DevicePrefetcher(loader, Device::cpu())) {
      EXPECT_TRUE(batch.data().isPinned());
      optimizer.zeroGrad();
      const Tensor loss = crossEntropy(model->forward(batch.data()), batch.target());
      loss.backward();
      optimizer.step();
      total += loss.item();
    }
    epochLoss.push_back(total / 3);
  }
  EXPECT_LT(epochLoss.back(), 0.5 * epochLoss.front())
      << "first " << epochLoss.front() << ", last " << epochLoss.back();
}

}  // namespace
}  // namespace kiln::data

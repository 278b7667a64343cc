// kiln-bench --suite loader (loader_suite.h). A data set of 384 examples
// (f32[64] and an i64 label) whose get() costs 1 ms, read in batches of 16
// by DataLoaders of 0, 1 and 2 workers; each row is the median of the
// epochs' samples per second (an epoch includes starting its threads), and
// the ratio to 0 workers. Two kinds of 1 ms transform:
//
// - sleep: the thread sleeps 1 ms, as a transform waiting on a disk, a
//   network or a decoder does. It needs no core, so it measures what the
//   loader's threads, ordering and hand-off cost and how well they overlap,
//   whatever else the machine runs.
// - busy: the thread spins until it has used 1 ms of its own CPU time
//   (CLOCK_THREAD_CPUTIME_ID), as a decode or augmentation in C++ does. Two
//   workers then need two free cores, so this row measures the machine as
//   much as the loader: on a shared two-core machine it falls short of 2x.
#include "tools/kiln-bench/loader_suite.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <ostream>
#include <thread>
#include <vector>

#include "frontend/kiln.h"
#include "tools/kiln-bench/measure.h"

namespace kiln::bench {

namespace {

constexpr int64_t kExamples = 384;
constexpr int64_t kBatch = 16;

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

class SlowDataset : public data::Dataset {
 public:
  SlowDataset(bool busy, Tensor rows) : busy_(busy), rows_(std::move(rows)) {}
  data::Example get(int64_t index) const override {
    if (busy_) {
      const double start = threadCpuMs();
      while (threadCpuMs() - start < 1.0) {
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return data::Example(rows_.select(0, index), fromVector(std::vector<int64_t>{index}, {}, Device::cpu()));
  }
  int64_t size() const override { return rows_.size(0); }

 private:
  bool busy_;
  Tensor rows_;
};

struct Row {
  std::string transform;
  int workers = 0;
  double samplesPerSecond = 0;
  double ratio = 0;
  int epochs = 0;
};

}  // namespace

int runLoaderSuite(const Options& options, std::ostream& out) {
  const int epochs = options.repeats > 0 ? options.repeats : 3;
  const Tensor rows = randn({kExamples, 64}, DType::f32);
  std::vector<Row> table;
  for (const char* transform : {"sleep", "busy"}) {
    auto dataset = std::make_shared<SlowDataset>(std::string(transform) == "busy", rows);
    double base = 0;
    for (int workers : {0, 1, 2}) {
      std::cerr << fmt::format("kiln-bench: loader, {} transform, {} worker(s)\n", transform, workers);
      data::DataLoader loader(dataset, {.batchSize = kBatch, .shuffle = true, .numWorkers = workers, .seed = 1});
      std::vector<double> rates;
      for (int e = 0; e < epochs; ++e) {
        const auto start = std::chrono::steady_clock::now();
        int64_t seen = 0;
        for (data::Batch& b : loader) seen += b.data().size(0);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (seen != kExamples)
          throw std::runtime_error(fmt::format("the loader read {} examples of {}", seen, kExamples));
        rates.push_back(static_cast<double>(seen) / s);
      }
      Row r{transform, workers, median(rates), 0, epochs};
      if (workers == 0) base = r.samplesPerSecond;
      r.ratio = r.samplesPerSecond / base;
      table.push_back(r);
    }
  }
  out << fmt::format(
      "DataLoader throughput: {} examples in batches of {}, a 1 ms transform per example, "
      "median of {} epochs; {} hardware threads\n\n",
      kExamples, kBatch, epochs, std::thread::hardware_concurrency());
  out << "| transform | workers | samples/s | vs 0 workers |\n|---|---:|---:|---:|\n";
  for (const Row& r : table)
    out << fmt::format("| {} | {} | {:.0f} | {:.2f}x |\n", r.transform, r.workers, r.samplesPerSecond, r.ratio);
  if (options.jsonPath) {
    std::ofstream json(*options.jsonPath);
    json << "[\n";
    for (size_t i = 0; i < table.size(); ++i)
      json << fmt::format(
          R"(  {{"suite": "loader", "transform": "{}", "workers": {}, "samples_per_second": {:.1f}, "ratio": {:.3f}, "epochs": {}}}{})",
          table[i].transform, table[i].workers, table[i].samplesPerSecond, table[i].ratio, table[i].epochs,
          i + 1 < table.size() ? ",\n" : "\n");
    json << "]\n";
    if (!json) {
      std::cerr << fmt::format("kiln-bench: error: cannot write {}\n", *options.jsonPath);
      return 1;
    }
  }
  return 0;
}

}  // namespace kiln::bench

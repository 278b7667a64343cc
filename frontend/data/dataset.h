// The two kinds of data set a DataLoader reads, as in PyTorch:
//
// - data::Dataset: random access, get(i) for i in [0, size()); samplers pick
//   the indices, so shuffling, batching and parallel loading are the
//   loader's business. TensorDataset and CsvDataset are ones.
// - data::IterableDataset: a stream of examples read in order (a file too
//   large to index, a generator); reset() starts it again at each epoch.
//
// Transforms are maps over examples: data::map(dataset, fn) is a Dataset
// whose get(i) is fn(dataset.get(i)); the loader's workers call it, so an
// expensive transform runs on the workers, ahead of the consumer.
//
// Note [Datasets are called from worker threads]
// kiln's workers are threads of the one process (docs/data.md), so a
// Dataset's get() is called from several threads at once and must be safe
// to call so: it is const, and should read shared state only. An
// IterableDataset's next() is called by one thread at a time (the loader
// serializes reads; Note [Iterable datasets and workers] in data_loader.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "frontend/data/example.h"

namespace kiln::data {

/// A random-access data set. get() may be called from several threads at
/// once (Note [Datasets are called from worker threads]).
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Example `index`, 0 <= index < size().
  virtual Example get(int64_t index) const = 0;
  virtual int64_t size() const = 0;
};

/// A data set read as a stream, in order.
class IterableDataset {
 public:
  virtual ~IterableDataset() = default;
  /// Starts the stream again from its beginning (called at each epoch's start).
  virtual void reset() = 0;
  /// The next example, or nullopt at the end of the stream.
  virtual std::optional<Example> next() = 0;
};

using Transform = std::function<Example(Example)>;

/// `dataset` with `transform` applied to each example on the way out.
class MapDataset : public Dataset {
 public:
  MapDataset(std::shared_ptr<const Dataset> dataset, Transform transform);
  Example get(int64_t index) const override { return transform_(dataset_->get(index)); }
  int64_t size() const override { return dataset_->size(); }

 private:
  std::shared_ptr<const Dataset> dataset_;
  Transform transform_;
};

/// A MapDataset; the transform must be safe to call from several threads.
std::shared_ptr<MapDataset> map(std::shared_ptr<const Dataset> dataset, Transform transform);

/// Tensors that share their first dimension; example i is every tensor's
/// row i (a view), as torch.utils.data.TensorDataset.
class TensorDataset : public Dataset {
 public:
  /// At least one tensor; all of one size along dimension 0.
  explicit TensorDataset(std::vector<Tensor> tensors);
  Example get(int64_t index) const override;
  int64_t size() const override { return size_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

}  // namespace kiln::data

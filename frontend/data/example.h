// data::Example: one sample of a data set, and data::Batch: examples
// collated into one. An example is a list of positional tensors (a
// TensorDataset's columns, a CSV row's features and label); data() and
// target() name the first two, as libtorch's torch::data::Example does, so
// that the common (input, label) case reads like libtorch:
//
//   data::Example e = dataset.get(3);
//   e.data();    // the features, e.tensors[0]
//   e.target();  // the label, e.tensors[1]
//
// A Batch is the same type: tensor k of a batch is tensor k of each example
// stacked along a new leading dimension (data::collate).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::data {

struct Example {
  Example() = default;
  Example(std::vector<Tensor> tensors) : tensors(std::move(tensors)) {}  // NOLINT: implicit, as a braced list
  Example(std::initializer_list<Tensor> tensors) : tensors(tensors) {}
  /// An (input, label) pair, libtorch's Example{data, target}.
  Example(Tensor data, Tensor target) : tensors{std::move(data), std::move(target)} {}

  /// tensors[0]; an error when there is none.
  const Tensor& data() const;
  /// tensors[1]; an error when there are fewer than two.
  const Tensor& target() const;
  size_t size() const { return tensors.size(); }
  const Tensor& operator[](size_t i) const;

  std::vector<Tensor> tensors;
};

/// Examples collated into one: each tensor has a leading batch dimension.
using Batch = Example;

}  // namespace kiln::data

// MapDataset and TensorDataset (frontend/data/dataset.h).
#include "frontend/data/dataset.h"

#include "runtime/error.h"

namespace kiln::data {

MapDataset::MapDataset(std::shared_ptr<const Dataset> dataset, Transform transform)
    : dataset_(std::move(dataset)), transform_(std::move(transform)) {
  KILN_CHECK(dataset_ != nullptr, "map: a null data set");
  KILN_CHECK(static_cast<bool>(transform_), "map: an empty transform");
}

std::shared_ptr<MapDataset> map(std::shared_ptr<const Dataset> dataset, Transform transform) {
  return std::make_shared<MapDataset>(std::move(dataset), std::move(transform));
}

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  KILN_CHECK(!tensors_.empty(), "TensorDataset: expected at least one tensor");
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Tensor& t = tensors_[k];
    KILN_CHECK(t.defined(), "TensorDataset: tensor {} is undefined", k);
    KILN_CHECK(t.dim() >= 1, "TensorDataset: tensor {} ({}) has no first dimension to index", k, t.str());
    KILN_CHECK(t.size(0) == tensors_[0].size(0),
               "TensorDataset: tensors of different first dimensions: tensor 0 is {}, tensor {} is {}",
               tensors_[0].str(), k, t.str());
  }
  size_ = tensors_[0].size(0);
}

Example TensorDataset::get(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size_, "TensorDataset: index {} is out of range for {} examples", index, size_);
  Example e;
  e.tensors.reserve(tensors_.size());
  for (const Tensor& t : tensors_) e.tensors.push_back(t.select(0, index));
  return e;
}

}  // namespace kiln::data

// data::collate (frontend/data/collate.h).
#include "frontend/data/collate.h"

#include <cstring>

#include "runtime/buffer.h"
#include "runtime/error.h"

namespace kiln::data {

namespace {

/// Whether the k-th tensors can be copied by memcpy: eager, contiguous, on
/// the CPU, all of one dtype (the shapes are checked before).
bool hostCopyable(const std::vector<Example>& examples, size_t k) {
  for (const Example& e : examples) {
    const Tensor& t = e.tensors[k];
    if (t.isTraced() || !t.device().isCpu() || !t.isContiguous() || t.dtype() != examples[0].tensors[k].dtype())
      return false;
  }
  return true;
}

Tensor stackOnHost(const std::vector<Example>& examples, size_t k, bool pinned) {
  const Tensor& first = examples[0].tensors[k];
  ir::TensorType type = first.type();
  type.shape.insert(type.shape.begin(), static_cast<int64_t>(examples.size()));
  const size_t each = static_cast<size_t>(first.numel()) * itemSize(first.dtype());
  auto storage = pinned ? runtime::allocatePinnedBuffer(each * examples.size())
                        : runtime::allocateBuffer(Device::cpu(), each * examples.size());
  Tensor out = detail::contiguousTensor(std::move(type), std::move(storage));
  if (each == 0) return out;
  char* dst = static_cast<char*>(out.impl()->storage->hostData());
  for (const Example& e : examples) {
    const Tensor& t = e.tensors[k];
    std::memcpy(dst, static_cast<const char*>(t.impl()->storage->hostData()) + t.storageOffset() * itemSize(t.dtype()),
                each);
    dst += each;
  }
  return out;
}

}  // namespace

Batch collate(const std::vector<Example>& examples, bool pinned) {
  KILN_CHECK(!examples.empty(), "collate: no examples");
  const size_t n = examples[0].size();
  for (size_t i = 0; i < examples.size(); ++i) {
    KILN_CHECK(examples[i].size() == n, "collate: example {} holds {} tensor(s), example 0 holds {}", i,
               examples[i].size(), n);
    for (size_t k = 0; k < n; ++k) {
      const Tensor& t = examples[i].tensors[k];
      const Tensor& t0 = examples[0].tensors[k];
      KILN_CHECK(t.defined(), "collate: tensor {} of example {} is undefined", k, i);
      KILN_CHECK(t.shape() == t0.shape() && t.device() == t0.device(),
                 "collate: tensor {} of example {} is {}, of example 0 {}; a batch needs one shape and device", k, i,
                 t.str(), t0.str());
    }
  }
  Batch batch;
  batch.tensors.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    if (hostCopyable(examples, k)) {
      batch.tensors.push_back(stackOnHost(examples, k, pinned));
      continue;
    }
    std::vector<Tensor> column;
    column.reserve(examples.size());
    for (const Example& e : examples) column.push_back(e.tensors[k]);
    Tensor stacked = stack(column, 0);
    batch.tensors.push_back(pinned && stacked.device().isCpu() ? stacked.pinMemory() : stacked);
  }
  return batch;
}

}  // namespace kiln::data

// data::DevicePrefetcher: a loader's batches on a device, each copied while
// the one before it computes. PyTorch gets this from pin_memory=True and
// .to(device, non_blocking=True); kiln's is the well-known "data
// prefetcher" of NVIDIA's examples, packaged:
//
//   data::DataLoader loader(dataset, {.batchSize = 64, .numWorkers = 2, .pinMemory = true});
//   for (data::Batch& batch : data::DevicePrefetcher(loader, Device::cuda(0)))
//     step(batch.data(), batch.target());   // already on cuda:0
//
// Note [Prefetching to a device]
// When batch i is handed out, batch i+1's copies are already enqueued on a
// side stream of the device (Tensor::to(device, /*nonBlocking=*/true) from
// pinned memory returns at once), so they overlap batch i's work on the
// current stream. Before batch i+1 is handed out, the consumer's current
// stream waits for an event recorded after its copies (a device-side wait:
// the host does not block), and each of its tensors records the current
// stream (Tensor::recordStream), since it was allocated on the side stream
// but is used on the current one. The pinned sources may go as soon as the
// copies are enqueued: the pinned allocator holds a block back until the
// copy that reads it has run (Note [Pinned memory]). Without pinMemory the
// copies are synchronous and nothing overlaps; the batches are the same.
// On the CPU the batches pass through untouched.
#pragma once

#include <iterator>
#include <memory>

#include "frontend/data/data_loader.h"
#include "runtime/device.h"

namespace kiln::data {

class DevicePrefetcher {
 public:
  /// Prefetches `loader`'s batches to `device`; the loader must outlive it.
  DevicePrefetcher(DataLoader& loader, Device device);
  ~DevicePrefetcher();
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;

  class Iterator;
  /// Starts an epoch of the loader and enqueues the first batch's copies.
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }
  Device device() const { return device_; }

 private:
  DataLoader* loader_;
  Device device_;
};

struct PrefetchState;

class DevicePrefetcher::Iterator {
 public:
  using value_type = Batch;
  using difference_type = std::ptrdiff_t;
  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();

  /// The current batch, on the device, ready for the current stream.
  Batch& operator*() const;
  Batch* operator->() const { return &**this; }
  Iterator& operator++();
  void operator++(int) { ++*this; }
  bool operator==(std::default_sentinel_t) const;

 private:
  friend class DevicePrefetcher;
  explicit Iterator(std::unique_ptr<PrefetchState> state);
  std::unique_ptr<PrefetchState> state_;
};

}  // namespace kiln::data

// data::DevicePrefetcher (frontend/data/device_prefetcher.h), as Note
// [Prefetching to a device] says.
#include "frontend/data/device_prefetcher.h"

#include <optional>

#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/stream.h"

namespace kiln::data {

struct PrefetchState {
  PrefetchState(DataLoader::Iterator it, Device device)
      : it(std::move(it)), device(device), side(device.isCpu() ? Stream() : Stream::create(device)) {}

  /// Enqueues the copies of the loader's next batch on the side stream.
  void preload() {
    next.reset();
    if (it == std::default_sentinel) return;
    Batch moved;
    if (device.isCpu()) {
      moved = std::move(*it);
    } else {
      StreamGuard guard(side);
      moved.tensors.reserve(it->tensors.size());
      for (const Tensor& t : it->tensors) moved.tensors.push_back(t.defined() ? t.to(device, true) : t);
      ready = Event();
      ready.record(side);
    }
    next = std::move(moved);
    ++it;  // the pinned sources may go (Note [Pinned memory])
  }

  /// Hands out the batch preloaded, and preloads the one after it.
  void advance() {
    current.reset();
    if (!next) return;
    if (!device.isCpu()) {
      const Stream consumer = currentStream(device);
      consumer.wait(ready);
      for (const Tensor& t : next->tensors)
        if (t.defined()) t.recordStream(consumer);
    }
    current = std::move(next);
    preload();
  }

  DataLoader::Iterator it;
  Device device;
  Stream side;
  Event ready;
  std::optional<Batch> next, current;
};

DevicePrefetcher::DevicePrefetcher(DataLoader& loader, Device device) : loader_(&loader), device_(device) {
  std::string why;
  KILN_CHECK(runtime::isDeviceAvailable(device, &why), "DevicePrefetcher: cannot use {}: {}", device.str(), why);
}

DevicePrefetcher::~DevicePrefetcher() = default;

DevicePrefetcher::Iterator DevicePrefetcher::begin() {
  auto state = std::make_unique<PrefetchState>(loader_->begin(), device_);
  state->preload();
  state->advance();
  return Iterator(std::move(state));
}

DevicePrefetcher::Iterator::Iterator(std::unique_ptr<PrefetchState> state) : state_(std::move(state)) {}
DevicePrefetcher::Iterator::Iterator(Iterator&&) noexcept = default;
DevicePrefetcher::Iterator& DevicePrefetcher::Iterator::operator=(Iterator&&) noexcept = default;
DevicePrefetcher::Iterator::~Iterator() = default;

Batch& DevicePrefetcher::Iterator::operator*() const {
  KILN_CHECK(state_ && state_->current, "DevicePrefetcher: dereferencing the end of an epoch");
  return *state_->current;
}

DevicePrefetcher::Iterator& DevicePrefetcher::Iterator::operator++() {
  KILN_CHECK(state_ && state_->current, "DevicePrefetcher: incrementing past the end of an epoch");
  state_->advance();
  return *this;
}

bool DevicePrefetcher::Iterator::operator==(std::default_sentinel_t) const { return !state_ || !state_->current; }

}  // namespace kiln::data

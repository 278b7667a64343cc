// Streams and events, PyTorch's model (c10/cuda/CUDAStream.h, CUDAEvent.h)
// over the device interface: per device a default stream and a
// thread-local current stream, which every op, copy and compiled program
// enqueues on (Note [Streams order work] in runtime/device_interface.h);
// events order work across streams and time it.
//
// On the CPU every stream runs its work when it is enqueued, so nothing here
// changes what CPU code computes or when; the API is the one the device
// drivers of the next issues fill in.
#pragma once

#include <memory>

#include "runtime/device.h"
#include "runtime/device_interface.h"

namespace kiln {

class Event;

/// A queue of work on one device. Copies are handles: a stream made by
/// Stream::create() is destroyed when its last handle goes.
class Stream {
 public:
  /// The CPU's default stream.
  Stream() = default;
  /// The default stream of `device`.
  static Stream defaultStream(Device device);
  /// A new stream on `device`.
  static Stream create(Device device);

  Device device() const { return device_; }
  runtime::StreamHandle handle() const { return handle_; }
  bool isDefault() const { return handle_.native == nullptr; }
  /// Whether all work enqueued on it has finished.
  bool query() const;
  /// Blocks the host until all work enqueued on it has finished.
  void synchronize() const;
  /// Work enqueued on this stream from now on waits for `event` (on the
  /// device; the host does not block). An event never recorded is complete.
  void wait(const Event& event) const;

  friend bool operator==(const Stream& a, const Stream& b) { return a.device_ == b.device_ && a.handle_ == b.handle_; }

 private:
  Stream(Device device, runtime::StreamHandle handle, std::shared_ptr<void> owner)
      : device_(device), handle_(handle), owner_(std::move(owner)) {}
  Device device_;
  runtime::StreamHandle handle_;
  std::shared_ptr<void> owner_;  ///< destroys a created stream with its last handle
};

/// The calling thread's current stream on `device` (its default stream
/// until set).
Stream currentStream(Device device);
/// Makes `stream` the calling thread's current stream on its device.
void setCurrentStream(const Stream& stream);

/// Sets the current stream of the stream's device for a scope, and restores
/// the previous one at its end.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

/// Blocks the host until all work on every stream of `device` has finished.
void synchronize(Device device);

/// A point in a stream's work (torch.cuda.Event): made on its device at the
/// first record; an event never recorded is complete. Copies are handles.
class Event {
 public:
  explicit Event(bool enableTiming = false);
  /// Marks the work enqueued on `stream` so far.
  void record(const Stream& stream);
  /// record() on the current stream of `device`.
  void record(Device device = Device::cpu());
  /// Whether the work it marks has finished.
  bool query() const;
  /// Blocks the host until the work it marks has finished.
  void synchronize() const;
  /// Milliseconds from this event to `end`, both recorded with timing and
  /// complete; kiln::Error otherwise.
  double elapsedMs(const Event& end) const;
  /// Whether it has been recorded.
  bool recorded() const { return state_->recorded; }
  /// The device and native handle, for Stream::wait.
  Device device() const { return state_->device; }
  runtime::EventHandle handle() const { return state_->handle; }

 private:
  struct State {
    bool timing = false;
    bool recorded = false;
    Device device;
    runtime::EventHandle handle;
    ~State();
  };
  std::shared_ptr<State> state_;
};

}  // namespace kiln

// Buffer: a block of device memory that a tensor's storage owns, allocated
// through its device's driver (runtime/device_interface.h) and given back
// to it when the last owner lets go. Above runtime/ a Buffer is opaque
// (Note [Device memory is opaque]): it is bound to kernels and copies as a
// DevicePtr, and only a CPU buffer has a host address.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/device.h"
#include "runtime/device_interface.h"

namespace kiln::runtime {

class Buffer {
 public:
  /// Allocates `bytes` bytes on `device`; kiln::Error when the device
  /// cannot be used or is out of memory.
  Buffer(Device device, size_t bytes);
  /// Pinned host memory for the CPU (runtime/pinned_memory.h).
  struct Pinned {};
  Buffer(Pinned, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  /// The memory `offset` bytes in, as kernels and copies take it.
  DevicePtr ptr(size_t offset = 0) const { return {base_.handle, base_.offset + offset}; }
  /// The driver that owns the memory.
  DeviceInterface& driver() const { return *driver_; }
  /// The host address of a buffer of a host-accessible device (the CPU); an
  /// InternalError for any other.
  void* hostData() const;
  /// Whether this is pinned host memory (Note [Pinned memory]).
  bool pinned() const { return pinned_; }

 private:
  Device device_;
  size_t bytes_;
  DeviceInterface* driver_;
  DevicePtr base_;
  bool pinned_ = false;
};

/// Allocates a Buffer of `bytes` on `device` through its caching allocator.
std::shared_ptr<Buffer> allocateBuffer(Device device, size_t bytes);
/// Allocates a Buffer of `bytes` of pinned host memory (on the CPU).
std::shared_ptr<Buffer> allocatePinnedBuffer(size_t bytes);

}  // namespace kiln::runtime

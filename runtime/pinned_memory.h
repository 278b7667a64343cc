// Pinned host memory: the staging memory of asynchronous copies between the
// host and a device (Tensor::pinMemory(), Tensor::to(device, nonBlocking)).
//
// Note [Pinned memory]
// A copy from host memory that returns before it has run (cudaMemcpyAsync,
// a non-blocking clEnqueueWriteBuffer) reads that memory later, so the
// memory must neither move nor be handed out again before the copy is done.
// PyTorch's CachingHostAllocator keeps that promise with events, and so does
// this allocator: a copy enqueued on a stream records its use of the block
// (recordUse: an event on that stream), and a released block is handed out
// again only once every event recorded on it has completed; blocks whose
// uses are pending stay aside. Blocks are page aligned and locked in memory
// where the OS allows (mlock; a refusal is not an error: on PoCL every
// buffer is host memory anyway, and CUDA registers the block with the
// driver itself). A copy from pageable memory is synchronous instead
// (DeviceInterface::copyHostToDevice reads its source before it returns).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/device.h"
#include "runtime/device_interface.h"

namespace kiln::runtime {

struct PinnedStats {
  int64_t allocatedBytes = 0;  ///< in blocks handed out now
  int64_t reservedBytes = 0;   ///< held from the OS: handed out, cached, or awaiting their uses
  int64_t numAllocations = 0;
  int64_t numCacheHits = 0;
  int64_t numDeferredReuses = 0;  ///< released blocks passed over because a use was pending
};

class PinnedAllocator {
 public:
  static PinnedAllocator& instance();

  /// Page-aligned pinned memory of at least `bytes` bytes; kiln::Error when
  /// the OS refuses.
  void* allocate(size_t bytes);
  /// Gives back a block from allocate(); it is reused after its uses complete.
  void release(void* ptr);
  /// Whether `ptr` points into a block handed out by allocate().
  bool isPinned(const void* ptr) const;
  /// The block holding `ptr` is read or written by the work enqueued on
  /// `stream` of `device` so far (an asynchronous copy).
  void recordUse(const void* ptr, Device device, StreamHandle stream);

  PinnedStats stats() const;
  /// Frees every cached block whose uses have completed.
  void emptyCache();

  /// Tests only: with false, released blocks are reused without waiting for
  /// their uses, the race Note [Pinned memory] prevents (a test shows it).
  void setWaitForUses(bool wait);

  PinnedAllocator() = default;
  ~PinnedAllocator();
  PinnedAllocator(const PinnedAllocator&) = delete;
  PinnedAllocator& operator=(const PinnedAllocator&) = delete;

 private:
  struct Use {
    Device device;
    EventHandle event;
  };
  struct Block {
    size_t size = 0;
    bool live = false;
    std::vector<Use> uses;
  };
  /// Whether every use of `b` has completed; destroys the completed events.
  bool usesDone(Block& b);
  std::map<char*, Block>::iterator find(const void* ptr);

  mutable std::mutex mutex_;
  std::map<char*, Block> blocks_;  ///< every block, by start address
  bool waitForUses_ = true;
  PinnedStats stats_;
};

}  // namespace kiln::runtime

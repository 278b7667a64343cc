// The CPU driver of the device interface (runtime/device_interface.h): host
// memory from the caching HostAllocator, kernels as functions codegen's JIT
// linked into this process run over the ThreadPool, and streams that run
// each operation when it is enqueued (Note [Streams order work]), so events
// complete when recorded and time the host clock.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "runtime/allocator.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/executable.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

namespace {

/// A kernel on the CPU: the JIT'd function and what keeps its code loaded.
class CpuKernel final : public KernelModule {
 public:
  CpuKernel(const KernelImage& image)
      : KernelModule(Device::cpu(), image.name), fn(image.hostFn), keepAlive(image.keepAlive) {}
  CpuKernelFn fn;
  std::shared_ptr<const void> keepAlive;
};

/// An event: the host time at its last record (the work before it is done
/// by then on the CPU).
struct CpuEvent {
  bool timing = false;
  std::chrono::steady_clock::time_point at;
};

/// A stream made by createStream(): nothing to hold but its identity.
struct CpuStream {};

// Copies split at whole pages over the pool, in 64 KiB memcpy calls: on the
// development machine they were faster than one memcpy of a thread's whole
// range (about 32 against 24-29 GB/s). kiln-bench's copy yardstick is this
// copy.
constexpr int64_t kPageGrain = 4096;
constexpr int64_t kPiece = 64 << 10;

void parallelCopy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  ThreadPool::instance().parallelFor(static_cast<int64_t>(bytes), kPageGrain, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; p += kPiece) std::memcpy(d + p, s + p, static_cast<size_t>(std::min(kPiece, e - p)));
  });
}

/// Fills `bytes` bytes at `dst` with copies of the T at `pattern`, split at
/// whole pages over the pool.
template <typename T>
void fillWith(void* dst, size_t bytes, const void* pattern) {
  T value;
  std::memcpy(&value, pattern, sizeof(T));
  auto* d = static_cast<T*>(dst);
  const int64_t grain = kPageGrain / static_cast<int64_t>(sizeof(T));
  ThreadPool::instance().parallelFor(static_cast<int64_t>(bytes / sizeof(T)), grain,
                                     [&](int64_t b, int64_t e) { std::fill(d + b, d + e, value); });
}

class CpuDevice final : public DeviceInterface {
 public:
  CpuDevice() {
    props_.name = "cpu";
    props_.driverVersion = "kiln";
    props_.computeUnits = ThreadPool::instance().numThreads();
    props_.hostAccessible = true;
  }

  Device device() const override { return Device::cpu(); }
  const DeviceProperties& properties() const override { return props_; }

  DevicePtr allocate(size_t bytes, StreamHandle) override { return {HostAllocator::instance().allocate(bytes), 0}; }
  void free(DevicePtr ptr) override { HostAllocator::instance().release(ptr.handle); }
  // One timeline: the CPU's streams run their work when it is enqueued.
  void recordStream(DevicePtr, StreamHandle) override {}
  AllocatorStats memoryStats() const override { return HostAllocator::instance().stats(); }
  void resetPeakMemoryStats() override { HostAllocator::instance().resetPeakStats(); }
  void emptyCache() override { HostAllocator::instance().emptyCache(); }
  std::string memorySummary() const override { return HostAllocator::instance().memorySummary(); }

  void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes, StreamHandle) override {
    if (bytes) std::memcpy(hostAddress(dst), src, bytes);
  }
  void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes, StreamHandle) override {
    if (bytes) std::memcpy(dst, hostAddress(src), bytes);
  }
  void copyHostToDeviceAsync(DevicePtr dst, const void* src, size_t bytes, StreamHandle stream) override {
    copyHostToDevice(dst, src, bytes, stream);
  }
  void copyDeviceToHostAsync(void* dst, DevicePtr src, size_t bytes, StreamHandle stream) override {
    copyDeviceToHost(dst, src, bytes, stream);
  }
  void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle) override {
    if (bytes) parallelCopy(hostAddress(dst), hostAddress(src), bytes);
  }
  void fill(DevicePtr dst, size_t bytes, const void* pattern, size_t patternBytes, StreamHandle) override {
    KILN_ASSERT(patternBytes == 1 || patternBytes == 2 || patternBytes == 4 || patternBytes == 8,
                "fill with a pattern of {} bytes", patternBytes);
    KILN_ASSERT(bytes % patternBytes == 0, "fill of {} bytes with a pattern of {}", bytes, patternBytes);
    void* d = hostAddress(dst);
    switch (patternBytes) {
      case 1: return fillWith<uint8_t>(d, bytes, pattern);
      case 2: return fillWith<uint16_t>(d, bytes, pattern);
      case 4: return fillWith<uint32_t>(d, bytes, pattern);
      default: return fillWith<uint64_t>(d, bytes, pattern);
    }
  }

  std::shared_ptr<const KernelModule> loadModule(const KernelImage& image) override {
    KILN_ASSERT(image.format == KernelImage::Format::hostFunction && image.hostFn,
                "the cpu runs host functions, not kernel {} in another format", image.name);
    return std::make_shared<const CpuKernel>(image);
  }

  void launch(const KernelModule& kernel, std::span<const DevicePtr> buffers, std::span<const int64_t> args,
              const LaunchShape& shape, StreamHandle) override {
    KILN_ASSERT(kernel.device().isCpu(), "cpu launch of kernel {} loaded on {}", kernel.name(), kernel.device().str());
    const CpuKernelFn fn = static_cast<const CpuKernel&>(kernel).fn;
    void* local[16];
    std::vector<void*> heap;
    void** ptrs = local;
    if (buffers.size() > std::size(local)) {
      heap.resize(buffers.size());
      ptrs = heap.data();
    }
    for (size_t i = 0; i < buffers.size(); ++i) ptrs[i] = hostAddress(buffers[i]);
    const int64_t* a = args.data();
    ThreadPool::instance().parallelFor(shape.numel, shape.grain,
                                       [&](int64_t begin, int64_t end) { fn(ptrs, a, begin, end); });
  }

  StreamHandle createStream() override { return {new CpuStream()}; }
  void destroyStream(StreamHandle stream) override { delete static_cast<CpuStream*>(stream.native); }
  bool queryStream(StreamHandle) override { return true; }
  void synchronizeStream(StreamHandle) override {}

  EventHandle createEvent(bool timing) override { return {new CpuEvent{timing, {}}}; }
  void destroyEvent(EventHandle event) override { delete static_cast<CpuEvent*>(event.native); }
  void recordEvent(EventHandle event, StreamHandle) override {
    static_cast<CpuEvent*>(event.native)->at = std::chrono::steady_clock::now();
  }
  void waitEvent(StreamHandle, EventHandle) override {}
  bool queryEvent(EventHandle) override { return true; }
  void synchronizeEvent(EventHandle) override {}
  double elapsedMs(EventHandle start, EventHandle end) override {
    const auto* a = static_cast<const CpuEvent*>(start.native);
    const auto* b = static_cast<const CpuEvent*>(end.native);
    KILN_ASSERT(a->timing && b->timing, "elapsed time of events made without timing");
    return std::chrono::duration<double, std::milli>(b->at - a->at).count();
  }
  void synchronize() override {}

 private:
  DeviceProperties props_;
};

}  // namespace

void registerCpuDriver() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerDeviceDriver(
        DeviceDriver{DeviceType::cpu, "cpu", [] { return 1; }, nullptr,
                     [](int) -> std::unique_ptr<DeviceInterface> { return std::make_unique<CpuDevice>(); }});
  });
}

CpuKernelFn hostKernelFn(const KernelModule& kernel) {
  const auto* cpu = dynamic_cast<const CpuKernel*>(&kernel);
  KILN_ASSERT(cpu && cpu->fn, "kernel {} on {} is not a CPU kernel", kernel.name(), kernel.device().str());
  return cpu->fn;
}

}  // namespace kiln::runtime

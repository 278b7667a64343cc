// The simulated device of simulated_device.h: a runtime driver and a codegen
// target, registered as `cuda`.
#include "unit/device/simulated_device.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "codegen/cpu_compiler.h"
#include "codegen/target.h"
#include "runtime/blas.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/executable.h"
#include "runtime/indexing.h"
#include "runtime/thread_pool.h"

namespace kiln::testing {

namespace {

using runtime::DevicePtr;
using runtime::EventHandle;
using runtime::StreamHandle;

/// Fresh memory holds this byte (all-ones: NaN in every float dtype), so
/// reading memory no operation has written yet is seen, not guessed.
constexpr unsigned char kPoison = 0xff;

class SimKernel final : public runtime::KernelModule {
 public:
  explicit SimKernel(const runtime::KernelImage& image)
      : KernelModule(Device::cuda(0), image.name), fn(image.hostFn), keepAlive(image.keepAlive) {}
  runtime::CpuKernelFn fn;
  std::shared_ptr<const void> keepAlive;
};

class SimDevice final : public runtime::DeviceInterface {
 public:
  SimDevice() {
    props_.name = "simulated device";
    props_.driverVersion = "test";
    props_.arch = "simulated";
    props_.computeUnits = 1;
  }

  Device device() const override { return Device::cuda(0); }
  const runtime::DeviceProperties& properties() const override { return props_; }

  // --- memory: tokens for handles, a free list reused in stream order ---
  runtime::DevicePtr allocate(size_t bytes, runtime::StreamHandle) override {
    std::lock_guard lock(mutex_);
    const size_t size = std::max<size_t>(bytes, 1);
    uintptr_t token = 0;
    if (auto it = free_.lower_bound(size); it != free_.end() && it->first == size) {
      token = it->second;
      free_.erase(it);
    } else {
      token = next_;
      next_ += 0x1000;
      auto* memory = static_cast<unsigned char*>(std::aligned_alloc(64, (size + 63) / 64 * 64));
      KILN_CHECK(memory, "simulated device: out of memory");
      std::memset(memory, kPoison, size);
      blocks_.emplace(token, Block{memory, size});
      stats_.reservedBytes += static_cast<int64_t>(size);
    }
    stats_.allocatedBytes += static_cast<int64_t>(size);
    stats_.peakAllocatedBytes = std::max(stats_.peakAllocatedBytes, stats_.allocatedBytes);
    stats_.numAllocations++;
    return {reinterpret_cast<void*>(token), 0};
  }
  void free(runtime::DevicePtr ptr) override {
    std::lock_guard lock(mutex_);
    const auto token = reinterpret_cast<uintptr_t>(ptr.handle);
    const Block& b = blocks_.at(token);
    stats_.allocatedBytes -= static_cast<int64_t>(b.size);
    free_.emplace(b.size, token);
  }
  // Every stream of the simulated device reuses freed blocks in its own
  // order; the tests of recordStream are the real drivers'.
  void recordStream(runtime::DevicePtr, runtime::StreamHandle) override {}
  runtime::AllocatorStats memoryStats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  void resetPeakMemoryStats() override {
    std::lock_guard lock(mutex_);
    stats_.peakAllocatedBytes = stats_.allocatedBytes;
  }
  void emptyCache() override {}
  std::string memorySummary() const override { return "simulated device"; }

  /// The host memory behind `p`, checked against its block's size.
  unsigned char* resolve(DevicePtr p, size_t bytes) {
    std::lock_guard lock(mutex_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(p.handle));
    KILN_ASSERT(it != blocks_.end(), "simulated device: {} is not one of its handles", p.handle);
    KILN_ASSERT(p.offset + bytes <= it->second.size, "simulated device: {} bytes at offset {} of a block of {}", bytes,
                p.offset, it->second.size);
    return it->second.memory + p.offset;
  }

  // --- copies and fills: queued ---
  void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes, StreamHandle s) override {
    unsigned char* d = resolve(dst, bytes);
    std::vector<unsigned char> staged(static_cast<const unsigned char*>(src),
                                      static_cast<const unsigned char*>(src) + bytes);
    enqueue(s, [d, staged = std::move(staged)] { std::memcpy(d, staged.data(), staged.size()); });
    count(&SimulatedDeviceCounters::hostToDevice);
  }
  void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes, StreamHandle s) override {
    const unsigned char* from = resolve(src, bytes);
    drain(stream(s), -1);  // a host read waits for its stream
    std::memcpy(dst, from, bytes);
    count(&SimulatedDeviceCounters::deviceToHost);
  }
  // Asynchronous copies read or write the host memory only when the stream
  // runs, as a DMA engine would.
  void copyHostToDeviceAsync(DevicePtr dst, const void* src, size_t bytes, StreamHandle s) override {
    unsigned char* d = resolve(dst, bytes);
    enqueue(s, [d, src, bytes] { std::memcpy(d, src, bytes); });
    count(&SimulatedDeviceCounters::hostToDevice);
  }
  void copyDeviceToHostAsync(void* dst, DevicePtr src, size_t bytes, StreamHandle s) override {
    const unsigned char* from = resolve(src, bytes);
    enqueue(s, [dst, from, bytes] { std::memcpy(dst, from, bytes); });
    count(&SimulatedDeviceCounters::deviceToHost);
  }
  void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle s) override {
    unsigned char* d = resolve(dst, bytes);
    const unsigned char* from = resolve(src, bytes);
    enqueue(s, [d, from, bytes] { std::memmove(d, from, bytes); });
    count(&SimulatedDeviceCounters::deviceToDevice);
  }
  void fill(DevicePtr dst, size_t bytes, const void* pattern, size_t patternBytes, StreamHandle s) override {
    unsigned char* d = resolve(dst, bytes);
    std::vector<unsigned char> p(static_cast<const unsigned char*>(pattern),
                                 static_cast<const unsigned char*>(pattern) + patternBytes);
    enqueue(s, [d, bytes, p = std::move(p)] {
      for (size_t i = 0; i < bytes; i += p.size()) std::memcpy(d + i, p.data(), p.size());
    });
  }

  // --- kernels: run on the host, over resolved memory, when their turn comes ---
  std::shared_ptr<const runtime::KernelModule> loadModule(const runtime::KernelImage& image) override {
    KILN_ASSERT(image.format == runtime::KernelImage::Format::hostFunction, "simulated device: kernel format");
    return std::make_shared<const SimKernel>(image);
  }
  void launch(const runtime::KernelModule& kernel, std::span<const DevicePtr> buffers, std::span<const int64_t> args,
              const runtime::LaunchShape& shape, StreamHandle s) override {
    KILN_ASSERT(kernel.device() == Device::cuda(0), "simulated device: a kernel loaded on {}", kernel.device().str());
    std::vector<void*> ptrs;
    for (const DevicePtr& p : buffers) ptrs.push_back(resolve(p, 0));
    std::vector<int64_t> a(args.begin(), args.end());
    const runtime::CpuKernelFn fn = static_cast<const SimKernel&>(kernel).fn;
    enqueue(s, [fn, ptrs = std::move(ptrs), a = std::move(a), shape] {
      runtime::ThreadPool::instance().parallelFor(
          shape.numel, shape.grain, [&](int64_t begin, int64_t end) { fn(ptrs.data(), a.data(), begin, end); });
    });
    count(&SimulatedDeviceCounters::launches);
  }
  /// A library call of CPU function `fn`, queued like a kernel.
  void call(runtime::CpuLibraryFn fn, const runtime::LibraryCall& c) {
    std::vector<void*> ptrs;
    for (const DevicePtr& p : c.buffers) ptrs.push_back(resolve(p, 0));
    std::vector<int64_t> a(c.args.begin(), c.args.end());
    enqueue(c.stream, [fn, ptrs = std::move(ptrs), a = std::move(a)] { fn(ptrs, a); });
    count(&SimulatedDeviceCounters::libraryCalls);
  }

  // --- streams and events ---
  StreamHandle createStream() override { return {new Queue()}; }
  void destroyStream(StreamHandle s) override {
    drain(stream(s), -1);
    delete static_cast<Queue*>(s.native);
  }
  bool queryStream(StreamHandle s) override {
    std::lock_guard lock(mutex_);
    return stream(s).ops.empty();
  }
  void synchronizeStream(StreamHandle s) override { drain(stream(s), -1); }
  EventHandle createEvent(bool timing) override { return {new Event{nullptr, 0, timing, {}}}; }
  void destroyEvent(EventHandle e) override { delete static_cast<Event*>(e.native); }
  void recordEvent(EventHandle e, StreamHandle s) override {
    auto* event = static_cast<Event*>(e.native);
    Queue& q = stream(s);
    event->queue = &q;
    enqueue(s, [event] { event->at = std::chrono::steady_clock::now(); });
    std::lock_guard lock(mutex_);
    event->position = q.enqueued;
  }
  void waitEvent(StreamHandle s, EventHandle e) override {
    const auto* event = static_cast<const Event*>(e.native);
    Queue* q = event->queue;
    const int64_t position = event->position;
    enqueue(s, [this, q, position] { drain(*q, position); });
  }
  bool queryEvent(EventHandle e) override {
    const auto* event = static_cast<const Event*>(e.native);
    std::lock_guard lock(mutex_);
    return !event->queue || event->queue->done >= event->position;
  }
  void synchronizeEvent(EventHandle e) override {
    const auto* event = static_cast<const Event*>(e.native);
    if (event->queue) drain(*event->queue, event->position);
  }
  double elapsedMs(EventHandle start, EventHandle end) override {
    const auto* a = static_cast<const Event*>(start.native);
    const auto* b = static_cast<const Event*>(end.native);
    return std::chrono::duration<double, std::milli>(b->at - a->at).count();
  }
  void synchronize() override {
    drain(default_, -1);
    std::vector<Queue*> others;
    {
      std::lock_guard lock(mutex_);
      others = created_;
    }
    for (Queue* q : others) drain(*q, -1);
  }

  SimulatedDeviceCounters counters() {
    std::lock_guard lock(mutex_);
    SimulatedDeviceCounters c = counters_;
    c.pending = static_cast<int64_t>(default_.ops.size());
    for (Queue* q : created_) c.pending += static_cast<int64_t>(q->ops.size());
    return c;
  }

 private:
  struct Block {
    unsigned char* memory;
    size_t size;
  };
  struct Queue {
    std::deque<std::function<void()>> ops;
    int64_t enqueued = 0;  ///< operations ever queued
    int64_t done = 0;      ///< of them, those run
  };
  struct Event {
    Queue* queue;
    int64_t position;  ///< done >= position: complete
    bool timing;
    std::chrono::steady_clock::time_point at;
  };

  Queue& stream(StreamHandle s) {
    if (!s.native) return default_;
    std::lock_guard lock(mutex_);
    auto* q = static_cast<Queue*>(s.native);
    if (std::find(created_.begin(), created_.end(), q) == created_.end()) created_.push_back(q);
    return *q;
  }
  void enqueue(StreamHandle s, std::function<void()> op) {
    Queue& q = stream(s);
    std::lock_guard lock(mutex_);
    q.ops.push_back(std::move(op));
    q.enqueued++;
  }
  /// Runs `q`'s operations in order until `position` are done (-1: all).
  void drain(Queue& q, int64_t position) {
    for (;;) {
      std::function<void()> op;
      {
        std::lock_guard lock(mutex_);
        if (q.ops.empty() || (position >= 0 && q.done >= position)) return;
        op = std::move(q.ops.front());
        q.ops.pop_front();
      }
      op();
      std::lock_guard lock(mutex_);
      q.done++;
    }
  }
  void count(int64_t SimulatedDeviceCounters::*field) {
    std::lock_guard lock(mutex_);
    ++(counters_.*field);
  }

  mutable std::recursive_mutex mutex_;
  runtime::DeviceProperties props_;
  std::map<uintptr_t, Block> blocks_;
  std::multimap<size_t, uintptr_t> free_;
  uintptr_t next_ = 0x1000;
  runtime::AllocatorStats stats_;
  Queue default_;
  std::vector<Queue*> created_;
  SimulatedDeviceCounters counters_;
};

SimDevice* gDevice = nullptr;

template <runtime::CpuLibraryFn F>
void simulatedCall(const runtime::LibraryCall& c) {
  gDevice->call(F, c);
}

/// Codegen for the simulated device: the CPU's kernels, loaded on it.
class SimTarget final : public codegen::Target {
 public:
  std::string_view name() const override { return "simulated"; }
  std::string description(Device d) const override { return "simulated " + codegen::cpuTarget().description(d); }
  bool supports(const ir::Node& node, std::string* why) const override {
    return codegen::cpuTarget().supports(node, why);
  }
  codegen::CompiledKernel compile(const codegen::Kernel& kernel, Device device) const override {
    codegen::CompiledCpuKernel cpu = codegen::compileCpuKernel(kernel);
    codegen::CompiledKernel out;
    out.module = runtime::deviceInterface(device).loadModule(
        runtime::KernelImage::hostFunction(kernel.name, cpu.fn, std::move(cpu.keepAlive)));
    return out;
  }
  runtime::LaunchShape launchShape(const codegen::Kernel& kernel, const codegen::LaunchArgs& launch) const override {
    return codegen::cpuTarget().launchShape(kernel, launch);
  }
  const codegen::LibraryFunctions& libraries() const override {
    static const codegen::LibraryFunctions sim{{&simulatedCall<&runtime::matmul>},
                                               {&simulatedCall<&runtime::indexSelect>},
                                               {&simulatedCall<&runtime::indexAdd>},
                                               {},
                                               {}};
    return sim;
  }
};

}  // namespace

Device simulatedDevice() {
  static const bool registered = [] {
    // The built-in drivers register first, so that this one replaces CUDA's.
    (void)runtime::deviceCount(DeviceType::cuda);
    runtime::registerDeviceDriver(runtime::DeviceDriver{DeviceType::cuda, "simulated", [] { return 1; }, nullptr,
                                                        [](int) -> std::unique_ptr<runtime::DeviceInterface> {
                                                          auto d = std::make_unique<SimDevice>();
                                                          gDevice = d.get();
                                                          return d;
                                                        }});
    static const SimTarget target;
    codegen::registerTarget(DeviceType::cuda, &target);
    return true;
  }();
  (void)registered;
  runtime::deviceInterface(Device::cuda(0));  // opens it
  return Device::cuda(0);
}

SimulatedDeviceCounters simulatedCounters() {
  simulatedDevice();
  return gDevice->counters();
}

}  // namespace kiln::testing

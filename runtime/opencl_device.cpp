// The OpenCL driver of the device interface (runtime/device_interface.h):
// one device per OpenCL device of any platform (runtime/opencl_runtime.h),
// streams as in-order command queues, events as markers, memory as cl_mem
// buffers from the device's caching allocator, kernels as programs built
// from the OpenCL C codegen renders (or their binaries from kiln's disk
// cache). PoCL's CPU device runs it in CI.
#include <fmt/format.h>

#include <mutex>

#include "runtime/caching_allocator.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/opencl_runtime.h"

#if KILN_HAVE_OPENCL
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "runtime/log.h"
#include "runtime/opencl_context.h"
#include "runtime/opencl_recording.h"
#endif

namespace kiln::runtime {

#if KILN_HAVE_OPENCL
namespace opencl {
namespace {

/// A program's kernel on one device, with what a launch needs to build its
/// args struct (Note [The GPU launch ABI]). clSetKernelArg is not safe on
/// one cl_kernel from two threads, so launches of it take `mutex`.
class OpenCLKernel final : public KernelModule {
 public:
  OpenCLKernel(Device device, const KernelImage& image) : KernelModule(device, image.name) {
    paramElementBytes = image.paramElementBytes;
    offsetsInArgs = image.offsetsInArgs;
  }
  ~OpenCLKernel() override {
    if (kernel) clReleaseKernel(kernel);
    if (program) clReleaseProgram(program);
  }
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  std::vector<uint32_t> paramElementBytes;
  bool offsetsInArgs = false;
  mutable std::mutex mutex;
};

/// An event: the marker enqueued at its last record (null before).
struct OpenCLEvent {
  bool timing = false;
  cl_event marker = nullptr;
};

/// Frees a staging copy of host data once the write that reads it is done.
void CL_CALLBACK freeStaging(cl_event, cl_int, void* data) { std::free(data); }

// Host data up to this size is copied to a staging block and written
// without blocking (the caller's memory is read before the call returns, as
// the interface promises); larger copies block.
constexpr size_t kStagedCopy = 1 << 20;

/// The segments and events the caching allocator asks of an OpenCL device.
class OpenCLSegments final : public SegmentSource {
 public:
  OpenCLSegments(int index, int64_t deviceMemory) : index_(index), deviceMemory_(deviceMemory) {}
  void* allocateSegment(size_t bytes) override {
    // Some platforms (PoCL) allocate lazily and never refuse here: the
    // device's memory size (lowered by POCL_MEMORY_LIMIT) is the limit.
    if (deviceMemory_ > 0 && reserved_ + static_cast<int64_t>(bytes) > deviceMemory_) return nullptr;
    cl_int status = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(context(index_), CL_MEM_READ_WRITE, bytes, nullptr, &status);
    if (status != CL_SUCCESS || !mem) return nullptr;
    reserved_ += static_cast<int64_t>(bytes);
    sizes_[mem] = bytes;
    return mem;
  }
  void freeSegment(void* handle) override {
    auto mem = static_cast<cl_mem>(handle);
    reserved_ -= static_cast<int64_t>(sizes_.at(mem));
    sizes_.erase(mem);
    clReleaseMemObject(mem);  // OpenCL keeps it until the commands enqueued on it have run
  }
  EventHandle createEvent() override { return {new OpenCLEvent{false, nullptr}}; }
  void destroyEvent(EventHandle event) override;
  void recordEvent(EventHandle event, StreamHandle stream) override;
  bool queryEvent(EventHandle event) override;
  void synchronize() override;
  DeviceInterface* device = nullptr;

 private:
  int index_;
  int64_t deviceMemory_;
  int64_t reserved_ = 0;  // guarded by the allocator's lock, which holds around every call
  std::map<cl_mem, size_t> sizes_;
};

class OpenCLDevice final : public DeviceInterface {
 public:
  explicit OpenCLDevice(int index)
      : index_(index),
        device_(Device::opencl(index)),
        segments_(index, devices()[static_cast<size_t>(index)].globalMemory),
        allocator_(device_, segments_) {
    segments_.device = this;
    const DeviceInfo& info = devices()[static_cast<size_t>(index)];
    props_.name = info.name;
    props_.driverVersion = fmt::format("{} ({})", info.driverVersion, info.platformVersion);
    props_.arch = info.description();
    props_.totalMemory = info.globalMemory;
    props_.computeUnits = info.computeUnits;
    props_.maxThreadsPerBlock = static_cast<int>(info.maxWorkGroupSize);
    props_.sharedMemoryPerBlock = static_cast<size_t>(info.localMemory);
    props_.fp64 = info.fp64;
    props_.fp16 = true;  // f16 is stored as 16 bits and converted in the kernel (codegen/c_renderer.h)
    props_.hostAccessible = false;
    defaultQueue_ = makeQueue();
  }

  Device device() const override { return device_; }
  const DeviceProperties& properties() const override { return props_; }

  // --- memory: the caching allocator over cl_mem segments ---
  DevicePtr allocate(size_t bytes, StreamHandle stream) override { return allocator_.allocate(bytes, stream); }
  void free(DevicePtr ptr) override { allocator_.free(ptr); }
  void recordStream(DevicePtr ptr, StreamHandle stream) override { allocator_.recordStream(ptr, stream); }
  AllocatorStats memoryStats() const override { return summarizeStats(allocator_.stats()); }
  MemoryStats keyedMemoryStats() const override { return allocator_.stats(); }
  void resetPeakMemoryStats() override { allocator_.resetPeakStats(); }
  void emptyCache() override { allocator_.emptyCache(); }
  std::string memorySummary() const override {
    return fmt::format("{} ({}), {} bytes of device memory\n{}", device_.str(), props_.name, props_.totalMemory,
                       allocator_.summary());
  }

  // --- copies ---
  void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    refuseWhileRecording(stream, "a host-to-device copy");
    cl_command_queue queue = queue_(stream);
    if (bytes <= kStagedCopy) {
      void* staging = std::malloc(bytes);
      KILN_CHECK(staging, "{}: out of host memory staging a copy of {} bytes", device_.str(), bytes);
      std::memcpy(staging, src, bytes);
      cl_event done = nullptr;
      const cl_int status =
          clEnqueueWriteBuffer(queue, memOf(dst), CL_FALSE, dst.offset, bytes, staging, 0, nullptr, &done);
      if (status != CL_SUCCESS) {
        std::free(staging);
        KILN_CL(status);
      }
      KILN_CL(clSetEventCallback(done, CL_COMPLETE, &freeStaging, staging));
      clReleaseEvent(done);
      return;
    }
    KILN_CL(clEnqueueWriteBuffer(queue, memOf(dst), CL_TRUE, dst.offset, bytes, src, 0, nullptr, nullptr));
  }
  void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    refuseWhileRecording(stream, "a device-to-host copy");
    KILN_CL(clEnqueueReadBuffer(queue_(stream), memOf(src), CL_TRUE, src.offset, bytes, dst, 0, nullptr, nullptr));
  }
  void copyHostToDeviceAsync(DevicePtr dst, const void* src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    refuseWhileRecording(stream, "a host-to-device copy");
    KILN_CL(clEnqueueWriteBuffer(queue_(stream), memOf(dst), CL_FALSE, dst.offset, bytes, src, 0, nullptr, nullptr));
    clFlush(queue_(stream));
  }
  void copyDeviceToHostAsync(void* dst, DevicePtr src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    refuseWhileRecording(stream, "a device-to-host copy");
    KILN_CL(clEnqueueReadBuffer(queue_(stream), memOf(src), CL_FALSE, src.offset, bytes, dst, 0, nullptr, nullptr));
    clFlush(queue_(stream));
  }
  void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    if (Recorder* recorder = recorderOf(stream)) {
      recorder->addCopy(memOf(src), src.offset, memOf(dst), dst.offset, bytes);
      return;
    }
    KILN_CL(clEnqueueCopyBuffer(queue_(stream), memOf(src), memOf(dst), src.offset, dst.offset, bytes, 0, nullptr,
                                nullptr));
  }
  void fill(DevicePtr dst, size_t bytes, const void* pattern, size_t patternBytes, StreamHandle stream) override {
    KILN_ASSERT(patternBytes == 1 || patternBytes == 2 || patternBytes == 4 || patternBytes == 8,
                "fill with a pattern of {} bytes", patternBytes);
    KILN_ASSERT(bytes % patternBytes == 0 && dst.offset % patternBytes == 0,
                "fill of {} bytes at {} with a pattern of {}", bytes, dst.offset, patternBytes);
    if (!bytes) return;
    refuseWhileRecording(stream, "a fill");
    KILN_CL(
        clEnqueueFillBuffer(queue_(stream), memOf(dst), pattern, patternBytes, dst.offset, bytes, 0, nullptr, nullptr));
  }

  // --- kernels ---
  std::shared_ptr<const KernelModule> loadModule(const KernelImage& image) override {
    auto module = std::make_shared<OpenCLKernel>(device_, image);
    cl_device_id id = deviceId(index_);
    cl_int status = CL_SUCCESS;
    if (image.format == KernelImage::Format::openclBinary) {
      const unsigned char* data = image.bytes.data();
      const size_t size = image.bytes.size();
      cl_int binaryStatus = CL_SUCCESS;
      module->program = clCreateProgramWithBinary(context(index_), 1, &id, &size, &data, &binaryStatus, &status);
      KILN_CHECK(status == CL_SUCCESS && binaryStatus == CL_SUCCESS,
                 "{}: kernel {}: the program binary does not load ({}, {})", device_.str(), image.name,
                 errorName(status), errorName(binaryStatus));
    } else {
      KILN_ASSERT(image.format == KernelImage::Format::openclSource, "{} runs OpenCL programs, not kernel {}",
                  device_.str(), image.name);
      const char* text = reinterpret_cast<const char*>(image.bytes.data());
      const size_t length = image.bytes.size();
      module->program = clCreateProgramWithSource(context(index_), 1, &text, &length, &status);
      KILN_CL(status);
    }
    status = clBuildProgram(module->program, 1, &id, kBuildOptions, nullptr, nullptr);
    KILN_CHECK(status == CL_SUCCESS, "{}: kernel {}: clBuildProgram failed: {}", device_.str(), image.name,
               errorName(status));
    module->kernel = clCreateKernel(module->program, image.name.c_str(), &status);
    KILN_CHECK(status == CL_SUCCESS, "{}: the program has no kernel {} ({})", device_.str(), image.name,
               errorName(status));
    return module;
  }

  void launch(const KernelModule& kernel, std::span<const DevicePtr> buffers, std::span<const int64_t> args,
              const LaunchShape& shape, StreamHandle stream) override {
    KILN_ASSERT(kernel.device() == device_, "{} launch of kernel {} loaded on {}", device_.str(), kernel.name(),
                kernel.device().str());
    const auto& k = static_cast<const OpenCLKernel&>(kernel);
    KILN_ASSERT(buffers.size() == k.paramElementBytes.size(), "kernel {}: {} buffers for {} parameters", k.name(),
                buffers.size(), k.paramElementBytes.size());
    const size_t local = static_cast<size_t>(shape.block[0]);
    const size_t global = static_cast<size_t>(shape.grid[0]) * local;
    if (global == 0) return;  // OpenCL rejects an empty range
    std::vector<int64_t> words(args.begin(), args.end());
    words.push_back(shape.numel);
    if (k.offsetsInArgs) {
      for (size_t i = 0; i < buffers.size(); ++i) {
        const size_t size = std::max<uint32_t>(k.paramElementBytes[i], 1);
        KILN_ASSERT(buffers[i].offset % size == 0, "kernel {}: buffer {} at byte {}, not a whole element of {} bytes",
                    k.name(), i, buffers[i].offset, size);
        words.push_back(static_cast<int64_t>(buffers[i].offset / size));
      }
    } else {
      for (const DevicePtr& b : buffers)
        KILN_ASSERT(b.offset == 0, "kernel {}: OpenCL buffers are offset in the kernel", k.name());
    }
    auto setArgs = [&](cl_kernel target) {
      for (size_t i = 0; i < buffers.size(); ++i) {
        cl_mem mem = memOf(buffers[i]);
        KILN_CL(clSetKernelArg(target, static_cast<cl_uint>(i), sizeof(cl_mem), &mem));
      }
      KILN_CL(
          clSetKernelArg(target, static_cast<cl_uint>(buffers.size()), words.size() * sizeof(int64_t), words.data()));
    };
    if (Recorder* recorder = recorderOf(stream)) {
      // A kernel of its own per recorded launch (Note [Command buffers on PoCL]).
      cl_int status = CL_SUCCESS;
      cl_kernel clone = nullptr;
      {
        std::lock_guard lock(k.mutex);
        clone = clCloneKernel(k.kernel, &status);
      }
      KILN_CL(status);
      try {
        setArgs(clone);
      } catch (...) {
        clReleaseKernel(clone);
        throw;
      }
      recorder->addKernel(clone, global, local);
      return;
    }
    std::lock_guard lock(k.mutex);
    setArgs(k.kernel);
    KILN_CL(clEnqueueNDRangeKernel(queue_(stream), k.kernel, 1, nullptr, &global, &local, 0, nullptr, nullptr));
  }

  // --- streams and events ---
  StreamHandle createStream() override { return {makeQueue()}; }
  void destroyStream(StreamHandle stream) override {
    auto queue = static_cast<cl_command_queue>(stream.native);
    {
      std::lock_guard lock(queueMutex_);
      queues_.erase(queue);
    }
    clReleaseCommandQueue(queue);  // its commands still run
  }
  // OpenCL cannot ask a queue whether it is idle, so the query enqueues a
  // marker behind its work and watches it. The marker is a command of its
  // own, which an idle queue completes within microseconds but not at
  // once: it is polled for up to a millisecond before the answer is "not yet".
  bool queryStream(StreamHandle stream) override {
    cl_event marker = nullptr;
    KILN_CL(clEnqueueMarkerWithWaitList(queue_(stream), 0, nullptr, &marker));
    clFlush(queue_(stream));
    bool done = complete(marker);
    for (auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
         !done && std::chrono::steady_clock::now() < until;) {
      std::this_thread::yield();
      done = complete(marker);
    }
    clReleaseEvent(marker);
    return done;
  }
  void synchronizeStream(StreamHandle stream) override { KILN_CL(clFinish(queue_(stream))); }

  EventHandle createEvent(bool timing) override { return {new OpenCLEvent{timing, nullptr}}; }
  void destroyEvent(EventHandle event) override {
    auto* e = static_cast<OpenCLEvent*>(event.native);
    if (e->marker) clReleaseEvent(e->marker);
    delete e;
  }
  void recordEvent(EventHandle event, StreamHandle stream) override {
    refuseWhileRecording(stream, "an event");
    auto* e = static_cast<OpenCLEvent*>(event.native);
    cl_event marker = nullptr;
    KILN_CL(clEnqueueMarkerWithWaitList(queue_(stream), 0, nullptr, &marker));
    clFlush(queue_(stream));
    if (e->marker) clReleaseEvent(e->marker);
    e->marker = marker;
  }
  void waitEvent(StreamHandle stream, EventHandle event) override {
    auto* e = static_cast<OpenCLEvent*>(event.native);
    if (!e->marker) return;  // never recorded: complete
    KILN_CL(clEnqueueBarrierWithWaitList(queue_(stream), 1, &e->marker, nullptr));
  }
  bool queryEvent(EventHandle event) override {
    auto* e = static_cast<OpenCLEvent*>(event.native);
    return !e->marker || complete(e->marker);
  }
  void synchronizeEvent(EventHandle event) override {
    auto* e = static_cast<OpenCLEvent*>(event.native);
    if (e->marker) KILN_CL(clWaitForEvents(1, &e->marker));
  }
  double elapsedMs(EventHandle start, EventHandle end) override {
    auto* a = static_cast<OpenCLEvent*>(start.native);
    auto* b = static_cast<OpenCLEvent*>(end.native);
    KILN_CHECK(a->timing && b->timing, "{}: elapsed time of events made without timing", device_.str());
    KILN_CHECK(a->marker && b->marker, "{}: elapsed time of an event never recorded", device_.str());
    KILN_CHECK(complete(a->marker) && complete(b->marker), "{}: elapsed time of events not yet complete",
               device_.str());
    cl_ulong t0 = 0, t1 = 0;
    KILN_CL(clGetEventProfilingInfo(a->marker, CL_PROFILING_COMMAND_END, sizeof t0, &t0, nullptr));
    KILN_CL(clGetEventProfilingInfo(b->marker, CL_PROFILING_COMMAND_END, sizeof t1, &t1, nullptr));
    return (static_cast<double>(t1) - static_cast<double>(t0)) / 1e6;
  }
  void synchronize() override {
    std::vector<cl_command_queue> all;
    {
      std::lock_guard lock(queueMutex_);
      all.assign(queues_.begin(), queues_.end());
      for (cl_command_queue q : all) clRetainCommandQueue(q);
    }
    for (cl_command_queue q : all) {
      const cl_int status = clFinish(q);
      clReleaseCommandQueue(q);
      KILN_CL(status);
    }
  }

  // --- recording (Note [Recorded work]) ---
  bool canRecord(std::string* why) const override { return opencl::canRecord(index_, why); }
  void beginRecording(StreamHandle stream) override {
    std::lock_guard lock(recordMutex_);
    auto [it, fresh] = recorders_.try_emplace(queue_(stream));
    KILN_ASSERT(fresh, "{}: a stream is recorded twice at once", device_.str());
    try {
      it->second = std::make_unique<Recorder>(index_, queue_(stream));
    } catch (...) {
      recorders_.erase(it);
      throw;
    }
    recording_.fetch_add(1);
  }
  std::unique_ptr<RecordedWork> endRecording(StreamHandle stream) override {
    std::unique_ptr<Recorder> recorder;
    {
      std::lock_guard lock(recordMutex_);
      auto it = recorders_.find(queue_(stream));
      KILN_ASSERT(it != recorders_.end(), "{}: end of a recording never begun", device_.str());
      recorder = std::move(it->second);
      recorders_.erase(it);
      recording_.fetch_sub(1);
    }
    return recorder->finish();
  }

  cl_command_queue queueFor(StreamHandle stream) const { return queue_(stream); }

 private:
  /// The recording in progress on `stream`'s queue, or null (the common
  /// case, answered without a lock).
  Recorder* recorderOf(StreamHandle stream) {
    if (recording_.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard lock(recordMutex_);
    auto it = recorders_.find(queue_(stream));
    return it == recorders_.end() ? nullptr : it->second.get();
  }
  /// Work that cannot be recorded must not reach a recording stream.
  void refuseWhileRecording(StreamHandle stream, const char* what) {
    KILN_ASSERT(!recorderOf(stream), "{}: {} enqueued on a stream being recorded", device_.str(), what);
  }
  cl_command_queue queue_(StreamHandle stream) const {
    return stream.native ? static_cast<cl_command_queue>(stream.native) : defaultQueue_;
  }
  cl_command_queue makeQueue() {
    cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
    cl_int status = CL_SUCCESS;
    cl_command_queue queue = clCreateCommandQueueWithProperties(context(index_), deviceId(index_), props, &status);
    KILN_CHECK(status == CL_SUCCESS, "{}: cannot create a command queue: {}", device_.str(), errorName(status));
    std::lock_guard lock(queueMutex_);
    queues_.insert(queue);
    return queue;
  }
  static bool complete(cl_event event) {
    cl_int state = CL_QUEUED;
    KILN_CL(clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, nullptr));
    KILN_CHECK(state >= 0, "opencl: a command failed on the device ({})", errorName(state));
    return state == CL_COMPLETE;
  }

  int index_;
  Device device_;
  DeviceProperties props_;
  cl_command_queue defaultQueue_ = nullptr;
  mutable std::mutex queueMutex_;
  std::set<cl_command_queue> queues_;
  std::mutex recordMutex_;
  std::map<cl_command_queue, std::unique_ptr<Recorder>> recorders_;
  std::atomic<int> recording_{0};
  OpenCLSegments segments_;
  CachingAllocator allocator_;
};

void OpenCLSegments::destroyEvent(EventHandle event) { device->destroyEvent(event); }
void OpenCLSegments::recordEvent(EventHandle event, StreamHandle stream) { device->recordEvent(event, stream); }
bool OpenCLSegments::queryEvent(EventHandle event) { return device->queryEvent(event); }
void OpenCLSegments::synchronize() { device->synchronize(); }

}  // namespace

cl_command_queue queueOf(int index, StreamHandle stream) {
  return static_cast<OpenCLDevice&>(deviceInterface(Device::opencl(index))).queueFor(stream);
}

}  // namespace opencl
#endif  // KILN_HAVE_OPENCL

void registerOpenCLDriver() {
  static std::once_flag once;
  std::call_once(once, [] {
    DeviceDriver driver{DeviceType::opencl, "opencl", nullptr, nullptr, nullptr};
    driver.count = [] { return static_cast<int>(opencl::devices().size()); };
    driver.available = [](std::string* why) { return opencl::available(why); };
#if KILN_HAVE_OPENCL
    driver.open = [](int index) -> std::unique_ptr<DeviceInterface> {
      return std::make_unique<opencl::OpenCLDevice>(index);
    };
#else
    driver.open = [](int) -> std::unique_ptr<DeviceInterface> { return nullptr; };
#endif
    registerDeviceDriver(driver);
  });
}

}  // namespace kiln::runtime

// The CUDA driver of the device interface (runtime/device_interface.h): one
// device per GPU the CUDA driver sees, as cuda:N, through the driver API
// loaded at run time. Each device runs in its primary context; streams are
// non-blocking CUstreams (the default stream too), events CUevents, memory
// the caching allocator's (runtime/caching_allocator.h) over cuMemAlloc'd
// segments, kernels cubins loaded with cuModuleLoadData and launched with
// the GPU launch ABI. The CUDA target (codegen/cuda_target.cpp)
// compiles the kernels it loads.
//
// Note [The CUDA driver is loaded at run time]
// libkiln.so does not link libcuda (tests/needed_libraries.sh checks): the
// probe (runtime/cuda_driver.h) opens libcuda.so.1 with dlopen and asks
// cuInit whether it can run, and this file resolves the entry points it
// calls once, through cuGetProcAddress_v2 at pinned ABI versions
// (runtime/cuda_api.def), as PyTorch's c10/cuda/driver_api does: dlsym of a
// plain name gives a symbol's oldest ABI (cuMemAlloc's 32-bit one), and an
// unpinned request the newest, whose signature may differ from the one
// kiln was compiled against (cuCtxSynchronize takes a context from CUDA
// 13.0). <cuda.h> is only read for its types. Without a driver the kind is
// unavailable with the probe's reason (no libcuda.so.1, the toolkit's stub
// library, no GPU, a driver too old) and a CUDA tensor fails with it; kiln
// never fails to load for want of CUDA.
#include <fmt/format.h>

#include <mutex>

#include "runtime/caching_allocator.h"
#include "runtime/cuda_driver.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"

#if KILN_HAVE_CUDA
#include <algorithm>
#include <cstring>
#include <map>
#include <type_traits>
#include <vector>

#include "runtime/cuda_api.h"
#include "runtime/dynamic_library.h"
#endif

namespace kiln::runtime {

namespace cuda {
namespace {
/// Why CUDA devices cannot be used in this process, or empty.
std::string unavailableReason();
}  // namespace
}  // namespace cuda

#if KILN_HAVE_CUDA
namespace cuda {

namespace {

DriverApi* resolveApi() {
  auto* a = new DriverApi();  // leaked: kernels and buffers may be released during static destruction
  const DriverProbe& probe = driver();
  if (!probe.usable) {
    a->error = probe.reason;
    return a;
  }
  a->driverVersion = probe.driverVersion;
  const std::vector<std::string> name{probe.library};
  const DynamicLibrary library = DynamicLibrary::open(name);  // the library the probe opened: the same handle
  std::string why;
  auto getProc = reinterpret_cast<decltype(&::cuGetProcAddress)>(library.symbol("cuGetProcAddress_v2", &why));
  if (!getProc || probe.driverVersion < 12000) {
    a->error = fmt::format(
        "the CUDA driver {} is too old (CUDA {}.{}; kiln needs CUDA 12.0 or later); update the "
        "NVIDIA driver",
        probe.library, probe.driverVersion / 1000, probe.driverVersion % 1000 / 10);
    return a;
  }
  auto resolve = [&](const char* symbol, int version, bool required, auto& slot) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const CUresult r = getProc(symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (r == CUDA_SUCCESS && fn && status == CU_GET_PROC_ADDRESS_SUCCESS) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(fn);
      return;
    }
    if (required && a->error.empty())
      a->error = fmt::format(
          "the CUDA driver {} (CUDA {}.{}) has no {} of CUDA {}.{} (cuGetProcAddress: CUresult {}, "
          "status {}); update the NVIDIA driver",
          probe.library, probe.driverVersion / 1000, probe.driverVersion % 1000 / 10, symbol, version / 1000,
          version % 1000 / 10, static_cast<int>(r), static_cast<int>(status));
  };
#define KILN_CUDA_ENTRY(name, version, required) resolve(#name, version, required, a->name);
#include "runtime/cuda_api.def"
#undef KILN_CUDA_ENTRY
  // A driver of CUDA 12.0-12.7 has only the first cuEventElapsedTime (same signature).
  if (!a->cuEventElapsedTime) resolve("cuEventElapsedTime", 12000, true, a->cuEventElapsedTime);
  return a;
}

std::string unavailableReason() { return api().error; }

}  // namespace

const DriverApi& api() {
  static const DriverApi* const table = resolveApi();
  return *table;
}

std::string resultText(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  const DriverApi& a = api();
  if (a.cuGetErrorName) a.cuGetErrorName(result, &name);
  if (a.cuGetErrorString) a.cuGetErrorString(result, &text);
  if (!name) return fmt::format("CUresult {}", static_cast<int>(result));
  return text ? fmt::format("{} ({})", name, text) : std::string(name);
}

namespace {

/// A cubin's kernel on one device. The module stays loaded while it lives.
class CudaKernel final : public KernelModule {
 public:
  CudaKernel(Device device, std::string name, CUcontext context)
      : KernelModule(device, std::move(name)), context(context) {}
  ~CudaKernel() override {
    // Errors are ignored: at exit the driver may be gone already.
    if (module && api().cuCtxSetCurrent(context) == CUDA_SUCCESS) api().cuModuleUnload(module);
  }
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  /// Buffer parameters and the args struct's bytes, read from the cubin's
  /// parameter table (cuFuncGetParamInfo); -1 when the driver cannot tell.
  int64_t numBuffers = -1;
  int64_t argsBytes = -1;
};

/// Makes `context` current on the calling thread; false when the driver
/// refuses (never throws: used on paths that must not).
bool setCurrent(CUcontext context) noexcept {
  CUcontext current = nullptr;
  if (api().cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context) return true;
  return api().cuCtxSetCurrent(context) == CUDA_SUCCESS;
}

/// The segments and events the caching allocator (runtime/caching_allocator.h)
/// asks of a CUDA device: cuMemAlloc'd memory and CUevents without timing.
/// Called with the allocator's lock held.
class CudaSegments final : public SegmentSource {
 public:
  CudaSegments(CUcontext context, size_t deviceMemory) : context_(context), deviceMemory_(deviceMemory) {}
  void* allocateSegment(size_t bytes) override {
    setCurrent(context_);
    CUdeviceptr ptr = 0;
    const CUresult r = api().cuMemAlloc(&ptr, bytes);
    // A request beyond the device's memory may be refused as an invalid value.
    if (r == CUDA_ERROR_OUT_OF_MEMORY || (r == CUDA_ERROR_INVALID_VALUE && bytes > deviceMemory_)) return nullptr;
    KILN_CU(r);
    return reinterpret_cast<void*>(ptr);
  }
  // The allocator may give back a cached segment (garbage collection, a
  // retry after out of memory) while work enqueued on its stream still uses
  // it, trusting the source: the device is waited for first, since the
  // driver does not document that cuMemFree does. Never throws: after a
  // failed context there is nothing left to protect.
  void freeSegment(void* handle) override {
    if (!setCurrent(context_)) return;
    api().cuCtxSynchronize();
    api().cuMemFree(reinterpret_cast<CUdeviceptr>(handle));
  }
  EventHandle createEvent() override {
    setCurrent(context_);
    CUevent e = nullptr;
    KILN_CU(api().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    return {e};
  }
  void destroyEvent(EventHandle event) override {
    if (setCurrent(context_)) api().cuEventDestroy(static_cast<CUevent>(event.native));
  }
  void recordEvent(EventHandle event, StreamHandle stream) override;
  bool queryEvent(EventHandle event) override;
  void synchronize() override {
    setCurrent(context_);
    KILN_CU(api().cuCtxSynchronize());
  }
  DeviceInterface* device = nullptr;

 private:
  CUcontext context_;
  size_t deviceMemory_;
};

CUdevice deviceOf(int index) {
  CUdevice device = 0;
  KILN_CU(api().cuDeviceGet(&device, index));
  return device;
}
/// The device's primary context, retained for the life of the process.
CUcontext primaryContext(CUdevice device) {
  CUcontext context = nullptr;
  KILN_CU(api().cuDevicePrimaryCtxRetain(&context, device));
  return context;
}
size_t totalMemoryOf(CUdevice device) {
  size_t total = 0;
  KILN_CU(api().cuDeviceTotalMem(&total, device));
  return total;
}

/// A captured graph, instantiated (Note [Recorded work]).
class CudaGraph final : public RecordedWork {
 public:
  CudaGraph(int index, CUgraphExec exec, int commands) : index_(index), exec_(exec), commands_(commands) {}
  ~CudaGraph() override {
    makeCurrent(index_);
    api().cuGraphExecDestroy(exec_);  // a pending launch completes first (the driver defers the release)
  }
  void replay(StreamHandle stream) override {
    makeCurrent(index_);
    KILN_CU(api().cuGraphLaunch(exec_, streamOf(index_, stream)));
  }
  int commands() const override { return commands_; }

 private:
  int index_;
  CUgraphExec exec_;
  int commands_;
};

class CudaDevice final : public DeviceInterface {
 public:
  explicit CudaDevice(int index)
      : index_(index),
        device_(Device::cuda(index)),
        cuDevice_(deviceOf(index)),
        context_(primaryContext(cuDevice_)),
        segments_(context_, totalMemoryOf(cuDevice_)),
        allocator_(device_, segments_) {
    segments_.device = this;
    const DriverApi& a = api();
    makeCurrent();
    char name[256] = {};
    KILN_CU(a.cuDeviceGetName(name, sizeof name - 1, cuDevice_));
    const size_t total = totalMemoryOf(cuDevice_);
    const int major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    const int minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    props_.name = name;
    props_.driverVersion = fmt::format("CUDA {}.{}", a.driverVersion / 1000, a.driverVersion % 1000 / 10);
    props_.arch = fmt::format("sm_{}{}", major, minor);
    props_.totalMemory = static_cast<int64_t>(total);
    props_.computeUnits = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    props_.maxThreadsPerBlock = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    props_.sharedMemoryPerBlock = static_cast<size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
    props_.fp64 = true;
    props_.fp16 = true;
    props_.hostAccessible = false;
    // The default stream is a stream of kiln's own, not CUDA's legacy NULL
    // stream: non-blocking (it does not wait for other streams' work, as the
    // NULL stream would) and capturable into a CUDA graph.
    KILN_CU(a.cuStreamCreate(&defaultStream_, CU_STREAM_NON_BLOCKING));
  }

  Device device() const override { return device_; }
  const DeviceProperties& properties() const override { return props_; }

  void makeCurrent() const {
    CUcontext current = nullptr;
    if (api().cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context_) return;
    KILN_CU(api().cuCtxSetCurrent(context_));
  }
  CUstream stream(StreamHandle handle) const {
    return handle.native ? static_cast<CUstream>(handle.native) : defaultStream_;
  }

  // --- memory: the caching allocator over cuMemAlloc'd segments ---
  DevicePtr allocate(size_t bytes, StreamHandle stream) override { return allocator_.allocate(bytes, stream); }
  void free(DevicePtr ptr) override { allocator_.free(ptr); }
  void recordStream(DevicePtr ptr, StreamHandle stream) override { allocator_.recordStream(ptr, stream); }
  AllocatorStats memoryStats() const override { return summarizeStats(allocator_.stats()); }
  MemoryStats keyedMemoryStats() const override { return allocator_.stats(); }
  void resetPeakMemoryStats() override { allocator_.resetPeakStats(); }
  void emptyCache() override { allocator_.emptyCache(); }
  std::string memorySummary() const override {
    size_t freeBytes = 0, total = 0;
    if (setCurrent(context_)) api().cuMemGetInfo(&freeBytes, &total);
    return fmt::format("{} ({}, {}), {} bytes of device memory, {} free\n{}", device_.str(), props_.name, props_.arch,
                       props_.totalMemory, freeBytes, allocator_.summary());
  }

  // --- copies and fills ---
  void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    makeCurrent();
    const CUstream s = this->stream(stream);
    // From pageable memory the driver copies `src` to a staging buffer before
    // it returns, and the transfer is ordered on the stream (CUDA's "API
    // synchronization behavior"). From page-locked memory the copy is truly
    // asynchronous, so it is waited for: the interface promises that `src`
    // has been read when this returns.
    KILN_CU(api().cuMemcpyHtoDAsync(pointerOf(dst), src, bytes, s));
    if (isPageLocked(src)) KILN_CU(api().cuStreamSynchronize(s));
  }
  void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    makeCurrent();
    const CUstream s = this->stream(stream);
    KILN_CU(api().cuMemcpyDtoHAsync(dst, pointerOf(src), bytes, s));
    KILN_CU(api().cuStreamSynchronize(s));
  }
  // Copies that return at once (Note [Pinned memory] in runtime/pinned_memory.h),
  // ordered on the stream. They overlap with the host only where the driver
  // knows the host memory as page-locked; kiln's pinned blocks are not yet
  // registered with it (cuMemHostRegister, a later step), so it stages them
  // as pageable memory: a copy from the host has read it when this returns,
  // one to the host has written it — correct, not yet overlapped.
  void copyHostToDeviceAsync(DevicePtr dst, const void* src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    makeCurrent();
    KILN_CU(api().cuMemcpyHtoDAsync(pointerOf(dst), src, bytes, this->stream(stream)));
  }
  void copyDeviceToHostAsync(void* dst, DevicePtr src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    makeCurrent();
    KILN_CU(api().cuMemcpyDtoHAsync(dst, pointerOf(src), bytes, this->stream(stream)));
  }
  void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle stream) override {
    if (!bytes) return;
    makeCurrent();
    KILN_CU(api().cuMemcpyDtoDAsync(pointerOf(dst), pointerOf(src), bytes, this->stream(stream)));
  }
  void fill(DevicePtr dst, size_t bytes, const void* pattern, size_t patternBytes, StreamHandle stream) override {
    KILN_ASSERT(patternBytes == 1 || patternBytes == 2 || patternBytes == 4 || patternBytes == 8,
                "fill with a pattern of {} bytes", patternBytes);
    KILN_ASSERT(bytes % patternBytes == 0 && dst.offset % patternBytes == 0,
                "fill of {} bytes at {} with a pattern of {}", bytes, dst.offset, patternBytes);
    if (!bytes) return;
    makeCurrent();
    const CUstream s = this->stream(stream);
    const CUdeviceptr p = pointerOf(dst);
    unsigned char b[8] = {};
    std::memcpy(b, pattern, patternBytes);
    // The narrowest memset that repeats the pattern: all bytes equal -> D8;
    // a 4-byte period -> D32; an 8-byte pattern with two different halves ->
    // two strided 2D memsets of 32 bits (one per half, pitch 8), so no kernel
    // is needed.
    const bool bytesEqual = std::all_of(b, b + patternBytes, [&](unsigned char c) { return c == b[0]; });
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, b, 4);
    std::memcpy(&hi, b + 4, 4);
    if (bytesEqual) {
      KILN_CU(api().cuMemsetD8Async(p, b[0], bytes, s));
    } else if (patternBytes == 2) {
      uint16_t v = 0;
      std::memcpy(&v, b, 2);
      KILN_CU(api().cuMemsetD16Async(p, v, bytes / 2, s));
    } else if (patternBytes == 4 || lo == hi) {
      KILN_CU(api().cuMemsetD32Async(p, lo, bytes / 4, s));
    } else {
      KILN_CU(api().cuMemsetD2D32Async(p, 8, lo, 1, bytes / 8, s));
      KILN_CU(api().cuMemsetD2D32Async(p + 4, 8, hi, 1, bytes / 8, s));
    }
  }

  // --- kernels ---
  std::shared_ptr<const KernelModule> loadModule(const KernelImage& image) override {
    KILN_ASSERT(image.format == KernelImage::Format::cubin, "{} runs cubins, not kernel {}", device_.str(), image.name);
    makeCurrent();
    auto kernel = std::make_shared<CudaKernel>(device_, image.name, context_);
    const CUresult loaded = api().cuModuleLoadData(&kernel->module, image.bytes.data());
    if (loaded != CUDA_SUCCESS) {
      kernel->module = nullptr;
      failToLoad(image, loaded);
    }
    const CUresult found = api().cuModuleGetFunction(&kernel->function, kernel->module, image.name.c_str());
    KILN_CHECK(found == CUDA_SUCCESS, "{}: the cubin has no kernel {} ({})", device_.str(), image.name,
               resultText(found));
    if (api().cuFuncGetParamInfo) {
      // The parameters: the buffers, then the args struct (Note [The GPU launch ABI]).
      size_t count = 0, offset = 0, size = 0, last = 0;
      while (api().cuFuncGetParamInfo(kernel->function, count, &offset, &size) == CUDA_SUCCESS) {
        last = size;
        ++count;
      }
      if (count > 0) {
        kernel->numBuffers = static_cast<int64_t>(count) - 1;
        kernel->argsBytes = static_cast<int64_t>(last);
      }
    }
    return kernel;
  }

  void launch(const KernelModule& kernel, std::span<const DevicePtr> buffers, std::span<const int64_t> args,
              const LaunchShape& shape, StreamHandle stream) override {
    KILN_ASSERT(kernel.device() == device_, "{} launch of kernel {} loaded on {}", device_.str(), kernel.name(),
                kernel.device().str());
    const auto& k = static_cast<const CudaKernel&>(kernel);
    std::vector<int64_t> words(args.begin(), args.end());
    words.push_back(shape.numel);
    KILN_ASSERT(k.numBuffers < 0 || k.numBuffers == static_cast<int64_t>(buffers.size()),
                "kernel {}: {} buffers for {} buffer parameters", k.name(), buffers.size(), k.numBuffers);
    KILN_ASSERT(k.argsBytes < 0 || k.argsBytes == static_cast<int64_t>(words.size() * sizeof(int64_t)),
                "kernel {}: an args struct of {} words for a parameter of {} bytes", k.name(), words.size(),
                k.argsBytes);
    for (int64_t g : shape.grid)
      if (g <= 0) return;  // nothing to do
    KILN_ASSERT(shape.grid[0] <= INT32_MAX && shape.grid[1] <= 65535 && shape.grid[2] <= 65535,
                "kernel {}: a grid of {}x{}x{} blocks", k.name(), shape.grid[0], shape.grid[1], shape.grid[2]);
    KILN_ASSERT(shape.block[0] * shape.block[1] * shape.block[2] <= props_.maxThreadsPerBlock,
                "kernel {}: blocks of {}x{}x{} threads on {} (at most {})", k.name(), shape.block[0], shape.block[1],
                shape.block[2], device_.str(), props_.maxThreadsPerBlock);
    // Pointers are offset on the host (a device pointer plus bytes is one);
    // the args struct is one parameter passed by value.
    CUdeviceptr local[8];
    std::vector<CUdeviceptr> heapPointers;
    CUdeviceptr* pointers = local;
    if (buffers.size() > std::size(local)) {
      heapPointers.resize(buffers.size());
      pointers = heapPointers.data();
    }
    std::vector<void*> params(buffers.size() + 1);
    for (size_t i = 0; i < buffers.size(); ++i) {
      pointers[i] = pointerOf(buffers[i]);
      params[i] = &pointers[i];
    }
    params.back() = words.data();
    makeCurrent();
    const CUresult r =
        api().cuLaunchKernel(k.function, static_cast<unsigned>(shape.grid[0]), static_cast<unsigned>(shape.grid[1]),
                             static_cast<unsigned>(shape.grid[2]), static_cast<unsigned>(shape.block[0]),
                             static_cast<unsigned>(shape.block[1]), static_cast<unsigned>(shape.block[2]),
                             static_cast<unsigned>(shape.sharedBytes), this->stream(stream), params.data(), nullptr);
    KILN_CHECK(r == CUDA_SUCCESS,
               "{}: launch of kernel {} ({} blocks of {} threads, {} bytes of shared memory) "
               "failed: {}",
               device_.str(), k.name(), shape.grid[0], shape.block[0], shape.sharedBytes, resultText(r));
  }

  // --- streams and events ---
  StreamHandle createStream() override {
    makeCurrent();
    CUstream s = nullptr;
    KILN_CU(api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return {s};
  }
  // Waits for the stream first: the caching allocator keeps blocks freed on
  // it for that stream's handle, and a stream created later may get the same
  // handle, with no order after this one's work.
  void destroyStream(StreamHandle stream) override {
    if (!stream.native || !setCurrent(context_)) return;
    api().cuStreamSynchronize(static_cast<CUstream>(stream.native));
    api().cuStreamDestroy(static_cast<CUstream>(stream.native));
  }
  bool queryStream(StreamHandle stream) override {
    makeCurrent();
    return ready(api().cuStreamQuery(this->stream(stream)), "cuStreamQuery");
  }
  void synchronizeStream(StreamHandle stream) override {
    makeCurrent();
    KILN_CU(api().cuStreamSynchronize(this->stream(stream)));
  }
  EventHandle createEvent(bool timing) override {
    makeCurrent();
    CUevent e = nullptr;
    KILN_CU(api().cuEventCreate(&e, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
    return {e};
  }
  void destroyEvent(EventHandle event) override {  // from destructors: never throws
    if (setCurrent(context_)) api().cuEventDestroy(static_cast<CUevent>(event.native));
  }
  void recordEvent(EventHandle event, StreamHandle stream) override {
    makeCurrent();
    KILN_CU(api().cuEventRecord(static_cast<CUevent>(event.native), this->stream(stream)));
  }
  void waitEvent(StreamHandle stream, EventHandle event) override {
    makeCurrent();
    KILN_CU(api().cuStreamWaitEvent(this->stream(stream), static_cast<CUevent>(event.native), 0));
  }
  bool queryEvent(EventHandle event) override {
    makeCurrent();
    return ready(api().cuEventQuery(static_cast<CUevent>(event.native)), "cuEventQuery");
  }
  void synchronizeEvent(EventHandle event) override {
    makeCurrent();
    KILN_CU(api().cuEventSynchronize(static_cast<CUevent>(event.native)));
  }
  double elapsedMs(EventHandle start, EventHandle end) override {
    makeCurrent();
    float ms = 0;
    const CUresult r =
        api().cuEventElapsedTime(&ms, static_cast<CUevent>(start.native), static_cast<CUevent>(end.native));
    KILN_CHECK(r == CUDA_SUCCESS, "{}: elapsed time between events: {}", device_.str(), resultText(r));
    return ms;
  }
  void synchronize() override {
    makeCurrent();
    KILN_CU(api().cuCtxSynchronize());
  }

  // --- recording: CUDA graphs (Note [Recorded work]) ---
  // Capture is per stream and thread-local (every kiln stream, the default
  // one included, is a created stream, which can be captured). While a
  // stream captures, nothing synchronizes it and nothing is allocated: the
  // Executable has bound every buffer before it records (its private pool,
  // Note [Graph replay] in runtime/executable.cpp).
  bool canRecord(std::string* why) const override {
    const DriverApi& a = api();
    const bool ok = a.cuStreamBeginCapture && a.cuStreamEndCapture && a.cuGraphGetNodes && a.cuGraphInstantiate &&
                    a.cuGraphLaunch && a.cuGraphExecDestroy && a.cuGraphDestroy;
    if (why) *why = ok ? "" : device_.str() + ": the driver has no graph capture entry points";
    return ok;
  }
  void beginRecording(StreamHandle stream) override {
    makeCurrent();
    KILN_CU(api().cuStreamBeginCapture(this->stream(stream), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  }
  std::unique_ptr<RecordedWork> endRecording(StreamHandle stream) override {
    makeCurrent();
    CUgraph graph = nullptr;
    KILN_CU(api().cuStreamEndCapture(this->stream(stream), &graph));
    size_t nodes = 0;
    CUgraphExec exec = nullptr;
    const CUresult counted = api().cuGraphGetNodes(graph, nullptr, &nodes);
    const CUresult made = counted == CUDA_SUCCESS ? api().cuGraphInstantiate(&exec, graph, 0) : counted;
    api().cuGraphDestroy(graph);
    KILN_CHECK(made == CUDA_SUCCESS, "{}: cuda: cannot instantiate a captured graph: {}", device_.str(),
               resultText(made));
    return std::make_unique<CudaGraph>(index_, exec, static_cast<int>(nodes));
  }

 private:
  int attribute(CUdevice_attribute which) const {
    int value = 0;
    KILN_CU(api().cuDeviceGetAttribute(&value, which, cuDevice_));
    return value;
  }
  bool ready(CUresult r, const char* call) const {
    if (r == CUDA_SUCCESS) return true;
    if (r == CUDA_ERROR_NOT_READY) return false;
    fail("{}: cuda: {} failed: {}", device_.str(), call, resultText(r));
  }
  /// Whether the driver knows `p` as page-locked (or managed) memory, which
  /// it copies from without staging.
  static bool isPageLocked(const void* p) {
    unsigned type = 0;
    return api().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(p)) ==
           CUDA_SUCCESS;
  }
  [[noreturn]] void failToLoad(const KernelImage& image, CUresult r) const {
    const int arch = cubinArch(std::span(image.bytes.data(), image.bytes.size()));
    const std::string built = arch ? fmt::format("sm_{}", arch) : "an unknown architecture";
    switch (r) {
      case CUDA_ERROR_NO_BINARY_FOR_GPU:
        fail("{}: kernel {}: the cubin was compiled for {}, but {} is {} ({}); compile for the device's own sm_XY",
             device_.str(), image.name, built, device_.str(), props_.arch, resultText(r));
      case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        fail(
            "{}: kernel {}: its PTX is newer than the driver's JIT compiler ({}, driver {}); update the NVIDIA "
            "driver or compile a cubin for {}",
            device_.str(), image.name, resultText(r), props_.driverVersion, props_.arch);
      case CUDA_ERROR_INVALID_IMAGE:
        fail("{}: kernel {}: the image is not a cubin the driver can load ({}, {} bytes)", device_.str(), image.name,
             resultText(r), image.bytes.size());
      default: fail("{}: kernel {}: cuModuleLoadData failed: {}", device_.str(), image.name, resultText(r));
    }
  }
  int index_;
  Device device_;
  CUdevice cuDevice_ = 0;
  CUcontext context_ = nullptr;
  CUstream defaultStream_ = nullptr;
  DeviceProperties props_;
  CudaSegments segments_;
  CachingAllocator allocator_;
};

void CudaSegments::recordEvent(EventHandle event, StreamHandle stream) { device->recordEvent(event, stream); }
bool CudaSegments::queryEvent(EventHandle event) { return device->queryEvent(event); }

CudaDevice& cudaDevice(int index) { return static_cast<CudaDevice&>(deviceInterface(Device::cuda(index))); }

}  // namespace

void makeCurrent(int index) { cudaDevice(index).makeCurrent(); }

CUstream streamOf(int index, StreamHandle stream) { return cudaDevice(index).stream(stream); }

}  // namespace cuda
#else  // !KILN_HAVE_CUDA

namespace cuda {
namespace {
std::string unavailableReason() {
  const DriverProbe& probe = driver();
  if (!probe.usable) return probe.reason;
  return "this build of kiln has no CUDA driver support (it was built without the CUDA toolkit's cuda.h); install "
         "the CUDA toolkit and rebuild kiln";
}
}  // namespace
}  // namespace cuda

#endif  // KILN_HAVE_CUDA

void registerCudaDriver() {
  static std::once_flag once;
  std::call_once(once, [] {
    DeviceDriver driver{DeviceType::cuda, "cuda", nullptr, nullptr, nullptr};
    driver.available = [](std::string* why) {
      std::string reason = cuda::unavailableReason();
      if (why) *why = reason;
      return reason.empty();
    };
    driver.count = [] { return cuda::unavailableReason().empty() ? cuda::driver().deviceCount : 0; };
#if KILN_HAVE_CUDA
    driver.open = [](int index) -> std::unique_ptr<DeviceInterface> {
      return std::make_unique<cuda::CudaDevice>(index);
    };
#else
    driver.open = [](int) -> std::unique_ptr<DeviceInterface> { return nullptr; };
#endif
    registerDeviceDriver(driver);
  });
}

}  // namespace kiln::runtime

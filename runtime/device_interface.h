// The device interface: the one seam between kiln and a device (DESIGN.md §7).
//
// In the spirit of ggml's `ggml_backend_i` and Halide's
// `halide_device_interface_t`: a small table of what a driver does —
// memory (allocate, free, copy host→device, device→host, device→device,
// fill), kernels (load a compiled module, launch it with its buffers,
// integer arguments and launch shape), streams and events (create, record,
// wait, query, synchronize, elapsed time) and the device's properties.
// Everything above runtime/ reaches a device only through it: the
// Executable launches steps through it, a Buffer is memory one of its
// drivers allocated, the frontend's factories and copies call it. A new
// device is a new file that implements it (runtime/cpu_device.cpp is the
// first) and registers itself with registerDeviceDriver().
//
// Note [Device memory is opaque]
// A DevicePtr is an allocation's handle and a byte offset into it. Only
// the driver that made the handle knows what it is: the CPU's is a host
// address; a CUDA driver's would be a CUdeviceptr, an OpenCL driver's a
// cl_mem, which cannot be offset on the host (sub-buffers need alignment),
// so the offset travels beside the handle instead of being added to it.
// Nothing above runtime/ dereferences a handle; the one exception is
// Tensor::data<T>(), a user's accessor of CPU tensors, which asks the CPU
// driver for the host address (hostAddress()).
//
// Note [Memory belongs to a stream]
// As in PyTorch's caching allocator, memory is allocated for a stream (the
// current stream of the allocating thread) and, once freed, handed out
// again at once to work on that same stream: later work on that stream runs
// after earlier work, so it cannot overwrite memory a pending kernel still
// reads. Memory used on another stream must be declared with recordStream,
// and is reused only after that stream's work has finished.
//
// Note [Streams order work]
// Every copy, fill and launch is enqueued on a stream and runs after what
// was enqueued on that stream before it; work on two streams is ordered only
// by events (recordEvent on one, waitEvent on the other). A host read waits
// (copyDeviceToHost synchronizes its stream). The CPU driver runs each
// operation when it is enqueued, so its streams are trivially in order and
// its events complete when recorded; drivers of asynchronous devices must
// keep the same contract.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/allocator_stats.h"
#include "runtime/device.h"

namespace kiln::runtime {

/// A place in device memory (Note [Device memory is opaque]).
struct DevicePtr {
  void* handle = nullptr;  ///< the allocation, as its driver knows it
  size_t offset = 0;       ///< bytes into it
};

/// A stream's native handle, owned by the driver that made it; null is the
/// device's default stream.
struct StreamHandle {
  void* native = nullptr;
  friend bool operator==(StreamHandle, StreamHandle) = default;
};

/// An event's native handle, owned by the driver that made it.
struct EventHandle {
  void* native = nullptr;
};

/// How a kernel is spread over the device. `numel` is the size of its
/// iteration domain (elements, or output rows for a reduction: codegen's
/// LaunchArgs). The CPU splits [0, numel) over its thread pool in ranges
/// that are multiples of `grain`; GPU-style devices run `grid` blocks
/// (work-groups) of `block` threads (work-items) with `sharedBytes` of
/// shared (local) memory per block.
struct LaunchShape {
  int64_t numel = 0;
  int64_t grain = 1;
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  size_t sharedBytes = 0;
};

/// The CPU kernel ABI (codegen/kernel.h): `buffers` are the kernel's
/// parameters in order, `args` its integer arguments; the kernel computes
/// the elements [begin, end) of its flattened iteration domain.
using CpuKernelFn = void (*)(void* const* buffers, const int64_t* args, int64_t begin, int64_t end);

// Note [The GPU launch ABI]
// A GPU kernel (codegen/kernel.h, "GPU ABI") takes its buffers, then one
// struct of 64-bit words: the launch's `args`, then `shape.numel`, then,
// where the image says offsetsInArgs, each buffer's DevicePtr offset in
// elements (offset / paramElementBytes[i]). A driver builds that struct at
// launch, so the Executable binds views at any offset without knowing the
// device. It launches shape.grid blocks of shape.block threads, nothing
// when the grid is empty.

/// A compiled kernel as codegen hands it to a driver to load: object code
/// in the device's format (a cubin, an OpenCL program binary or source) with
/// the name of its entry point, or, for the CPU, a function codegen's JIT
/// has already linked into this process (`hostFn`, callable while
/// `keepAlive` lives).
struct KernelImage {
  enum class Format : uint8_t { hostFunction, cubin, openclBinary, openclSource };
  Format format = Format::hostFunction;
  std::string name;            ///< the kernel's entry point
  std::vector<uint8_t> bytes;  ///< object code, for every format but hostFunction
  CpuKernelFn hostFn = nullptr;
  std::shared_ptr<const void> keepAlive;

  /// GPU formats: the element size in bytes of each buffer parameter, and
  /// whether the args struct ends with each buffer's offset in elements
  /// (OpenCL, where a buffer cannot be offset on the host; Note [The GPU
  /// launch ABI]).
  std::vector<uint32_t> paramElementBytes;
  bool offsetsInArgs = false;

  static KernelImage hostFunction(std::string name, CpuKernelFn fn, std::shared_ptr<const void> keepAlive = nullptr);
};

/// A kernel loaded on a device by its driver, ready to launch. Drivers
/// derive from it; the module stays loaded while a handle lives.
class KernelModule {
 public:
  explicit KernelModule(Device device, std::string name) : device_(device), name_(std::move(name)) {}
  virtual ~KernelModule() = default;
  KernelModule(const KernelModule&) = delete;
  KernelModule& operator=(const KernelModule&) = delete;
  Device device() const { return device_; }
  const std::string& name() const { return name_; }

 private:
  Device device_;
  std::string name_;
};

// Note [Recorded work]
// A driver that can record (a CUDA graph, an OpenCL command buffer) turns
// the kernel launches and device-to-device copies enqueued on a stream
// between beginRecording and endRecording into one RecordedWork: while
// recording, they are kept, not run (with the buffers, arguments and
// shapes they were given then), and each replay() enqueues all of them on
// the stream, in order, as one command. Nothing else may be enqueued on a
// recording stream (a host copy, a fill, an event, a library's own
// enqueue): drivers refuse what they cannot record with an InternalError.
// The Executable records compiled programs (Note [Graph replay] in
// runtime/executable.cpp).

/// Work a driver recorded, replayed as one command (Note [Recorded work]).
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  /// Enqueues the recorded work on `stream`, the stream it was recorded on.
  virtual void replay(StreamHandle stream) = 0;
  /// The launches and copies recorded.
  virtual int commands() const = 0;
};

/// What a driver says of its device.
struct DeviceProperties {
  std::string name;           ///< "AMD EPYC 7B13", "NVIDIA H200"
  std::string driverVersion;  ///< the driver's, or kiln's for the CPU
  /// What the device's code is compiled for ("sm_90", an OpenCL device and
  /// driver version), which kernel caches key on; empty for the CPU, whose
  /// code codegen compiles for LLVM's description of the host.
  std::string arch;
  int64_t totalMemory = 0;     ///< bytes; 0 when unknown
  int computeUnits = 0;        ///< threads (CPU), multiprocessors or compute units
  int maxThreadsPerBlock = 1;  ///< 1 on the CPU
  size_t sharedMemoryPerBlock = 0;
  bool fp64 = true, fp16 = true;
  bool hostAccessible = false;  ///< its memory is host memory (the CPU)
};

/// The table every device driver fills. One instance per device, alive for
/// the whole process. Errors a user can cause (out of memory, an unusable
/// device) are kiln::Error naming the device; misuse by kiln is an
/// InternalError.
class DeviceInterface {
 public:
  virtual ~DeviceInterface() = default;
  virtual Device device() const = 0;
  virtual const DeviceProperties& properties() const = 0;

  // Memory, through the device's caching allocator.
  /// At least `bytes` bytes (a zero-byte request gets a valid unique
  /// place), for use on `stream` (Note [Memory belongs to a stream]);
  /// kiln::Error when the device is out of memory, saying what was asked,
  /// allocated and reserved.
  virtual DevicePtr allocate(size_t bytes, StreamHandle stream) = 0;
  /// Gives back what allocate() returned.
  virtual void free(DevicePtr ptr) = 0;
  /// The memory at `ptr` (from allocate()) is used on `stream` too: it is
  /// not handed out again until the work enqueued there so far, at the
  /// time it is freed, has finished (torch's Tensor.record_stream).
  virtual void recordStream(DevicePtr ptr, StreamHandle stream) = 0;
  virtual AllocatorStats memoryStats() const = 0;
  /// Every statistic under PyTorch's names ("allocated_bytes.all.current",
  /// ...; docs/allocator.md). The default gives those memoryStats() has.
  virtual MemoryStats keyedMemoryStats() const;
  virtual void resetPeakMemoryStats() = 0;
  virtual void emptyCache() = 0;
  virtual std::string memorySummary() const = 0;

  // Copies and fills, enqueued on `stream` (Note [Streams order work]).
  // copyHostToDevice reads `src` before it returns; copyDeviceToHost has
  // written `dst` when it returns.
  virtual void copyHostToDevice(DevicePtr dst, const void* src, size_t bytes, StreamHandle stream) = 0;
  virtual void copyDeviceToHost(void* dst, DevicePtr src, size_t bytes, StreamHandle stream) = 0;
  virtual void copyDeviceToDevice(DevicePtr dst, DevicePtr src, size_t bytes, StreamHandle stream) = 0;
  /// Copies ordered on `stream` that return at once (Note [Pinned memory]):
  /// the host memory is pinned (runtime/pinned_memory.h), and the caller
  /// keeps it alive and unchanged (or unread, from the host) until an event
  /// recorded after the copy has completed.
  virtual void copyHostToDeviceAsync(DevicePtr dst, const void* src, size_t bytes, StreamHandle stream) = 0;
  virtual void copyDeviceToHostAsync(void* dst, DevicePtr src, size_t bytes, StreamHandle stream) = 0;
  /// Fills `bytes` bytes at `dst` with copies of the `patternBytes`-byte
  /// `pattern` (1, 2, 4 or 8 bytes; `bytes` a multiple of it).
  virtual void fill(DevicePtr dst, size_t bytes, const void* pattern, size_t patternBytes, StreamHandle stream) = 0;

  // Kernels.
  /// Loads `image` (a format this device runs; InternalError otherwise).
  virtual std::shared_ptr<const KernelModule> loadModule(const KernelImage& image) = 0;
  /// Enqueues `kernel` over `shape` with its parameters `buffers` and
  /// integer arguments `args` (codegen/kernel.h's layout; on GPUs Note
  /// [The GPU launch ABI]).
  virtual void launch(const KernelModule& kernel, std::span<const DevicePtr> buffers, std::span<const int64_t> args,
                      const LaunchShape& shape, StreamHandle stream) = 0;

  // Streams and events.
  virtual StreamHandle createStream() = 0;
  virtual void destroyStream(StreamHandle stream) = 0;
  /// Whether everything enqueued on `stream` has finished.
  virtual bool queryStream(StreamHandle stream) = 0;
  virtual void synchronizeStream(StreamHandle stream) = 0;
  virtual EventHandle createEvent(bool timing) = 0;
  virtual void destroyEvent(EventHandle event) = 0;
  /// The event completes when the work enqueued on `stream` so far has.
  virtual void recordEvent(EventHandle event, StreamHandle stream) = 0;
  /// Work enqueued on `stream` after this waits for `event` (on the
  /// device: the host does not block).
  virtual void waitEvent(StreamHandle stream, EventHandle event) = 0;
  virtual bool queryEvent(EventHandle event) = 0;
  virtual void synchronizeEvent(EventHandle event) = 0;
  /// Milliseconds between two completed events recorded with timing.
  virtual double elapsedMs(EventHandle start, EventHandle end) = 0;
  /// Waits for all work on every stream of the device.
  virtual void synchronize() = 0;

  // Recording (Note [Recorded work]); drivers without it keep the defaults.
  /// Whether launches and copies can be recorded; `why` says why not.
  virtual bool canRecord(std::string* why) const;
  /// Starts recording what is enqueued on `stream`.
  virtual void beginRecording(StreamHandle stream);
  /// Stops recording on `stream` and returns what was recorded. Called on
  /// every path after beginRecording, errors included (then the result is
  /// dropped), so that the stream runs work again.
  virtual std::unique_ptr<RecordedWork> endRecording(StreamHandle stream);
};

/// The driver of `device`. Throws kiln::Error saying why when the device
/// cannot be used (no driver for its kind in this build or process, or no
/// such device): `cuda:0: no CUDA driver: ...`.
DeviceInterface& deviceInterface(Device device);

/// Whether `device` can be used; when not, `why` (if non-null) says why.
bool isDeviceAvailable(Device device, std::string* why = nullptr);

/// How many devices of `type` this process sees; 0 when the kind is
/// unavailable.
int deviceCount(DeviceType type);

/// A driver's entry: how many devices of its kind there are and the
/// interface of each, made on first use. `available` says why not when the
/// kind cannot be used in this process.
struct DeviceDriver {
  DeviceType type;
  std::string name;  ///< "cpu", "cuda", "opencl"
  int (*count)() = nullptr;
  bool (*available)(std::string* why) = nullptr;
  std::unique_ptr<DeviceInterface> (*open)(int index) = nullptr;
};

/// Registers the driver of a device kind (drivers do it from a static
/// initializer in their file, or when first asked for). A second
/// registration for a kind replaces the first, before any of its devices is
/// opened (tests run kiln on a simulated cuda device that way:
/// tests/unit/device/). The built-in drivers register at the first use of
/// the registry (deviceCount, isDeviceAvailable, or deviceInterface of a
/// device that is not the CPU), so a replacement must come after that.
void registerDeviceDriver(const DeviceDriver& driver);

/// The host address of memory of a host-accessible device (the CPU): its
/// handle plus its offset. Only the CPU driver, CPU library calls and
/// Tensor::data<T>() of CPU tensors use it (Note [Device memory is opaque]).
inline void* hostAddress(DevicePtr ptr) { return static_cast<char*>(ptr.handle) + ptr.offset; }

}  // namespace kiln::runtime

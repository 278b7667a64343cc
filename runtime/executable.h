// Executable: what codegen produces and the runtime runs (DESIGN.md §7).
//
// An Executable is a list of steps over numbered buffer slots, run on one
// device through its driver (runtime/device_interface.h), on the calling
// thread's current stream of that device (runtime/stream.h). Slots are the
// program's inputs (bound by the caller), its outputs and its
// intermediates (allocated here, from the device's caching allocator). A
// memory plan (codegen/plan_memory.h) may put intermediates whose lifetimes
// do not overlap into one shared buffer: then `slotBuffers` maps each slot
// to its buffer in `buffers`, and run() allocates those buffers instead of
// one per slot. A step is
// - a kernel launch: a kernel codegen compiled and the device's driver
//   loaded, launched over its LaunchShape with its buffers and integer
//   arguments;
// - a library call: a function of the runtime that computes a whole op (a
//   matmul through BLAS, a gather), given the device, stream, buffers and
//   integer arguments (LibraryCall);
// - a copy of bytes from one slot to another;
// - a collective's start or wait: an all-reduce in place over a slot,
//   issued on a process group (runtime/dist_process_group.h) at its start
//   step and waited for at its wait step, so that the steps between run
//   while it communicates (runtime/executable_collectives.h).
// Each names its buffer slots and where in each slot it starts. The runtime knows nothing of the IR:
// everything a step needs is in it. An Executable marked `replay` records
// its steps on devices that can (a CUDA graph, an OpenCL command buffer)
// and replays them (Note [Graph replay] in runtime/executable_replay.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/device_interface.h"
#include "runtime/dtype.h"

namespace kiln::runtime {

struct KernelStep {
  std::string name;
  std::shared_ptr<const KernelModule> kernel;  ///< loaded on the executable's device
  std::vector<int> slots;                      ///< buffer slot of each kernel parameter
  std::vector<int64_t> args;                   ///< integer arguments
  LaunchShape shape;
  /// Bytes from the start of each parameter's slot to where the kernel's
  /// indexing starts (a view's offset, or a piece of a larger output); empty
  /// when every parameter starts at its slot.
  std::vector<int64_t> offsets;
};

/// What a library function gets: the device and stream to run on, its
/// buffers (the op's operands and then its result, each where the op reads
/// or writes it) and its integer arguments, whose layout each function
/// documents (runtime/blas.h, runtime/indexing.h).
/// Note [Matmul epilogues] (runtime/blas.cpp): a CPU kernel a library call
/// runs over each block of its result, whose parameters are the call's
/// buffers [firstBuffer, end).
struct LibraryEpilogue {
  const KernelModule* kernel = nullptr;  ///< a CPU kernel (hostKernelFn)
  size_t firstBuffer = 0;
  std::span<const int64_t> args;
};

struct LibraryCall {
  Device device;
  StreamHandle stream;
  std::span<const DevicePtr> buffers;
  std::span<const int64_t> args;
  const LibraryEpilogue* epilogue = nullptr;  ///< null for none
};

/// The function of a kernel loaded on the CPU.
CpuKernelFn hostKernelFn(const KernelModule& kernel);

/// The library-call ABI. The function runs the whole op, splitting it as it
/// sees fit, and may throw kiln::Error for what only the data can tell (an
/// index out of range), before it writes anything.
using LibraryFn = void (*)(const LibraryCall& call);

/// The ABI of the CPU's library functions: host addresses of the buffers.
using CpuLibraryFn = void (*)(std::span<void* const> buffers, std::span<const int64_t> args);

/// A LibraryFn that runs CPU library function F on the call's host
/// addresses: `&onHost<&runtime::matmul>`.
template <CpuLibraryFn F>
void onHost(const LibraryCall& call) {
  void* local[8];
  std::vector<void*> heap;
  void** ptrs = local;
  if (call.buffers.size() > std::size(local)) {
    heap.resize(call.buffers.size());
    ptrs = heap.data();
  }
  for (size_t i = 0; i < call.buffers.size(); ++i) ptrs[i] = hostAddress(call.buffers[i]);
  F(std::span<void* const>(ptrs, call.buffers.size()), call.args);
}

struct LibraryStep {
  std::string name;  ///< "matmul_f32", for profiles and tests
  LibraryFn fn = nullptr;
  std::vector<int> slots;     ///< buffer slot of each operand, then of the result
  std::vector<int64_t> args;  ///< integer arguments
  /// Bytes from the start of each buffer's slot to where the op reads it (a
  /// view's offset); empty when every buffer starts at its slot.
  std::vector<int64_t> offsets;
  /// Whether a device recording records what `fn` enqueues (Note [Graph
  /// replay] in runtime/executable_replay.cpp).
  bool recordable = false;
  /// Note [Matmul epilogues] (runtime/blas.cpp): the elementwise kernel
  /// `fn` runs over each block of its result as soon as it is computed,
  /// its parameters in slots [epilogueFirstSlot, end), its arguments
  /// epilogueArgs; null for none (CPU matmuls only).
  std::shared_ptr<const KernelModule> epilogue = nullptr;
  std::vector<int64_t> epilogueArgs = {};
  size_t epilogueFirstSlot = 0;
};

/// `bytes` bytes from the first slot to the second, through the driver's
/// device-to-device copy (a contiguous copy needs no kernel).
struct CopyStep {
  std::string name;
  std::vector<int> slots;  ///< source, then destination
  size_t bytes = 0;
  std::vector<int64_t> offsets;  ///< bytes into each slot; empty when both are 0
};

namespace dist {
class ProcessGroup;
enum class ReduceOp : uint8_t;
}  // namespace dist

/// Half of a collective: `start` issues an all-reduce of the `numel`
/// elements of `dtype` in its one slot, in place, on `group`; `wait` (a
/// later step with the same `ticket`) waits for it, and the steps after it
/// see the result (Note [Collective steps] in runtime/executable_collectives.cpp).
struct CollectiveStep {
  enum class Phase : uint8_t { start, wait };
  std::string name;  ///< "all_reduce_f32"
  Phase phase = Phase::start;
  int ticket = 0;  ///< the collective's number in the executable: pairs a start with its wait
  std::shared_ptr<dist::ProcessGroup> group;
  dist::ReduceOp op{};
  DType dtype = DType::f32;
  int64_t numel = 0;
  std::vector<int64_t> shape;    ///< for messages
  std::vector<int> slots;        ///< the one slot reduced in place
  std::vector<int64_t> offsets;  ///< bytes into the slot; empty when 0
};

/// One step of an Executable.
using Step = std::variant<KernelStep, LibraryStep, CopyStep, CollectiveStep>;

/// What every kind of step has: a name and the slots it names.
inline const std::string& stepName(const Step& step) {
  return std::visit([](const auto& s) -> const std::string& { return s.name; }, step);
}
inline const std::vector<int>& stepSlots(const Step& step) {
  return std::visit([](const auto& s) -> const std::vector<int>& { return s.slots; }, step);
}

struct ReplayCache;

/// When an Executable is recorded and replayed (Note [Graph replay]).
enum class GraphReplay : uint8_t {
  off,      ///< never: the steps run one by one
  cheaper,  ///< when a replay enqueues fewer commands than the steps
  always,   ///< whenever the device records (tests; a device where a launch costs more than a command)
};

/// What graph replay did for one Executable (Note [Graph replay]).
struct ReplayInfo {
  int64_t recordings = 0;  ///< recordings made (each replaces the one before on its stream)
  int64_t replays = 0;     ///< runs that replayed a recording
  int commandsPerRun = 0;  ///< what the last recording enqueues per run (replays, copies, library calls)
  int stagedInputs = 0;    ///< inputs the last recording copies in (their buffer changes between calls)
  std::string off;         ///< why replay is off on the last stream asked (empty: it is not)
};

struct SlotSpec {
  size_t bytes = 0;
  Device device;
};

class Executable {
 public:
  Device device;  ///< where the steps run
  std::vector<SlotSpec> slots;
  std::vector<int> inputSlots;   ///< slot of each program input, in order
  std::vector<int> outputSlots;  ///< slot of each program output, in order
  std::vector<Step> steps;
  /// The memory plan: for each slot, the index in `buffers` of the shared
  /// buffer it lives in, or -1 for a slot with a buffer of its own (inputs,
  /// outputs). Empty: no plan, every slot that is not an input gets its own.
  std::vector<int> slotBuffers;
  /// The shared buffers of the plan: size (at least that of every slot in
  /// it) and device.
  std::vector<SlotSpec> buffers;

  /// Runs the steps on the current stream of `device`; `inputs` are bound
  /// to inputSlots in order, input i starting `inputOffsets[i]` bytes into
  /// its buffer (all 0 when empty), so that a view is read where it starts.
  /// `outputs`, when given, binds output i to the caller's buffer (where it
  /// is not null), starting `outputOffsets[i]` bytes in, instead of a new
  /// one. Returns the buffers of the outputs (an output that is an input
  /// returns that buffer).
  std::vector<std::shared_ptr<Buffer>> run(const std::vector<std::shared_ptr<Buffer>>& inputs,
                                           const std::vector<int64_t>& inputOffsets = {},
                                           const std::vector<std::shared_ptr<Buffer>>& outputs = {},
                                           const std::vector<int64_t>& outputOffsets = {}) const;

  /// Per output, the input whose tensor the caller stores the output's
  /// value into after the run (an optimizer's update of a parameter that
  /// was not donated), or -1: a replay writes it into that input's buffer
  /// itself and returns that buffer, so the input stays where it is
  /// (Note [Graph replay]). Empty: none.
  std::vector<int> writeBack;
  /// Whether run() may record the steps and replay them on a device that
  /// records (Note [Graph replay]); kiln::compile sets it.
  GraphReplay replay = GraphReplay::off;
  /// The recordings and what run() saw of earlier calls, shared by copies
  /// of this Executable.
  std::shared_ptr<ReplayCache> replayCache;

  /// Steps one run launches: kernels, library calls and copies.
  int numKernels() const { return static_cast<int>(steps.size()); }
  /// Of numKernels(), the library calls.
  int numLibraryCalls() const;
  /// Of the library calls, those that run a kernel as their epilogue (Note
  /// [Matmul epilogues] in runtime/blas.cpp).
  int numEpilogues() const;
  /// Of numKernels(), the collectives' starts and waits.
  int numCollectiveSteps() const;
  /// Per collective (by ticket), the steps that run between its start and
  /// its wait: what its communication overlaps (Note [Collective steps]).
  std::vector<int> collectiveOverlaps() const;
  /// Bytes run() allocates besides the outputs: the shared buffers of the
  /// plan and the slots of intermediates outside it (all of them without a
  /// plan).
  size_t intermediateBytes() const;
  /// What graph replay did so far.
  ReplayInfo replayInfo() const;

  /// Allocates a buffer for every slot but the inputs that `bound` has none
  /// for (the plan's shared buffers, intermediates, outputs) and sets its
  /// `base`.
  void allocateUnbound(std::vector<std::shared_ptr<Buffer>>& bound, std::vector<DevicePtr>& base) const;
  /// Enqueues step `s` (not a collective's) with the slot addresses `base` on `stream` of `driver`, the device's.
  void launchStep(size_t s, const std::vector<DevicePtr>& base, DeviceInterface& driver, StreamHandle stream) const;
};

/// A cache for Executable::replayCache.
std::shared_ptr<ReplayCache> makeReplayCache();

/// Whether graph replay is allowed in this process: KILN_GRAPH_REPLAY=0
/// turns it off everywhere (read once).
bool graphReplayEnabled();

/// Commands executables enqueued in this process so far, for kiln-bench and
/// tests: kernels, library calls and copies, and a replayed recording
/// counts once (Note [Graph replay]).
int64_t kernelLaunchCount();
/// Adds `n` to kernelLaunchCount().
void countLaunches(int64_t n);

/// A host function with the CPU kernel ABI, loaded on the CPU as a kernel
/// (for hand-written steps: tests, runtime-internal kernels).
std::shared_ptr<const KernelModule> loadHostKernel(std::string name, CpuKernelFn fn,
                                                   std::shared_ptr<const void> keepAlive = nullptr);

}  // namespace kiln::runtime

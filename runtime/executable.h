// Executable: what codegen produces and the runtime runs (DESIGN.md §7).
//
// An Executable is a list of steps over numbered buffer slots. Slots are the
// program's inputs (bound by the caller), its outputs and its intermediates
// (allocated here, from the device's caching allocator). A memory plan
// (codegen/plan_memory.h) may put intermediates whose lifetimes do not
// overlap into one shared buffer: then `slotBuffers` maps each slot to its
// buffer in `buffers`, and run() allocates those buffers instead of one per
// slot. A step is a kernel
// launch (a function compiled by codegen with the kernel ABI below, split
// over the thread pool here) or a library call (a C++ function of the
// runtime that computes a whole op: a matmul through BLAS, a gather; it
// splits its work itself). Either names its buffer slots, where in each slot
// it starts, and its integer arguments (sizes and strides). Copies and
// collectives are further kinds of step to come. The runtime knows nothing
// of the IR: everything a step needs is in it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/device.h"

namespace kiln::runtime {

/// The CPU kernel ABI. `buffers` are the kernel's parameters in order,
/// `args` its integer arguments (layout decided by codegen); the kernel
/// computes the elements [begin, end) of its flattened iteration domain.
using CpuKernelFn = void (*)(void* const* buffers, const int64_t* args, int64_t begin, int64_t end);

struct KernelStep {
  std::string name;
  CpuKernelFn fn = nullptr;
  std::vector<int> slots;      ///< buffer slot of each kernel parameter
  std::vector<int64_t> args;   ///< integer arguments
  int64_t numel = 0;           ///< size of the iteration domain
  int64_t grain = 1;           ///< split granularity for the thread pool
  std::shared_ptr<const void> keepAlive;  ///< keeps the compiled code loaded
  /// Bytes from the start of each parameter's slot to where the kernel's
  /// indexing starts (a view's offset, or a piece of a larger output); empty
  /// when every parameter starts at its slot.
  std::vector<int64_t> offsets;
};

/// The library-call ABI: `buffers` are the op's operands and then its
/// result, each where the op reads or writes it; `args` its integer
/// arguments, whose layout each function documents (runtime/blas.h,
/// runtime/indexing.h). The function runs the whole op, splitting it over
/// the ThreadPool as it sees fit, and may throw kiln::Error for what only
/// the data can tell (an index out of range), before it writes anything.
using LibraryFn = void (*)(std::span<void* const> buffers, std::span<const int64_t> args);

struct LibraryStep {
  std::string name;  ///< "matmul_f32", for profiles and tests
  LibraryFn fn = nullptr;
  std::vector<int> slots;     ///< buffer slot of each operand, then of the result
  std::vector<int64_t> args;  ///< integer arguments
  /// Bytes from the start of each buffer's slot to where the op reads it (a
  /// view's offset); empty when every buffer starts at its slot.
  std::vector<int64_t> offsets;
};

/// One step of an Executable.
using Step = std::variant<KernelStep, LibraryStep>;

struct SlotSpec {
  size_t bytes = 0;
  Device device;
};

class Executable {
 public:
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

  /// Runs the steps; `inputs` are bound to inputSlots in order, input i
  /// starting `inputOffsets[i]` bytes into its buffer (all 0 when empty), so
  /// that a view is read where it starts. Returns the buffers of the outputs
  /// (an output that is an input returns that buffer).
  std::vector<std::shared_ptr<Buffer>> run(const std::vector<std::shared_ptr<Buffer>>& inputs,
                                           const std::vector<int64_t>& inputOffsets = {}) const;

  /// Steps one run launches: kernels and library calls.
  int numKernels() const { return static_cast<int>(steps.size()); }
  /// Of numKernels(), the library calls.
  int numLibraryCalls() const;
  /// Bytes run() allocates besides the outputs: the shared buffers of the
  /// plan and the slots of intermediates outside it (all of them without a
  /// plan).
  size_t intermediateBytes() const;
};

/// Kernels and library calls launched by this process so far, for
/// kiln-bench and tests.
int64_t kernelLaunchCount();

}  // namespace kiln::runtime

// Executable: what codegen produces and the runtime runs (DESIGN.md §7).
//
// An Executable is a list of steps over numbered buffer slots. Slots are the
// program's inputs (bound by the caller), its outputs and its intermediates
// (allocated here, from the device's caching allocator). A step is, for now,
// a kernel launch: a function compiled by codegen with the kernel ABI below,
// its buffer slots, where in each slot it starts, and its integer arguments
// (sizes and strides). Library
// calls, copies and collectives are further kinds of step to come. The
// runtime knows nothing of the IR: everything a step needs is in it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
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

struct SlotSpec {
  size_t bytes = 0;
  Device device;
};

class Executable {
 public:
  std::vector<SlotSpec> slots;
  std::vector<int> inputSlots;   ///< slot of each program input, in order
  std::vector<int> outputSlots;  ///< slot of each program output, in order
  std::vector<KernelStep> steps;

  /// Runs the steps; `inputs` are bound to inputSlots in order, input i
  /// starting `inputOffsets[i]` bytes into its buffer (all 0 when empty), so
  /// that a view is read where it starts. Returns the buffers of the outputs
  /// (an output that is an input returns that buffer).
  std::vector<std::shared_ptr<Buffer>> run(const std::vector<std::shared_ptr<Buffer>>& inputs,
                                           const std::vector<int64_t>& inputOffsets = {}) const;

  int numKernels() const { return static_cast<int>(steps.size()); }
};

/// Kernels launched by this process so far, for kiln-bench and tests.
int64_t kernelLaunchCount();

}  // namespace kiln::runtime

// Targets: what codegen needs to know of each kind of device (DESIGN.md §6).
//
// A Target turns a Kernel into a kernel its device's driver has loaded
// (render, compile — or load from the disk cache —, then
// runtime::DeviceInterface::loadModule), says how a kernel is launched there
// (runtime::LaunchShape from the kernel and its LaunchArgs), which runtime
// functions run library ops there, and which top-level nodes it cannot run.
// compileGraph() and the KernelCache reach devices only through it, so a new
// device kind is a new Target next to its renderer (the CPU's is
// codegen/cpu_target.cpp: LLVM IR, ORC JIT, the thread pool) and a driver
// in runtime/.
#pragma once

#include <memory>
#include <string>

#include "codegen/kernel.h"
#include "ir/graph.h"
#include "runtime/device.h"
#include "runtime/device_interface.h"
#include "runtime/executable.h"

namespace kiln::codegen {

/// A kernel compiled for and loaded on one device.
struct CompiledKernel {
  std::shared_ptr<const runtime::KernelModule> module;
  double compileMs = 0;        ///< render + compile (or disk load) + load, wall clock
  bool fromDiskCache = false;  ///< object code came from the disk cache (codegen/disk_cache.h)
};

/// The runtime function of each library op (ir::OpKind::library) on a
/// target; lowerLibrary picks one by op (codegen/lowering_library.h). Null:
/// the target cannot run that op.
struct LibraryFunction {
  runtime::LibraryFn fn = nullptr;
  /// Whether a device recording records what it enqueues (it enqueues only
  /// through the device's stream, never waits, never allocates; Note
  /// [Recorded work] in runtime/device_interface.h).
  bool recordable = false;
  /// The same op with an elementwise kernel run over its result as it is
  /// computed (Note [Matmul epilogues in compiled programs] in
  /// codegen/compile_graph.cpp): the CPU's matmul and forward convolution;
  /// null where the op takes none.
  runtime::LibraryFn withEpilogue = nullptr;
};
struct LibraryFunctions {
  LibraryFunction matmul, indexSelect, indexAdd;
  /// Only where ir::fusedAttentionOn says so (the CPU's).
  LibraryFunction attention = {}, attentionBackward = {};
  /// conv2d, conv_transpose2d and conv2d_backward_weight (one function:
  /// runtime::ConvCall says which).
  LibraryFunction conv = {};
};

class Target {
 public:
  virtual ~Target() = default;
  /// "cpu", "cuda", "opencl".
  virtual std::string_view name() const = 0;
  /// What code compiled for `device` depends on besides the kernel (the
  /// CPU's LLVM target description; an sm_XY; an OpenCL device and driver
  /// version): part of every cache key.
  virtual std::string description(Device device) const = 0;
  /// Whether `node`, a top-level node of a graph compileGraph accepts
  /// otherwise, runs on this target; `why` says why not.
  virtual bool supports(const ir::Node& node, std::string* why) const = 0;
  /// Renders, compiles (or loads from the disk cache) and loads `kernel` on
  /// `device`. kiln::Error naming the kernel when the compiler fails.
  virtual CompiledKernel compile(const Kernel& kernel, Device device) const = 0;
  /// How `kernel` is launched over `launch`.
  virtual runtime::LaunchShape launchShape(const Kernel& kernel, const LaunchArgs& launch) const = 0;
  /// The runtime functions that run library ops on this target.
  virtual const LibraryFunctions& libraries() const = 0;
};

/// The target of `device`'s kind. kiln::Error when codegen has none:
/// `codegen: no target for cuda:0 in this build (...)`.
const Target& targetFor(Device device);

/// The CPU's target: LLVM IR, ORC JIT, the thread pool (codegen/cpu_target.cpp).
const Target& cpuTarget();

/// The OpenCL target: OpenCL C built by the device's compiler (codegen/opencl_target.cpp).
const Target& openclTarget();

/// Makes `target` (alive for the process) the target of `type`'s devices:
/// how a device kind's codegen plugs in (the CPU's is built in). A second
/// registration for a kind replaces the first (tests use it to run kiln on a
/// simulated device: tests/unit/device/).
void registerTarget(DeviceType type, const Target* target);

}  // namespace kiln::codegen

// The C-family GPU renderer: turns a codegen::Kernel into the source of one
// GPU kernel in a dialect (codegen/c_dialect.h) — CUDA C, which
// codegen/nvrtc_compiler.h compiles to a cubin, or OpenCL C 1.2, which
// codegen/opencl_compiler.h builds — together with the launch shape the
// kernel was written for (DESIGN.md §6).
//
// The text is self-contained: it includes no header and calls no device
// math library; every elementwise op is the builder instantiation of
// ir/scalar_formulas.h (codegen/c_builder.h), so a kernel computes the same
// bits as eager and the CPU renderer (Note [Eager equals compiled]),
// provided it is compiled with the flags the compilers use (no FMA
// contraction, IEEE division and square root, no flush to zero).
//
// Every dtype renders: parameters are `float`, `double`, `int`, the 64-bit
// integer, the unsigned 16-bit type (f16 and bf16 bits) and the unsigned
// byte (bool, 0 or 1); f16 and bf16 are converted to and from f32 by bit
// manipulation written into the source (ir/scalar_formulas_bits.h),
// float-to-integer casts saturate through explicit compares, integer
// arithmetic wraps through the unsigned types.
//
// The ABI of both dialects is in codegen/kernel.h ("GPU ABI"): buffers,
// then one args struct passed by value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/c_dialect.h"
#include "codegen/kernel.h"
#include "runtime/device_interface.h"

namespace kiln::codegen {

/// Work-items per work-group (CUDA threads per block) of every GPU kernel
/// kiln renders: reductions require exactly this size (their trees and
/// __launch_bounds__ / reqd_work_group_size are written for it); elementwise
/// kernels take any size but are launched with it, so a device builds one
/// variant per kernel (PoCL compiles one per local size at first launch).
constexpr int kGpuLocalSize = 256;

/// How a rendered kernel is launched: what a driver needs besides the
/// source, the entry point and the args (codegen/kernel.h, "GPU ABI"), from
/// which shape() makes the runtime::LaunchShape of a launch. Every kernel
/// loops over its work with a stride of the whole launch (grid-stride
/// loops), so any number of work-groups computes the whole domain, and no
/// work-item returns early.
struct GpuLaunch {
  /// What one work-item (elementwise) or work-group (rows) takes per step of its loop.
  enum class Unit : uint8_t {
    element,  ///< one element of the domain
    vector4,  ///< four consecutive elements (a vectorized elementwise kernel)
    row,      ///< one output row (a reduction: the group's items stride the row)
  };
  Unit unit = Unit::element;
  /// Work-items per work-group (CUDA blockDim.x, OpenCL local size).
  int localSize = kGpuLocalSize;
  /// The kernel only runs correctly with exactly localSize (reductions).
  bool localSizeRequired = false;
  /// Bytes of shared/local memory the kernel declares itself (static
  /// arrays: a launch passes no dynamic shared memory).
  int64_t sharedBytes = 0;

  /// Work-groups for a launch over LaunchArgs::numel = `numel` (elements,
  /// or rows for a reduction): enough for one unit per work-item (one row
  /// per group), at most `maxGroups` (the loops cover the rest); 0 when
  /// there is nothing to do (launch nothing: OpenCL rejects an empty range).
  int64_t groups(int64_t numel, int64_t maxGroups) const;
  /// OpenCL's global size: groups * localSize (uniform work-groups).
  int64_t globalSize(int64_t numel, int64_t maxGroups) const { return groups(numel, maxGroups) * localSize; }
  /// The launch over `numel` as the device interface takes it: groups(numel,
  /// maxGroups) blocks of localSize threads, no dynamic shared memory.
  runtime::LaunchShape shape(int64_t numel, int64_t maxGroups) const;
};

/// How `kernel` is launched (what renderGpuKernel writes it for), without
/// rendering it; the shared memory it declares is known only by rendering.
GpuLaunch gpuLaunchOf(const Kernel& kernel);

/// A kernel rendered for one dialect.
struct RenderedKernel {
  std::string name;    ///< the entry point (Kernel::name)
  std::string source;  ///< one self-contained translation unit; several may be concatenated into one
  GpuLaunch launch;
  /// Buffer parameters, which come first (one per kernel parameter); the
  /// args struct is the one parameter after them.
  int numBuffers = 0;
  /// int64 words of the args struct: LaunchArgs::args, numel, then (where
  /// the dialect offsets buffers in the kernel) one element offset per buffer.
  int64_t argWords = 0;
};

/// `kernel` in dialect `d`; the same kernel always gives the same text. A
/// malformed kernel (codegen::checkKernel: an operand that is not an
/// earlier value, a load of an output, dtypes that disagree) is a kiln bug
/// (InternalError).
RenderedKernel renderGpuKernel(const Kernel& kernel, const CDialect& d);

/// The CUDA C source of `kernel` (renderGpuKernel with cudaDialect()).
std::string renderCudaC(const Kernel& kernel);
/// The OpenCL C source of `kernel` (renderGpuKernel with openclDialect()).
std::string renderOpenCLC(const Kernel& kernel);

/// The args struct's words for a launch: `launch.args`, `launch.numel`, then,
/// where the dialect wants them (`rendered.argWords` says), `elementOffsets`
/// (one per kernel parameter, in elements of its dtype; empty means zeros).
std::vector<int64_t> packGpuArgs(const RenderedKernel& rendered, const LaunchArgs& launch,
                                 const std::vector<int64_t>& elementOffsets = {});

}  // namespace kiln::codegen

// What KILN_LOG=codegen prints (runtime/log.h): one line per step that
// compileGraph makes, as it makes it: a kernel (name, kind, domain sizes,
// elements or rows, the launch shape the target chose — the thread pool's
// grain on the CPU, grid and block on a GPU — and each parameter's role,
// dtype, strides and offset in elements), or a library call with its
// integer arguments, or a copy step with its size. Off, each call is one
// relaxed load.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "codegen/lowering.h"
#include "runtime/device_interface.h"
#include "runtime/log.h"

namespace kiln::codegen {

/// The codegen line of a kernel step (without the "kiln::codegen: " prefix).
std::string describeKernelStep(const LoweredKernel& lowered, const runtime::LaunchShape& shape);
/// The codegen line of a library call step (without the prefix).
std::string describeLibraryStep(std::string_view name, std::span<const int64_t> args);

/// Logs the kernel step of `lowered`, launched with `shape`.
inline void logKernelStep(const LoweredKernel& lowered, const runtime::LaunchShape& shape) {
  KILN_LOG_TO(codegen, "kiln::codegen: {}", describeKernelStep(lowered, shape));
}
/// The codegen line of a copy step (without the prefix): `bytes` from byte
/// offsets[0] of the source to byte offsets[1] of the destination (empty:
/// both 0).
std::string describeCopyStep(std::string_view name, size_t bytes, std::span<const int64_t> offsets);

/// Logs a copy step (a contiguous copy through the device's own copy).
inline void logCopyStep(std::string_view name, size_t bytes, std::span<const int64_t> offsets) {
  KILN_LOG_TO(codegen, "kiln::codegen: {}", describeCopyStep(name, bytes, offsets));
}
/// Logs a library call step.
inline void logLibraryStep(std::string_view name, std::span<const int64_t> args) {
  KILN_LOG_TO(codegen, "kiln::codegen: {}", describeLibraryStep(name, args));
}
/// Logs that kernel `kernel` runs as the epilogue of library step `call`
/// (Note [Matmul epilogues in compiled programs]).
inline void logEpilogue(std::string_view call, std::string_view kernel) {
  KILN_LOG_TO(codegen, "kiln::codegen: {} runs as the epilogue of {}", kernel, call);
}

}  // namespace kiln::codegen

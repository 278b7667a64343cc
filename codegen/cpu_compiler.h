// The CPU backend of codegen: a Kernel rendered to LLVM IR, optimized with the
// O3 pipeline for the host CPU and compiled by ORC LLJIT (DESIGN.md §6).
//
// This header is all the rest of kiln sees of LLVM: no LLVM type crosses it,
// and every LLVM error becomes a kiln error here. The generated function has
// the CPU kernel ABI of codegen/kernel.h (runtime::CpuKernelFn); its inner
// loop runs along the innermost dimension with constant strides where the
// kernel's InnerStride says so, so that the loop vectorizer can widen it. The
// float operations are plain IEEE ones with no fast-math flags and no FMA
// contraction (Note [Eager equals compiled] in ir/scalar_formulas.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "runtime/executable.h"

namespace kiln::codegen {

/// A kernel compiled for the host CPU. `fn` stays callable while `keepAlive`
/// (or a copy of it) lives; dropping the last copy frees the machine code.
struct CompiledCpuKernel {
  runtime::CpuKernelFn fn = nullptr;
  std::shared_ptr<const void> keepAlive;
  double compileMs = 0;        ///< render + optimize + machine code (or disk load) + link, wall clock
  bool fromDiskCache = false;  ///< loaded from the disk cache (codegen/disk_cache.h), not compiled
};

/// LLVM IR text of the kernel, before (optimized=false) or after the O3
/// pipeline for the host CPU. Throws kiln::InternalError on a malformed kernel.
std::string renderLlvmIr(const Kernel& kernel, bool optimized = false);

/// Renders, optimizes (O3, host CPU and features) and JIT-compiles, or loads
/// the object code from the disk cache when it holds it. Safe to call from
/// several threads. Throws kiln::InternalError on a malformed kernel
/// and kiln::Error naming the kernel when LLVM fails.
CompiledCpuKernel compileCpuKernel(const Kernel& kernel);

/// The disk-cache key of `kernel` without rendering it: the target
/// description, the pipeline, kiln's build ID (codegen/build_id.h) and the
/// kernel's signature; empty when the build has no build ID (then
/// compileCpuKernel keys on the rendered IR).
std::string cpuKernelCacheKey(const Kernel& kernel);

/// "LLVM 19.1.x", the target triple, the host CPU name and its features
/// ("+avx2,+fma,-avx512f,..."): what compiled code depends on besides the
/// kernel itself, so that a disk cache can key on it.
std::string cpuTargetDescription();

/// What compiled CPU kernels are vectorized for (kiln-bench and kiln-env
/// print it).
struct CpuVectorTarget {
  std::string cpu;     ///< LLVM's name of the host CPU ("znver3", "sapphirerapids")
  std::string isa;     ///< the widest vector extension enabled (vectorIsaOf)
  int vectorBits = 0;  ///< the vector width LLVM's vectorizers use for kiln's kernels (their preferred width)
};
CpuVectorTarget cpuVectorTarget();

/// The widest vector extension an LLVM feature list ("+avx2", "-avx512f",
/// ...) enables: "AVX-512", "AVX2", "AVX", "SSE4.2", "SSE2" on x86, "SVE",
/// "NEON" on Arm, else "none".
std::string vectorIsaOf(const std::vector<std::string>& features);

}  // namespace kiln::codegen

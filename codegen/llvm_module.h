// Internal to the CPU backend: what codegen/llvm_renderer.cpp and
// codegen/llvm_reduction.cpp (Kernel to llvm::Module) and
// codegen/llvm_jit.cpp (host target, O3 pipeline, LLJIT) share. Only
// codegen/llvm_*.cpp may include it, since it names LLVM types.
#pragma once

#include <llvm/IR/Function.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel.h"

namespace kiln::codegen::llvmcg {

/// Checks everything rendering relies on (operand indices, params, arity,
/// dtypes, the name); throws kiln::InternalError naming the kernel otherwise.
void validateKernel(const Kernel& kernel);

/// The kernel as an unoptimized module in `context`, for the host target.
/// The kernel must be valid (validateKernel).
std::unique_ptr<llvm::Module> renderModule(const Kernel& kernel, llvm::LLVMContext& context);

/// Adds the exported function of the CPU kernel ABI, `void name(ptr
/// buffers, ptr args, i64 begin, i64 end)`, which loads the buffer pointers
/// and calls `body` (always inlined), whose pointer parameters are
/// `noalias` (llvm_renderer.cpp).
void renderEntry(const Kernel& kernel, llvm::Module& module, llvm::Function* body);

/// Renders reduction kernel `kernel` (reduceRank > 0) into `module`: its
/// body function and the entry (llvm_reduction.cpp).
void renderReduction(const Kernel& kernel, llvm::Module& module);

/// Sets the host triple and data layout (llvm_jit.cpp).
void setHostTarget(llvm::Module& module);

/// Runs the O3 pipeline for the host CPU, vectorizers on (llvm_jit.cpp).
void optimizeModule(llvm::Module& module);

/// Note [Vector width of kiln's kernels] (llvm_vector_width.cpp): asks for
/// `vectorBits`-bit vectors in every function of `module` and sizes the
/// vectorization factor of loops that widen f32 into f64 accumulators by
/// their f32 values. Runs before the O3 pipeline.
void setVectorWidths(llvm::Module& module, int vectorBits);

/// False when KILN_VECTOR_TUNING=llvm leaves vector widths and sums to
/// LLVM's defaults (Note [KILN_VECTOR_TUNING], llvm_jit.cpp).
bool kilnVectorTuning();

/// The vector width kiln's kernels use on a CPU with `features` ("+avx512f",
/// ...), given `preferred`, the width LLVM's tuning for the CPU prefers:
/// 512 wherever AVX-512 is on, else `preferred` (llvm_vector_width.cpp).
int kernelVectorBits(const std::vector<std::string>& features, int preferred);

}  // namespace kiln::codegen::llvmcg

// The CUDA C renderer: turns a codegen::Kernel into the source of one CUDA
// kernel that codegen/nvrtc_compiler.h compiles to a cubin (DESIGN.md §6).
//
// The text is self-contained: it includes no header (NVRTC has no standard
// library by default) and calls no device math library; every elementwise op
// is the builder instantiation of ir/scalar_formulas.h, so a kernel computes
// the same bits as eager and the CPU renderer (Note [Eager equals compiled]),
// provided it is compiled with the flags compileCudaToCubin() uses (no FMA
// contraction, IEEE division and square root, no flush to zero).
//
// Every dtype renders: parameters are `float`, `double`, `int`, `long long`,
// `unsigned short` (f16 and bf16 bits) and `unsigned char` (bool, 0 or 1);
// f16 and bf16 are converted to and from f32 by bit manipulation written
// into the source (ir/scalar_formulas_bits.h), float-to-integer casts
// saturate through explicit compares, integer arithmetic wraps through the
// unsigned types.
//
// ABI (codegen/kernel.h): `extern "C" __global__ void <name>(const T0*
// __restrict__ p0, ..., Tk* __restrict__ pk, KilnArgs_<name> a)` with
//
//   struct KilnArgs_<name> { long long sizes[rank]; long long strides[P][rank];
//                            long long indexStrides[S][rank];  // only when S > 0
//                            long long numel; };
//
// passed by value. Its layout is LaunchArgs::args followed by numel, so the
// runtime fills it with one copy. The body is a grid-stride loop over the
// linear index [0, numel), any grid size is valid.
#pragma once

#include <string>

#include "codegen/kernel.h"

namespace kiln::codegen {

/// The CUDA C source of `kernel`; the same kernel always gives the same text.
/// A malformed kernel (codegen::checkKernel: an operand that is not an
/// earlier value, a load of an output, dtypes that disagree) is a kiln bug
/// (InternalError).
std::string renderCudaC(const Kernel& kernel);

}  // namespace kiln::codegen

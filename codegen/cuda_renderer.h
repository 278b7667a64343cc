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
// ABI (codegen/kernel.h): `extern "C" __global__ void <name>(const float*
// __restrict__ p0, ..., float* __restrict__ pk, KilnArgs_<name> a)` with
//
//   struct KilnArgs_<name> { long long sizes[rank]; long long strides[P][rank];
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
/// Throws kiln::Error naming the kernel when it uses a dtype the renderer does
/// not support yet (only f32 so far); a malformed body (an operand that is not
/// an earlier value, a load of an output) is a kiln bug (InternalError).
std::string renderCudaC(const Kernel& kernel);

}  // namespace kiln::codegen

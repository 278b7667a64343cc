// The library calls of runtime/executable.h on CUDA devices (the CUDA
// target's LibraryFunctions): same buffers and arguments as the CPU's
// (runtime/blas.h, runtime/indexing.h), enqueued on the call's stream.
//
// - matmul: f32, f64, f16 and bf16 through cuBLAS (runtime/cuda_blas.h),
//   after the CPU's batch simplification (size-1 batch dims dropped, a batch
//   over one b folded into the rows); a matrix cuBLAS cannot take as it is
//   (a stride-0 or doubly strided matrix) is first copied to a contiguous
//   one on the device. i32 and i64 run kiln's own kernel: one thread per
//   result, the k products summed in order in the unsigned type, so it wraps
//   and equals the CPU's loop bit for bit.
// - index_select and index_add: kiln's own kernels. Before anything is
//   written, the index is read back to the host and checked, with the CPU's
//   error text (`index_select: index 7 is out of range for dimension 0 of
//   size 5`): this synchronizes the call's stream (a device-side check
//   could not throw before the op writes). index_add copies x to out, then
//   one thread per output column walks the index in order, so repeated
//   indices accumulate in the CPU's order and f16/bf16 round after every
//   addition, as on the CPU: the same bits.
//
// kiln's kernels are one CUDA C program (cudaLibrarySource()), compiled by
// NVRTC for the device's sm_XY on first use, kept in the disk cache, and
// loaded per device and kernel.
#pragma once

#include <string>

#include "runtime/executable.h"

namespace kiln::codegen {

void cudaMatmul(const runtime::LibraryCall& call);
void cudaIndexSelect(const runtime::LibraryCall& call);
void cudaIndexAdd(const runtime::LibraryCall& call);

/// The CUDA C of kiln's library kernels (every entry point `kiln_...`).
const std::string& cudaLibrarySource();

}  // namespace kiln::codegen

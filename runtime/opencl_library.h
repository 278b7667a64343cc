// The library calls of runtime/executable.h on OpenCL devices: the same
// buffers (DevicePtr = {cl_mem, byte offset}) and arguments as the CPU's
// (runtime/blas.h, runtime/indexing.h), enqueued on the call's stream (its
// cl_command_queue) without blocking the host.
// - matmul (runtime/opencl_matmul.cpp): f32 and f64 through CLBlast (Debian
//   libclblast-dev), f16, bf16, i32 and i64 through kiln's one hand-written
//   GEMM kernel (Note [The one hand-written GEMM]).
// - index_select and index_add (runtime/opencl_library.cpp): kiln's own
//   kernels, for every dtype; the index is read back to the host and checked
//   first, the one wait of these calls (Note [OpenCL index checks read the
//   index]), so that an index out of range is the CPU's kiln::Error with
//   nothing written.
// - conv2d, conv_transpose2d and conv2d_backward_weight (runtime/conv.h,
//   runtime/opencl_conv.cpp): kiln's own direct-convolution kernels, for
//   f32, f64 (where the device has cl_khr_fp64), f16 and bf16.
// Their kernels are in runtime/opencl_kernels.cpp (the convolutions' in
// runtime/opencl_conv_kernels.cpp). Without the OpenCL ICD loader in the
// build, each call fails saying so.
#pragma once

#include "runtime/executable.h"

namespace kiln::runtime::opencl {

/// Buffers a, b, out; args MatmulCall::encode().
void matmul(const LibraryCall& call);
/// Buffers x, index, out; args IndexCall::encode().
void indexSelect(const LibraryCall& call);
/// Buffers x, index, source, out; args IndexCall::encode().
void indexAdd(const LibraryCall& call);
/// The three convolution calls: buffers as runtime/conv.h's ConvCall says for
/// its kind; args ConvCall::encode().
void conv(const LibraryCall& call);

}  // namespace kiln::runtime::opencl

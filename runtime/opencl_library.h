// The library calls of runtime/executable.h on OpenCL devices: matmul
// through CLBlast (Debian libclblast-dev), index_select and index_add as
// kiln's own OpenCL kernels. Same buffers and arguments as the CPU's
// (runtime/blas.h, runtime/indexing.h), on the call's stream.
#pragma once

#include "runtime/executable.h"

namespace kiln::runtime::opencl {

void matmul(const LibraryCall& call);
void indexSelect(const LibraryCall& call);
void indexAdd(const LibraryCall& call);

}  // namespace kiln::runtime::opencl

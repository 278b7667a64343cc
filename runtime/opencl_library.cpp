// Library calls on OpenCL devices (runtime/opencl_library.h).
#include "runtime/opencl_library.h"

#include "runtime/error.h"

namespace kiln::runtime::opencl {

void matmul(const LibraryCall& call) { fail("matmul: not yet on {}", call.device.str()); }
void indexSelect(const LibraryCall& call) { fail("index_select: not yet on {}", call.device.str()); }
void indexAdd(const LibraryCall& call) { fail("index_add: not yet on {}", call.device.str()); }

}  // namespace kiln::runtime::opencl

// The CUDA driver API as the files of runtime/ that call it see it (the
// device driver, runtime/cuda_device.cpp, and cuBLAS's matmul,
// runtime/cuda_blas.cpp): a table of entry points resolved once, at a pinned
// ABI version, from the libcuda the probe found (runtime/cuda_driver.h), and
// the device's context and streams. Included only where KILN_HAVE_CUDA is
// set: <cuda.h> gives the types; nothing is linked (Note [The CUDA driver
// is loaded at run time] in runtime/cuda_device.cpp).
#pragma once

#include <cuda.h>

#include <string>

#include "runtime/device_interface.h"
#include "runtime/error.h"

namespace kiln::runtime::cuda {

/// The driver's entry points, each with the signature cuda.h declares for
/// the version kiln asks for (cuda.h maps cuMemAlloc to cuMemAlloc_v2 and so
/// on; decltype of the macro's name is the current ABI).
struct DriverApi {
  std::string error;  ///< why the table is unusable; empty when every required entry point resolved
  int driverVersion = 0;
#define KILN_CUDA_ENTRY(name, version, required) decltype(&::name) name = nullptr;
#include "runtime/cuda_api.def"
#undef KILN_CUDA_ENTRY
};

/// The table, resolved on first use from driver().library with
/// cuGetProcAddress_v2; `error` says why not (no usable driver, a driver
/// older than CUDA 12.0, a missing entry point).
const DriverApi& api();

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or the number when the
/// driver has no name for it.
std::string resultText(CUresult result);

/// Makes the primary context of cuda:`index` current on the calling thread
/// (a no-op when it already is). Every call into the driver on behalf of a
/// device is preceded by it: a thread that never touched CUDA has no
/// current context.
void makeCurrent(int index);

/// The CUstream behind a stream of cuda:`index`; the null handle is the
/// device's default stream (a created, non-blocking stream, not CUDA's
/// legacy NULL stream).
CUstream streamOf(int index, StreamHandle stream);

/// A device address: the allocation's CUdeviceptr plus the byte offset
/// (Note [Device memory is opaque]: on CUDA the offset is added on the host).
inline CUdeviceptr pointerOf(DevicePtr ptr) { return reinterpret_cast<CUdeviceptr>(ptr.handle) + ptr.offset; }

}  // namespace kiln::runtime::cuda

/// Throws kiln::Error naming the call and the CUresult when it fails.
#define KILN_CU(call)                                                                              \
  do {                                                                                             \
    const CUresult kiln_result_ = (call);                                                          \
    if (kiln_result_ != CUDA_SUCCESS) [[unlikely]]                                                 \
      ::kiln::fail("cuda: {} failed: {}", #call, ::kiln::runtime::cuda::resultText(kiln_result_)); \
  } while (0)

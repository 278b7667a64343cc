// The OpenCL objects behind opencl_runtime.h, for the files of runtime/ that
// call OpenCL themselves (the driver, CLBlast's matmul). Included only where
// KILN_HAVE_OPENCL is set.
#pragma once

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <string>

#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/opencl_runtime.h"

namespace kiln::runtime::opencl {

/// The OpenCL error name of `status` ("CL_OUT_OF_RESOURCES"), or its number.
std::string errorName(cl_int status);

/// The device and context of opencl:`index` (made once, alive for the process).
cl_device_id deviceId(int index);
cl_context context(int index);

/// The command queue of a stream of opencl:`index` (null: its default stream).
cl_command_queue queueOf(int index, StreamHandle stream);

/// A cl_mem with an offset: what a DevicePtr is on OpenCL (Note [Device
/// memory is opaque]).
inline cl_mem memOf(DevicePtr ptr) { return static_cast<cl_mem>(ptr.handle); }

}  // namespace kiln::runtime::opencl

/// Throws kiln::Error naming the call and the OpenCL status when it fails.
#define KILN_CL(call)                                                                                       \
  do {                                                                                                      \
    const cl_int kiln_status_ = (call);                                                                     \
    if (kiln_status_ != CL_SUCCESS)                                                                         \
      ::kiln::fail("opencl: {} failed: {}", #call, ::kiln::runtime::opencl::errorName(kiln_status_));       \
  } while (0)

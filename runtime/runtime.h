// The runtime layer's contract (DESIGN.md §1, §7): dtypes, devices, errors,
// logging (KILN_LOG), memory, the thread pool and the Executable that
// codegen produces. It knows nothing of the IR or of tensors.
#pragma once

#include "runtime/allocator.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/device_interface.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/executable.h"
#include "runtime/log.h"
#include "runtime/numeric.h"
#include "runtime/stream.h"
#include "runtime/thread_pool.h"

// Recording on OpenCL (Note [Recorded work] in runtime/device_interface.h):
// launches and copies kept in a cl_khr_command_buffer and replayed with one
// clEnqueueCommandBufferKHR, for the driver (runtime/opencl_device.cpp).
// Included only where KILN_HAVE_OPENCL is set.
//
// Note [Command buffers on PoCL]
// PoCL 3.1 implements cl_khr_command_buffer 0.9 with a bug
// (../shared/DEVICE_NOTES.md): a recorded launch reads its kernel's
// arguments when it is replayed, not when it was recorded, so setting an
// argument of the kernel afterwards (the next launch of the same kernel)
// changes what the replay runs. Every recorded launch therefore gets a
// cl_kernel of its own (clCloneKernel), whose arguments nothing changes
// again, owned by the recording. Replaying while an earlier replay is
// pending needs CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR; a device without it
// makes replay() wait for the previous replay first.
#pragma once

#include <memory>
#include <string>

#include "runtime/opencl_context.h"

namespace kiln::runtime::opencl {

/// Whether opencl:`index` can record: the extension, its entry points and
/// queue properties kiln's queues have; `why` says why not.
bool canRecord(int index, std::string* why);

/// A recording in progress on one queue.
class Recorder {
 public:
  Recorder(int index, cl_command_queue queue);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// Records a launch of `kernel` (a clone with its arguments set, which
  /// the recording now owns) over `global` work-items in groups of `local`.
  void addKernel(cl_kernel kernel, size_t global, size_t local);
  /// Records a copy of `bytes` bytes.
  void addCopy(cl_mem src, size_t srcOffset, cl_mem dst, size_t dstOffset, size_t bytes);
  /// Finalizes the command buffer; the recorder is empty afterwards.
  std::unique_ptr<RecordedWork> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::runtime::opencl

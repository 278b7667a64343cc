// cl_khr_command_buffer behind runtime/opencl_recording.h: the extension's
// entry points, resolved once per device from its platform, and the
// recordings the OpenCL driver makes and replays (Note [Command buffers on
// PoCL] for why each launch has a kernel of its own).
#if KILN_HAVE_OPENCL
#include "runtime/opencl_recording.h"

#include <CL/cl_ext.h>
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <vector>

#include "runtime/opencl_runtime.h"

namespace kiln::runtime::opencl {
namespace {

struct CommandBufferApi {
  std::string error;  ///< why recording is unavailable; empty when it is
  bool simultaneous = false;
  clCreateCommandBufferKHR_fn create = nullptr;
  clFinalizeCommandBufferKHR_fn finalize = nullptr;
  clReleaseCommandBufferKHR_fn release = nullptr;
  clEnqueueCommandBufferKHR_fn enqueue = nullptr;
  clCommandNDRangeKernelKHR_fn ndrange = nullptr;
  clCommandCopyBufferKHR_fn copy = nullptr;
};

CommandBufferApi resolve(int index) {
  CommandBufferApi api;
  const DeviceInfo& info = devices().at(static_cast<size_t>(index));
  if (!info.commandBuffer) {
    api.error = fmt::format("opencl:{} ({}) has no cl_khr_command_buffer", index, info.name);
    return api;
  }
  cl_device_id device = deviceId(index);
  cl_platform_id platform = nullptr;
  KILN_CL(clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr));
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
        clGetExtensionFunctionAddressForPlatform(platform, name));
    if (!fn && api.error.empty()) api.error = fmt::format("opencl:{}: the platform has no {}", index, name);
  };
  get(api.create, "clCreateCommandBufferKHR");
  get(api.finalize, "clFinalizeCommandBufferKHR");
  get(api.release, "clReleaseCommandBufferKHR");
  get(api.enqueue, "clEnqueueCommandBufferKHR");
  get(api.ndrange, "clCommandNDRangeKernelKHR");
  get(api.copy, "clCommandCopyBufferKHR");
  if (!api.error.empty()) return api;
  cl_device_command_buffer_capabilities_khr caps = 0;
  cl_command_queue_properties required = 0;
  KILN_CL(clGetDeviceInfo(device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps, &caps, nullptr));
  KILN_CL(clGetDeviceInfo(device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR, sizeof required, &required,
                          nullptr));
  // kiln's queues are in order, with profiling (runtime/opencl_device.cpp).
  if (required & ~static_cast<cl_command_queue_properties>(CL_QUEUE_PROFILING_ENABLE))
    api.error = fmt::format("opencl:{}: command buffers need queue properties {:#x}", index, required);
  api.simultaneous = (caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR) != 0;
  return api;
}

const CommandBufferApi& apiFor(int index) {
  static std::mutex mutex;
  static std::map<int, CommandBufferApi> apis;
  std::lock_guard lock(mutex);
  auto it = apis.find(index);
  if (it == apis.end()) it = apis.emplace(index, resolve(index)).first;
  return it->second;
}

class OpenCLRecordedWork final : public RecordedWork {
 public:
  OpenCLRecordedWork(const CommandBufferApi& api, cl_command_queue queue, cl_command_buffer_khr buffer,
                     std::vector<cl_kernel> kernels, int commands)
      : api_(api), queue_(queue), buffer_(buffer), kernels_(std::move(kernels)), commands_(commands) {
    clRetainCommandQueue(queue_);
  }
  ~OpenCLRecordedWork() override {
    // A pending replay still runs the kernels and the buffer: let it end.
    clFinish(queue_);
    if (last_) clReleaseEvent(last_);
    api_.release(buffer_);
    for (cl_kernel k : kernels_) clReleaseKernel(k);
    clReleaseCommandQueue(queue_);
  }
  void replay(StreamHandle stream) override {
    (void)stream;  // the queue it was recorded on (the Executable replays there only)
    if (api_.simultaneous) {
      KILN_CL(api_.enqueue(0, nullptr, buffer_, 0, nullptr, nullptr));
    } else {
      if (last_) {
        KILN_CL(clWaitForEvents(1, &last_));
        clReleaseEvent(last_);
        last_ = nullptr;
      }
      KILN_CL(api_.enqueue(0, nullptr, buffer_, 0, nullptr, &last_));
    }
    clFlush(queue_);
  }
  int commands() const override { return commands_; }

 private:
  const CommandBufferApi& api_;
  cl_command_queue queue_;
  cl_command_buffer_khr buffer_;
  std::vector<cl_kernel> kernels_;
  int commands_;
  cl_event last_ = nullptr;
};

}  // namespace

bool canRecord(int index, std::string* why) {
  const CommandBufferApi& api = apiFor(index);
  if (why) *why = api.error;
  return api.error.empty();
}

struct Recorder::State {
  const CommandBufferApi* api = nullptr;
  cl_command_queue queue = nullptr;
  cl_command_buffer_khr buffer = nullptr;
  std::vector<cl_kernel> kernels;
  int commands = 0;
};

Recorder::Recorder(int index, cl_command_queue queue) : state_(std::make_unique<State>()) {
  const CommandBufferApi& api = apiFor(index);
  KILN_ASSERT(api.error.empty(), "opencl:{} asked to record: {}", index, api.error);
  state_->api = &api;
  state_->queue = queue;
  cl_command_buffer_properties_khr props[] = {CL_COMMAND_BUFFER_FLAGS_KHR,
                                              api.simultaneous ? CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR : 0u, 0};
  cl_int status = CL_SUCCESS;
  state_->buffer = api.create(1, &queue, props, &status);
  KILN_CL(status);
}

Recorder::~Recorder() {
  if (!state_) return;
  if (state_->buffer) state_->api->release(state_->buffer);
  for (cl_kernel k : state_->kernels) clReleaseKernel(k);
}

void Recorder::addKernel(cl_kernel kernel, size_t global, size_t local) {
  state_->kernels.push_back(kernel);
  KILN_CL(state_->api->ndrange(state_->buffer, nullptr, nullptr, kernel, 1, nullptr, &global, &local, 0, nullptr,
                               nullptr, nullptr));
  state_->commands++;
}

void Recorder::addCopy(cl_mem src, size_t srcOffset, cl_mem dst, size_t dstOffset, size_t bytes) {
  KILN_CL(
      state_->api->copy(state_->buffer, nullptr, src, dst, srcOffset, dstOffset, bytes, 0, nullptr, nullptr, nullptr));
  state_->commands++;
}

std::unique_ptr<RecordedWork> Recorder::finish() {
  KILN_CL(state_->api->finalize(state_->buffer));
  auto work = std::make_unique<OpenCLRecordedWork>(*state_->api, state_->queue, state_->buffer,
                                                   std::move(state_->kernels), state_->commands);
  state_->buffer = nullptr;
  state_->kernels.clear();
  return work;
}

}  // namespace kiln::runtime::opencl
#endif  // KILN_HAVE_OPENCL

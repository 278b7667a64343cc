// A KernelDevice (gpu_kernel_cases.h) on the first OpenCL device, for the
// tests: programs come from codegen::compileOpenCL's binary (so the binary
// it returns is what runs), each kernel is checked to exist with the ABI's
// argument count and, for reductions, the work-group size it requires;
// launches copy the buffers in and out around a blocking NDRange.
#include "unit/codegen/opencl_test_device.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/opencl_compiler.h"

#if KILN_HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <map>
#endif

namespace kiln::codegen::testing {

#if KILN_HAVE_OPENCL

namespace {

#define CL_OK(call)                                                           \
  do {                                                                        \
    const cl_int status_ = (call);                                            \
    if (status_ != CL_SUCCESS) fail("opencl: {} failed: {}", #call, status_); \
  } while (0)

class OpenCLTestDevice final : public KernelDevice {
 public:
  OpenCLTestDevice() {
    cl_platform_id platforms[8];
    cl_uint count = 0;
    CL_OK(clGetPlatformIDs(8, platforms, &count));
    for (cl_uint i = 0; i < count && !device_; ++i) {
      cl_uint devices = 0;
      if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_ALL, 1, &device_, &devices) != CL_SUCCESS || devices == 0)
        device_ = nullptr;
    }
    KILN_CHECK(device_, "opencl: no device");
    cl_int status = CL_SUCCESS;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &status);
    CL_OK(status);
    queue_ = clCreateCommandQueue(context_, device_, 0, &status);
    CL_OK(status);
  }
  ~OpenCLTestDevice() override {
    for (auto& [name, kernel] : kernels_) clReleaseKernel(kernel);
    if (program_) clReleaseProgram(program_);
    clReleaseCommandQueue(queue_);
    clReleaseContext(context_);
  }

  const CDialect& dialect() const override { return openclDialect(); }
  std::string name() const override { return "opencl: " + openclDeviceDescription(); }

  void build(const std::vector<RenderedKernel>& kernels) override {
    std::string source;
    for (const RenderedKernel& k : kernels) source += k.source + "\n";
    const OpenCLBinary binary = compileOpenCL(source, "kiln_test_program");
    std::cout << "[ info ] " << kernels.size() << " OpenCL kernels built in " << binary.compileMs << " ms ("
              << binary.binary.size() << " bytes)\n";
    const unsigned char* data = binary.binary.data();
    const size_t size = binary.binary.size();
    cl_int status = CL_SUCCESS, binaryStatus = CL_SUCCESS;
    program_ = clCreateProgramWithBinary(context_, 1, &device_, &size, &data, &binaryStatus, &status);
    CL_OK(status);
    CL_OK(binaryStatus);
    CL_OK(clBuildProgram(program_, 1, &device_, nullptr, nullptr, nullptr));
    for (const RenderedKernel& k : kernels) {
      cl_kernel kernel = clCreateKernel(program_, k.name.c_str(), &status);
      EXPECT_EQ(status, CL_SUCCESS) << "no kernel " << k.name << " in the program";
      if (status != CL_SUCCESS) continue;
      kernels_[k.name] = kernel;
      // The ABI: each buffer, then the args struct.
      cl_uint args = 0;
      CL_OK(clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof args, &args, nullptr));
      EXPECT_EQ(args, static_cast<cl_uint>(k.numBuffers + 1)) << k.name;
      size_t required[3] = {0, 0, 0};
      CL_OK(clGetKernelWorkGroupInfo(kernel, device_, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof required, required,
                                     nullptr));
      EXPECT_EQ(required[0], k.launch.localSizeRequired ? static_cast<size_t>(k.launch.localSize) : 0) << k.name;
    }
  }

  void run(const RenderedKernel& k, const Kernel& kernel, std::vector<Buffer>& buffers,
           const std::vector<int>& bufferOf, const std::vector<int64_t>& offsets, const LaunchArgs& launch,
           int64_t groups) override {
    auto it = kernels_.find(k.name);
    KILN_CHECK(it != kernels_.end(), "opencl: kernel {} was not built", k.name);
    cl_kernel entry = it->second;
    std::vector<cl_mem> memory;
    cl_int status = CL_SUCCESS;
    for (Buffer& b : buffers) {
      if (b.empty()) b.resize(1);
      memory.push_back(clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, b.size(), b.data(), &status));
      CL_OK(status);
    }
    for (int p = 0; p < kernel.numParams(); ++p)
      CL_OK(clSetKernelArg(entry, static_cast<cl_uint>(p), sizeof(cl_mem), &memory[static_cast<size_t>(bufferOf[p])]));
    const std::vector<int64_t> words = packGpuArgs(k, launch, offsets);
    CL_OK(
        clSetKernelArg(entry, static_cast<cl_uint>(kernel.numParams()), words.size() * sizeof(int64_t), words.data()));
    if (groups > 0) {
      const size_t local = static_cast<size_t>(k.launch.localSize);
      const size_t global = static_cast<size_t>(groups) * local;
      CL_OK(clEnqueueNDRangeKernel(queue_, entry, 1, nullptr, &global, &local, 0, nullptr, nullptr));
    }
    for (size_t i = 0; i < buffers.size(); ++i)
      CL_OK(clEnqueueReadBuffer(queue_, memory[i], CL_TRUE, 0, buffers[i].size(), buffers[i].data(), 0, nullptr,
                                nullptr));
    for (cl_mem m : memory) clReleaseMemObject(m);
  }

 private:
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  std::map<std::string, cl_kernel> kernels_;
};

}  // namespace

std::unique_ptr<KernelDevice> makeOpenCLTestDevice(std::string* why) {
  if (!openclAvailable(why)) return nullptr;
  return std::make_unique<OpenCLTestDevice>();
}

#else

std::unique_ptr<KernelDevice> makeOpenCLTestDevice(std::string* why) {
  openclAvailable(why);
  return nullptr;
}

#endif

}  // namespace kiln::codegen::testing

// The OpenCL target (codegen/target.h): kernels in the OpenCL C dialect,
// built for the device by its OpenCL compiler (runtime/opencl_runtime.h),
// kept as program binaries in kiln's disk cache, loaded on the OpenCL
// driver (runtime/opencl_device.cpp); matmul through CLBlast and the
// gathers as kiln's own OpenCL kernels (runtime/opencl_library.h).
#include <fmt/format.h>

#include "codegen/gpu_target.h"
#include "runtime/opencl_library.h"
#include "runtime/opencl_runtime.h"

namespace kiln::codegen {

namespace {

class OpenCLTarget final : public GpuTarget {
 public:
  std::string_view name() const override { return "opencl"; }
  std::string description(Device device) const override { return runtime::deviceInterface(device).properties().arch; }
  const LibraryFunctions& libraries() const override {
    // CLBlast enqueues on the queue itself, the index ops wait for their
    // indices and the convolutions enqueue directly: none can be recorded
    // into a command buffer.
    static const LibraryFunctions opencl{
        {&runtime::opencl::matmul}, {&runtime::opencl::indexSelect}, {&runtime::opencl::indexAdd}, {}, {},
        {&runtime::opencl::conv}};
    return opencl;
  }

 protected:
  const CDialect& dialect() const override { return openclDialect(); }
  std::string compilerDescription() const override {
    return fmt::format("clBuildProgram {} (kiln {})", runtime::opencl::kBuildOptions, "program binary");
  }
  runtime::KernelImage::Format objectFormat() const override { return runtime::KernelImage::Format::openclBinary; }
  runtime::KernelImage build(const RenderedKernel& kernel, Device device) const override {
    runtime::opencl::ProgramBinary binary = runtime::opencl::buildProgram(device.index(), kernel.source, kernel.name);
    runtime::KernelImage image;
    image.format = runtime::KernelImage::Format::openclBinary;
    image.name = kernel.name;
    image.bytes = std::move(binary.bytes);
    return image;
  }
};

}  // namespace

const Target& openclTarget() {
  static const OpenCLTarget opencl;
  return opencl;
}

}  // namespace kiln::codegen

// The part of a Target that every C-family GPU device shares
// (codegen/target.h): a kernel is rendered in the device's dialect
// (codegen/c_renderer.h), built into object code by the device's compiler
// — or the object code is loaded from the disk cache (codegen/disk_cache.h)
// under a key of the device's description, the compiler's options and the
// source —, and loaded through the device's driver with the launch ABI's
// facts (Note [The GPU launch ABI] in runtime/device_interface.h). Each
// launch runs the kernel's work-groups of kGpuLocalSize work-items. A
// device kind adds its dialect, its compiler and its library functions
// (codegen/opencl_target.cpp; CUDA's next to it).
#pragma once

#include <string>

#include "codegen/c_renderer.h"
#include "codegen/target.h"

namespace kiln::codegen {

/// Work-groups a launch asks for at most: the kernels' loops stride over
/// the rest (grid-stride loops), so this bounds the launch, not the work.
constexpr int64_t kMaxGpuGroups = 65535;

class GpuTarget : public Target {
 public:
  bool supports(const ir::Node& node, std::string* why) const override;
  CompiledKernel compile(const Kernel& kernel, Device device) const override;
  runtime::LaunchShape launchShape(const Kernel& kernel, const LaunchArgs& launch) const override;

 protected:
  /// The dialect kernels are rendered in.
  virtual const CDialect& dialect() const = 0;
  /// What object code depends on besides the source: the compiler, its
  /// version and options.
  virtual std::string compilerDescription() const = 0;
  /// Builds the rendered source for `device` into object code.
  virtual runtime::KernelImage build(const RenderedKernel& kernel, Device device) const = 0;
  /// The image format of build()'s object code, as stored in the disk cache.
  virtual runtime::KernelImage::Format objectFormat() const = 0;
};

}  // namespace kiln::codegen

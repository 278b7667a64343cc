// GpuTarget (codegen/gpu_target.h): render, build or load from the disk
// cache, load through the driver.
#include "codegen/gpu_target.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "codegen/build_id.h"
#include "codegen/disk_cache.h"
#include "runtime/error.h"
#include "runtime/profiler_events.h"

namespace kiln::codegen {

bool GpuTarget::supports(const ir::Node&, std::string*) const { return true; }

CompiledKernel GpuTarget::compile(const Kernel& kernel, Device device) const {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  runtime::DeviceInterface& driver = runtime::deviceInterface(device);
  if (!driver.properties().fp64) {
    for (const KernelParam& p : kernel.params)
      KILN_CHECK(p.dtype != DType::f64, "{}: kernel {} uses f64, which {} ({}) does not support (no cl_khr_fp64)",
                 device.str(), kernel.name, device.str(), driver.properties().name);
  }
  std::optional<profiler::RecordFunction> render(std::in_place, "codegen", "render");
  const RenderedKernel rendered = renderGpuKernel(kernel, dialect());
  render.reset();
  const std::string key =
      fmt::format("{}\n{}\n{}\n{}", name(), driver.properties().arch, compilerDescription(), rendered.source);
  DiskCache& disk = DiskCache::instance();
  runtime::KernelImage image;
  std::optional<std::string> object = disk.load(key);
  const bool fromDisk = object.has_value();
  if (fromDisk) {
    image.format = objectFormat();
    image.name = rendered.name;
    image.bytes.assign(object->begin(), object->end());
  } else {
    profiler::RecordFunction range("codegen", "build");
    if (range.event()) [[unlikely]]
      range.event()->detail = rendered.name;
    image = build(rendered, device);
    disk.store(key, std::string_view(reinterpret_cast<const char*>(image.bytes.data()), image.bytes.size()));
  }
  for (const KernelParam& p : kernel.params)
    image.paramElementBytes.push_back(static_cast<uint32_t>(itemSize(p.dtype)));
  image.offsetsInArgs = dialect().offsetsInArgs();
  CompiledKernel out;
  out.module = driver.loadModule(image);
  out.fromDiskCache = fromDisk;
  out.compileMs = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return out;
}

runtime::LaunchShape GpuTarget::launchShape(const Kernel& kernel, const LaunchArgs& launch) const {
  return gpuLaunchOf(kernel).shape(launch.numel, kMaxGpuGroups);
}

}  // namespace kiln::codegen

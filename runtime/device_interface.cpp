// The registry of device drivers (runtime/device_interface.h) and Buffer,
// the memory a driver hands out.
#include "runtime/device_interface.h"

#include <mutex>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/pinned_memory.h"
#include "runtime/stream.h"

namespace kiln::runtime {

namespace {
struct Registry {
  std::mutex mutex;
  std::vector<DeviceDriver> drivers;
  /// Opened devices, per driver: made on first use, alive for the process
  /// (kernels and buffers may be released during static destruction).
  std::vector<std::vector<DeviceInterface*>> open;
};

Registry& registry() {
  static auto* r = new Registry();  // leaked on purpose, as the devices are
  return *r;
}

/// Why `device` cannot be used, or empty; the driver found for its kind.
std::string unusable(Device device, const DeviceDriver** found) {
  Registry& r = registry();
  for (const DeviceDriver& d : r.drivers) {
    if (d.type != device.type()) continue;
    *found = &d;
    std::string why;
    if (d.available && !d.available(&why)) return why;
    const int count = d.count ? d.count() : 0;
    if (device.index() < 0 || device.index() >= count)
      return fmt::format("no such device (this process sees {} {} device{})", count, d.name, count == 1 ? "" : "s");
    return {};
  }
  return device.isOpenCL() ? "this build of kiln has no OpenCL driver (it was built without the OpenCL ICD loader, "
                             "Debian ocl-icd-opencl-dev)"
                           : "no driver for this kind of device";
}
}  // namespace

KernelImage KernelImage::hostFunction(std::string name, CpuKernelFn fn, std::shared_ptr<const void> keepAlive) {
  KernelImage image;
  image.format = Format::hostFunction;
  image.name = std::move(name);
  image.hostFn = fn;
  image.keepAlive = std::move(keepAlive);
  return image;
}

void registerDeviceDriver(const DeviceDriver& driver) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (size_t i = 0; i < r.drivers.size(); ++i) {
    if (r.drivers[i].type != driver.type) continue;
    for (const DeviceInterface* opened : r.open[i])
      KILN_ASSERT(!opened, "the {} driver replaced by {} after a device was opened", r.drivers[i].name, driver.name);
    r.drivers[i] = driver;
    r.open[i].clear();
    return;
  }
  r.drivers.push_back(driver);
  r.open.emplace_back();
}

void registerCpuDriver();     // runtime/cpu_device.cpp
void registerOpenCLDriver();  // runtime/opencl_device.cpp
void registerCudaDriver();    // runtime/cuda_device.cpp

namespace {
/// The drivers built into libkiln, registered on first use of the registry.
void registerBuiltinDrivers() {
  registerCpuDriver();
  registerOpenCLDriver();
  registerCudaDriver();
}
}  // namespace

bool isDeviceAvailable(Device device, std::string* why) {
  if (device == Device::cpu()) {  // the hot path: every eager scalar asks
    if (why) why->clear();
    return true;
  }
  registerBuiltinDrivers();
  std::lock_guard lock(registry().mutex);
  const DeviceDriver* driver = nullptr;
  std::string reason = unusable(device, &driver);
  if (why) *why = reason;
  return reason.empty();
}

int deviceCount(DeviceType type) {
  registerBuiltinDrivers();
  std::lock_guard lock(registry().mutex);
  for (const DeviceDriver& d : registry().drivers) {
    if (d.type != type) continue;
    if (d.available && !d.available(nullptr)) return 0;
    return d.count ? d.count() : 0;
  }
  return 0;
}

DeviceInterface& deviceInterface(Device device) {
  if (device == Device::cpu()) {
    // The hot path (every eager op's buffers): no lock.
    static DeviceInterface* const cpu = [] {
      registerCpuDriver();
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      const DeviceDriver* driver = nullptr;
      KILN_ASSERT(unusable(Device::cpu(), &driver).empty(), "the cpu driver is not usable");
      return driver->open(0).release();
    }();
    return *cpu;
  }
  registerBuiltinDrivers();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const DeviceDriver* driver = nullptr;
  const std::string why = unusable(device, &driver);
  KILN_CHECK(why.empty(), "{}: the device cannot be used: {}", device.str(), why);
  std::vector<DeviceInterface*>& open = r.open[static_cast<size_t>(driver - r.drivers.data())];
  if (open.size() <= static_cast<size_t>(device.index())) open.resize(static_cast<size_t>(device.index()) + 1);
  DeviceInterface*& slot = open[static_cast<size_t>(device.index())];
  KILN_ASSERT(!device.isCpu(), "the cpu is opened on the hot path only");
  if (!slot) slot = driver->open(device.index()).release();
  return *slot;
}

Buffer::Buffer(Device device, size_t bytes)
    : device_(device),
      bytes_(bytes),
      driver_(&deviceInterface(device)),
      base_(driver_->allocate(bytes, device.isCpu() ? StreamHandle{} : currentStream(device).handle())) {}

Buffer::Buffer(Pinned, size_t bytes)
    : device_(Device::cpu()),
      bytes_(bytes),
      driver_(&deviceInterface(Device::cpu())),
      base_{PinnedAllocator::instance().allocate(bytes), 0},
      pinned_(true) {}

Buffer::~Buffer() {
  if (pinned_)
    PinnedAllocator::instance().release(base_.handle);
  else
    driver_->free(base_);
}

void* Buffer::hostData() const {
  KILN_ASSERT(driver_->properties().hostAccessible, "host address asked of a buffer on {}", device_.str());
  return hostAddress(base_);
}

std::shared_ptr<Buffer> allocateBuffer(Device device, size_t bytes) { return std::make_shared<Buffer>(device, bytes); }

std::shared_ptr<Buffer> allocatePinnedBuffer(size_t bytes) { return std::make_shared<Buffer>(Buffer::Pinned{}, bytes); }

bool DeviceInterface::canRecord(std::string* why) const {
  if (why) *why = device().str() + " does not record launches";
  return false;
}

void DeviceInterface::beginRecording(StreamHandle) {
  KILN_ASSERT(false, "{} was asked to record launches, which it cannot", device().str());
}

std::unique_ptr<RecordedWork> DeviceInterface::endRecording(StreamHandle) {
  KILN_ASSERT(false, "{} was asked to end a recording it cannot make", device().str());
  return nullptr;
}

}  // namespace kiln::runtime

// Streams and events of runtime/stream.h, over the device interface.
#include "runtime/stream.h"

#include <vector>

#include "runtime/error.h"

namespace kiln {

namespace {
/// The calling thread's current streams, one per device that has one set.
std::vector<Stream>& currentStreams() {
  thread_local std::vector<Stream> streams;
  return streams;
}
}  // namespace

Stream Stream::defaultStream(Device device) {
  runtime::deviceInterface(device);  // an error naming why, for a device that cannot be used
  return Stream(device, {}, nullptr);
}

Stream Stream::create(Device device) {
  runtime::DeviceInterface& driver = runtime::deviceInterface(device);
  const runtime::StreamHandle handle = driver.createStream();
  std::shared_ptr<void> owner(handle.native, [&driver, handle](void*) { driver.destroyStream(handle); });
  return Stream(device, handle, std::move(owner));
}

bool Stream::query() const { return runtime::deviceInterface(device_).queryStream(handle_); }
void Stream::synchronize() const { runtime::deviceInterface(device_).synchronizeStream(handle_); }

void Stream::wait(const Event& event) const {
  if (!event.recorded()) return;
  KILN_CHECK(event.device() == device_, "stream: cannot wait on {} for an event recorded on {}", device_.str(),
             event.device().str());
  runtime::deviceInterface(device_).waitEvent(handle_, event.handle());
}

Stream currentStream(Device device) {
  for (const Stream& s : currentStreams())
    if (s.device() == device) return s;
  return Stream::defaultStream(device);
}

void setCurrentStream(const Stream& stream) {
  for (Stream& s : currentStreams()) {
    if (s.device() == stream.device()) {
      s = stream;
      return;
    }
  }
  currentStreams().push_back(stream);
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(currentStream(stream.device())) { setCurrentStream(stream); }
StreamGuard::~StreamGuard() { setCurrentStream(previous_); }

void synchronize(Device device) { runtime::deviceInterface(device).synchronize(); }

Event::Event(bool enableTiming) : state_(std::make_shared<State>()) { state_->timing = enableTiming; }

Event::State::~State() {
  if (handle.native) runtime::deviceInterface(device).destroyEvent(handle);
}

void Event::record(const Stream& stream) {
  runtime::DeviceInterface& driver = runtime::deviceInterface(stream.device());
  if (!state_->handle.native) {
    state_->handle = driver.createEvent(state_->timing);
    state_->device = stream.device();
  }
  KILN_CHECK(state_->device == stream.device(), "event: recorded on {} before, cannot record it on {}",
             state_->device.str(), stream.device().str());
  driver.recordEvent(state_->handle, stream.handle());
  state_->recorded = true;
}

void Event::record(Device device) { record(currentStream(device)); }

bool Event::query() const {
  return !state_->recorded || runtime::deviceInterface(state_->device).queryEvent(state_->handle);
}

void Event::synchronize() const {
  if (state_->recorded) runtime::deviceInterface(state_->device).synchronizeEvent(state_->handle);
}

double Event::elapsedMs(const Event& end) const {
  KILN_CHECK(state_->timing && end.state_->timing, "event: elapsedMs needs two events made with enableTiming");
  KILN_CHECK(state_->recorded && end.state_->recorded, "event: elapsedMs needs two recorded events");
  KILN_CHECK(state_->device == end.state_->device, "event: elapsedMs of events on {} and {}", state_->device.str(),
             end.state_->device.str());
  KILN_CHECK(query() && end.query(), "event: elapsedMs of an event whose work has not finished (synchronize first)");
  return runtime::deviceInterface(state_->device).elapsedMs(state_->handle, end.state_->handle);
}

}  // namespace kiln

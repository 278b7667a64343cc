// Device parsing and printing, and CUDA availability (asked of the driver registry).
#include "runtime/device.h"

#include <charconv>

#include "runtime/device_interface.h"
#include "runtime/error.h"

namespace kiln {

std::string Device::str() const { return isCpu() ? std::string("cpu") : fmt::format("cuda:{}", index_); }

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    auto digits = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && !digits.empty())
      return cuda(index);
  }
  fail("device: cannot parse '{}', expected cpu, cuda or cuda:N", text);
}

bool cudaAvailable(std::string* why) { return runtime::isDeviceAvailable(Device::cuda(0), why); }

Device Device::best() { return cudaAvailable() ? cuda(0) : cpu(); }

}  // namespace kiln

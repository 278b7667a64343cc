// CPU buffers of f32 values for the tests that run runtime::Executables
// directly (tests/unit/codegen): made from a vector, read back into one.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "runtime/buffer.h"

namespace kiln::testing {

/// A CPU buffer holding `v`.
inline std::shared_ptr<runtime::Buffer> hostFloats(const std::vector<float>& v) {
  auto b = runtime::allocateBuffer(Device::cpu(), v.size() * sizeof(float));
  std::memcpy(b->hostData(), v.data(), v.size() * sizeof(float));
  return b;
}

/// `n` floats of CPU buffer `b`, from element `from`.
inline std::vector<float> readFloats(const std::shared_ptr<runtime::Buffer>& b, size_t n, size_t from = 0) {
  std::vector<float> v(n);
  std::memcpy(v.data(), static_cast<const float*>(b->hostData()) + from, n * sizeof(float));
  return v;
}

}  // namespace kiln::testing

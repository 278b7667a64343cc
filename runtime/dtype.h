// DType: the element types kiln knows, their names and sizes.
//
// The enum holds every dtype kiln will support; which ops accept which dtype is
// decided by the op registry (ir/), not here. Text names are the ones the IR
// printer writes: f32, f16, bf16, f64, i32, i64, bool.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  f32,
  f16,
  bf16,
  f64,
  i32,
  i64,
  boolean,
};

inline constexpr int kNumDTypes = 7;

/// Short text name: "f32", "bf16", "bool", ...
std::string_view dtypeName(DType dtype);
/// Parses a short text name; std::nullopt when unknown.
std::optional<DType> parseDType(std::string_view name);
/// Bytes per element.
int64_t itemSize(DType dtype);
bool isFloatingPoint(DType dtype);

}  // namespace kiln

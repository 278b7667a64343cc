// Typed node attributes: int, float, string, int list, dtype (DESIGN.md §4).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/dtype.h"

namespace kiln::ir {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, DType>;
/// Attributes by name; a std::map so that printing and hashing are ordered.
using Attributes = std::map<std::string, AttrValue>;

/// The attribute as the printer writes it: 3, 1.0e-05, "text", [1, 2], f32.
std::string attrStr(const AttrValue& value);

/// The float attribute `name`; throws kiln::Error naming `op` when missing or
/// of another kind.
double floatAttr(const Attributes& attrs, const char* name, std::string_view op);
/// The int-list attribute `name`; throws kiln::Error naming `op` when missing
/// or of another kind.
const std::vector<int64_t>& intListAttr(const Attributes& attrs, const char* name, std::string_view op);
/// The int attribute `name`, or `fallback` when it is missing and a fallback
/// is given; throws kiln::Error naming `op` when missing without one or of
/// another kind.
int64_t intAttr(const Attributes& attrs, const char* name, std::string_view op,
                std::optional<int64_t> fallback = std::nullopt);

}  // namespace kiln::ir

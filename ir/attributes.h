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
/// A number attribute as written: an integer (exact over all of int64) or a
/// float. A `constant`'s `value` is one (Note [Integer constants are exact]).
using Number = std::variant<int64_t, double>;
/// Attributes by name; a std::map so that printing and hashing are ordered.
using Attributes = std::map<std::string, AttrValue>;

/// The attribute as the printer writes it: 3, 1.0e-05, "text", [1, 2], f32.
std::string attrStr(const AttrValue& value);

/// The float attribute `name`; throws kiln::Error naming `op` when missing or
/// of another kind.
double floatAttr(const Attributes& attrs, const char* name, std::string_view op);
/// The int or float attribute `name` as it is, an integer never converted
/// to a double; throws kiln::Error naming `op` when missing or of another kind.
Number numberAttr(const Attributes& attrs, const char* name, std::string_view op);

/// Note [Integer constants are exact]
/// An integer scalar keeps all 64 bits from the frontend to the kernel, as
/// eager code keeps them (`x == 2^60 + 2` in kiln::compile matches what it
/// matches eagerly): the trace writes a `constant` of an integer or bool
/// dtype with an int `value` (frontend/dispatch.cpp), the printer and the
/// parser keep it (an int has no '.'), fold-constants computes on exact
/// integers and writes them back as ints, lowering keeps the int in the
/// ScalarInstr (codegen/kernel.h), and every builder of the scalar formulas
/// makes it with intConstant() (ir/scalar_formulas.h, emitConstant), never
/// through a double. A constant of a float dtype holds a double: an integer
/// scalar rounded once to the dtype, as eager code stores it
/// (runtime::storeIntAs), so printed forms of float constants are unchanged.
/// constantValue() is the one place that says which form a dtype takes.

/// `value` in the form a constant of `dtype` holds it: for i32, i64 and
/// bool an int64 (an integer as `cast` converts an i64: i32 wraps, bool is
/// v != 0; a float as `cast` converts an f64: toward zero, saturating, NaN
/// 0, bool v != 0); for floats a double (a float as it is, which kernels
/// round to the dtype; an integer rounded once to f32 for f32, f16 and
/// bf16, which kernels round again, or to f64).
Number constantValue(const Number& value, DType dtype);
/// constantValue() of the `value` attribute of a constant node of `dtype`;
/// throws kiln::Error when it is missing or not a number.
Number constantValue(const Attributes& attrs, DType dtype);

/// The int-list attribute `name`; throws kiln::Error naming `op` when missing
/// or of another kind.
const std::vector<int64_t>& intListAttr(const Attributes& attrs, const char* name, std::string_view op);
/// The int attribute `name`, or `fallback` when it is missing and a fallback
/// is given; throws kiln::Error naming `op` when missing without one or of
/// another kind.
int64_t intAttr(const Attributes& attrs, const char* name, std::string_view op,
                std::optional<int64_t> fallback = std::nullopt);

}  // namespace kiln::ir

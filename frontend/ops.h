// The eager op functions of kiln, like libtorch's: kiln::relu(x), x + y,
// kiln::maximum(x, 0.5), x < y, kiln::where(c, x, y). Each goes through
// detail::dispatch(), so every op here runs eagerly and traces under
// kiln::compile alike. Binary ops broadcast per NumPy rules, and operands of
// different dtypes promote as in PyTorch (frontend/promotion.h): a C++
// number on either side counts as a Python scalar (i32 tensor * 2 stays i32,
// i32 tensor * 2.5 is f32, f16 tensor * 2.0 stays f16).
#pragma once

#include <type_traits>

#include "frontend/dispatch.h"
#include "frontend/tensor.h"

namespace kiln {

using detail::Operand;

// Binary; either side may be a scalar (not both).
Tensor add(const Operand& a, const Operand& b);
Tensor sub(const Operand& a, const Operand& b);
Tensor mul(const Operand& a, const Operand& b);
/// True division: integer and bool operands promote to f32.
Tensor div(const Operand& a, const Operand& b);
/// Elementwise maximum; NaN in either input gives NaN, as torch.maximum.
/// On bool it is logical or.
Tensor maximum(const Operand& a, const Operand& b);
/// Elementwise minimum; NaN in either input gives NaN. On bool it is logical and.
Tensor minimum(const Operand& a, const Operand& b);

// Comparisons: bool results, operands promoted to one dtype first. NaN
// compares false, except in ne.
Tensor eq(const Operand& a, const Operand& b);
Tensor ne(const Operand& a, const Operand& b);
Tensor lt(const Operand& a, const Operand& b);
Tensor le(const Operand& a, const Operand& b);
Tensor gt(const Operand& a, const Operand& b);
Tensor ge(const Operand& a, const Operand& b);

/// `a` where `condition` (a bool tensor) holds, else `b`; the three
/// broadcast together, and a and b promote to one dtype.
Tensor where(const Tensor& condition, const Operand& a, const Operand& b);
/// minimum(maximum(x, min), max): NaN in x, min or max gives NaN, and the
/// result has the promoted dtype of the three, as torch.clamp.
Tensor clamp(const Tensor& x, const Operand& min, const Operand& max);

// Unary. exp, log, sqrt, tanh and sigmoid of an integer or bool tensor are f32.
Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);

/// A C++ number, which may stand on either side of a tensor operator.
template <typename S>
concept Scalar = std::is_arithmetic_v<S>;

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, Scalar auto b) { return add(a, b); }
inline Tensor operator+(Scalar auto a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, Scalar auto b) { return sub(a, b); }
inline Tensor operator-(Scalar auto a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, Scalar auto b) { return mul(a, b); }
inline Tensor operator*(Scalar auto a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, Scalar auto b) { return div(a, b); }
inline Tensor operator/(Scalar auto a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

// Comparison operators give bool tensors, as in libtorch.
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator==(const Tensor& a, Scalar auto b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator!=(const Tensor& a, Scalar auto b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<(const Tensor& a, Scalar auto b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator<=(const Tensor& a, Scalar auto b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>(const Tensor& a, Scalar auto b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator>=(const Tensor& a, Scalar auto b) { return ge(a, b); }

}  // namespace kiln

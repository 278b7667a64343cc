// The eager op functions of kiln, like libtorch's: kiln::relu(x), x + y,
// kiln::maximum(x, 0.5), x < y, kiln::where(c, x, y). Each goes through
// detail::dispatch(), so every op here runs eagerly and traces under
// kiln::compile alike. Binary ops broadcast per NumPy rules, and operands of
// different dtypes promote as in PyTorch (frontend/promotion.h): a C++
// number on either side counts as a Python scalar (i32 tensor * 2 stays i32,
// i32 tensor * 2.5 is f32, f16 tensor * 2.0 stays f16).
#pragma once

#include <optional>
#include <string_view>
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
/// `base` to the power `exponent`, as torch.pow: either side may be a
/// scalar, and they promote as in PyTorch (i32[n] ^ 2 is i32, i32[n] ^ 0.5
/// is f32). Floats follow C's pow at the special values (pow(x, 0) = 1 even
/// for NaN x, a negative base to a non-integer power is NaN); integers
/// multiply by repeated squaring, wrapping, with 0^0 = 1, and an integer
/// tensor to a negative integer scalar power is an error, as in PyTorch
/// (docs/ops.md). bool ^ bool is an error.
Tensor pow(const Operand& base, const Operand& exponent);

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
/// minimum(maximum(x, min), max): NaN in x, min or max gives NaN, min >
/// max gives max, and the result has the promoted dtype of the three, as
/// torch.clamp. Either bound may be left out (std::nullopt), not both.
/// Gradients as PyTorch 2.x's (Note [Clamp gradients] in ops.cpp): number
/// bounds give x the gradient strictly inside them only (0 at a bound);
/// tensor bounds split it between x and the bound x ties.
Tensor clamp(const Tensor& x, const std::optional<Operand>& min, const std::optional<Operand>& max);

// Unary. exp, log, sqrt, tanh, sigmoid, rsqrt, sin, cos, erf, silu, gelu and softplus
// of an integer or bool tensor are f32.
Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
/// |x|; abs(-0) = +0, integers wrap (abs(INT_MIN) = INT_MIN); bool is an error, as in PyTorch.
Tensor abs(const Tensor& x);
/// 1 / sqrt(x).
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor erf(const Tensor& x);
/// x * sigmoid(x).
Tensor silu(const Tensor& x);
/// x/2 (1 + erf(x / sqrt 2)); with `approximate` "tanh", x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x³))),
/// as torch.nn.functional.gelu. Another `approximate` is an error.
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
/// log(1 + exp(beta x)) / beta, or x where beta x > threshold, as
/// torch.nn.functional.softplus (docs/ops.md gives its accuracy).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/// x, once `after` has been computed; inside kiln::compile no pass looks
/// through it (cse does not merge what reads it with what reads x, fusion
/// does not join the two sides), as jax.lax.optimization_barrier. `after`
/// is any tensor with an element (its first one is the op's operand; it
/// gets no gradient). Eagerly a copy of x.
Tensor optimizationBarrier(const Tensor& x, const Tensor& after);

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

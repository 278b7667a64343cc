// The eager op functions of kiln, like libtorch's: kiln::relu(x), x + y,
// kiln::maximum(x, 0.5). Each goes through detail::dispatch(), so every op
// here runs eagerly and traces under kiln::compile alike. Binary ops
// broadcast per NumPy rules; a scalar operand takes the tensor's dtype.
#pragma once

#include "frontend/dispatch.h"
#include "frontend/tensor.h"

namespace kiln {

using detail::Operand;

// Binary; either side may be a scalar (not both).
Tensor add(const Operand& a, const Operand& b);
Tensor sub(const Operand& a, const Operand& b);
Tensor mul(const Operand& a, const Operand& b);
Tensor div(const Operand& a, const Operand& b);
/// Elementwise maximum; NaN in either input gives NaN, as torch.maximum.
Tensor maximum(const Operand& a, const Operand& b);
Tensor minimum(const Operand& a, const Operand& b);

// Unary.
Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator-(double a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator/(double a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace kiln

// Matrix products, like libtorch's: kiln::matmul(a, b) with torch.matmul's
// semantics and kiln::linear(x, weight, bias) as torch.nn.functional.linear.
// Both are the registry's `matmul` op (a library call: OpenBLAS on the CPU,
// runtime/blas.h), so they run eagerly and trace under kiln::compile alike,
// and compiled code makes the same BLAS call as eager code.
#pragma once

#include "frontend/tensor.h"

namespace kiln {

/// The matrix product of a and b, as torch.matmul:
/// - 1-d · 1-d: the dot product, a 0-d tensor;
/// - 2-d · 2-d: the matrix product;
/// - 1-d · n-d: a is a row [1, K] whose added dim is removed afterwards;
///   n-d · 1-d: b is a column [K, 1], likewise;
/// - otherwise a batched product over the dims before the last two, which
///   broadcast (NumPy rules): [j, 1, n, m] · [k, m, p] is [j, k, n, p].
/// Operands must have one dtype (no promotion, as in PyTorch) other than
/// bool, and sit on one device. A mistake is a kiln::Error naming the
/// shapes: `matmul: shapes f32[2,3]@cpu and f32[4,5]@cpu cannot be
/// multiplied (3 != 4)`. f16 and bf16 multiply in f32 and round each result
/// once; integers wrap.
Tensor matmul(const Tensor& a, const Tensor& b);

/// x · weightᵀ + bias, as torch.nn.functional.linear: x is [..., in] (1-d
/// included), weight [out, in], bias (undefined: none) [out] or anything
/// that broadcasts to [..., out]; all three of one dtype. The weight is read
/// transposed by BLAS, not copied.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace kiln

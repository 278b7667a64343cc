// Gathers and scatters along one dim, like libtorch's: kiln::indexSelect,
// kiln::indexAdd and kiln::embedding (torch.index_select, torch.index_add,
// torch.nn.functional.embedding). indexSelect and indexAdd are the
// registry's index_select and index_add ops, library calls of the runtime
// (runtime/indexing.h); embedding is built on indexSelect. They run eagerly
// and trace under kiln::compile alike.
//
// Indices are i64 or i32. An index out of range is a kiln::Error naming the
// index and the size (`index_select: index 7 is out of range for dimension
// 0 of size 5`), raised before anything is written; since it depends on the
// data, a compiled program raises it when it runs.
#pragma once

#include <cstdint>

#include "frontend/tensor.h"

namespace kiln {

/// The slices of x at `index` (1-d) along `dim` (negative counts from the
/// end), in index order, repeats allowed: the result is x's shape with
/// index.numel() at `dim`.
Tensor indexSelect(const Tensor& x, int64_t dim, const Tensor& index);

/// A copy of x with source's slice j added to slice index[j] along `dim`,
/// as torch.index_add (out of place, alpha 1): repeated indices accumulate,
/// in index order. source has x's dtype and shape, except index.numel() at
/// `dim`. Not for bool.
Tensor indexAdd(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);

/// The rows of `weight` [num, dim] at `indices` (any shape): the result is
/// indices' shape followed by dim, as torch.nn.functional.embedding (no
/// padding_idx, no max_norm).
Tensor embedding(const Tensor& weight, const Tensor& indices);

}  // namespace kiln

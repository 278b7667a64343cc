// Gathers and scatters by an index tensor: the index_select and index_add
// library calls of runtime/executable.h (the forward and backward of an
// embedding). Plain C++ loops over the ThreadPool; every dtype.
//
// - index_select: out[..., j, ...] = x[..., index[j], ...] along `dim`; out
//   is contiguous, x is read through its strides, one row (the elements
//   after `dim`) at a time, parallel over rows.
// - index_add: out = x, then out[..., index[j], ...] += source[..., j, ...]
//   for j = 0, 1, ... in order, so repeated indices accumulate, each in the
//   order of j whatever the thread count: the threads split the elements
//   after `dim` (and the dims before it), never the index. Floats add as
//   kiln's `add` does (f16 and bf16 in f32, rounded after every addition),
//   integers wrap.
//
// Both check every index (0 <= index < size of `dim`) before they write
// anything, and throw kiln::Error naming the op, the index, the dim and its
// size otherwise: `index_select: index 7 is out of range for dimension 0 of
// size 5`. The index is i32 or i64, one-dimensional, read through its stride.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/dtype.h"

namespace kiln::runtime {

/// The arguments of an index_select or index_add call. `sizes` and
/// `strides` are x's (index_add: also out's sizes); `sourceStrides` are
/// source's (index_add only; source's sizes are x's with numIndices at dim).
struct IndexCall {
  DType dtype = DType::f32;  ///< of x (and source, and out)
  DType indexDType = DType::i64;
  int64_t dim = 0;
  std::vector<int64_t> sizes, strides;
  int64_t numIndices = 0, indexStride = 1;
  std::vector<int64_t> sourceStrides;

  std::vector<int64_t> encode() const;
  static IndexCall decode(std::span<const int64_t> args);
};

/// The library call (LibraryFn): buffers x, index, out; args IndexCall::encode().
void indexSelect(std::span<void* const> buffers, std::span<const int64_t> args);
/// The library call (LibraryFn): buffers x, index, source, out; args IndexCall::encode().
void indexAdd(std::span<void* const> buffers, std::span<const int64_t> args);

}  // namespace kiln::runtime

// Strided layouts: where the elements of a value of some shape sit in a
// buffer (strides in elements, one per dimension, and an offset), and how
// each movement op maps the layout of its input to the layout of its result
// when the result can be a view of the same buffer. The frontend computes
// its views with these functions, the fusion pass decides with them which
// movement ops a kernel can read through, and lowering turns them into the
// strides a kernel walks: one definition of what a view is.
//
// Strides are never negative (no op flips), and a stride of 0 repeats an
// element (expand). Layouts do not know the dtype: offsets count elements.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "ir/types.h"

namespace kiln::ir {

using Strides = std::vector<int64_t>;

struct Layout {
  Strides strides;     ///< one per dimension, in elements
  int64_t offset = 0;  ///< of element [0, ..., 0], in elements
  friend bool operator==(const Layout&, const Layout&) = default;
};

/// Row-major strides of `shape`: the last dimension has stride 1, each other
/// the product of the sizes after it (a size-0 dimension counts as 1, as in
/// PyTorch, so that strides stay distinct).
Strides contiguousStrides(const Shape& shape);
Layout contiguousLayout(const Shape& shape);

/// Whether `strides` walk `shape` in row-major order without gaps. Strides of
/// size-1 dimensions do not matter, and an empty shape is contiguous (as
/// PyTorch's is_contiguous).
bool isContiguous(const Shape& shape, const Strides& strides);

/// Elements from the first element to one past the last one a layout of
/// `shape` reaches (0 when the shape is empty): the buffer a view needs
/// beyond its offset.
int64_t extent(const Shape& shape, const Strides& strides);

/// Strides that read the elements of (shape, strides), in row-major order,
/// as `newShape`, or std::nullopt when no strides can (PyTorch's
/// computeStride: a run of dimensions that is merged or split must be
/// contiguous within itself). The element counts must agree.
std::optional<Strides> viewStrides(const Shape& shape, const Strides& strides, const Shape& newShape);

/// The layout of the result of view op `op` (ir::isViewOp; its attributes as
/// inferType accepts them) on an input of `shape` laid out as `in`;
/// std::nullopt when it cannot be a view (a reshape whose runs are not
/// contiguous).
std::optional<Layout> movedLayout(Op op, const Attributes& attrs, const Shape& shape, const Layout& in);

}  // namespace kiln::ir

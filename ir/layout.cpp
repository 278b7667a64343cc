// Strided layouts and the views of movement ops (ir/layout.h).
#include "ir/layout.h"

#include <algorithm>

#include "runtime/error.h"

namespace kiln::ir {

Strides contiguousStrides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

Layout contiguousLayout(const Shape& shape) { return {contiguousStrides(shape), 0}; }

bool isContiguous(const Shape& shape, const Strides& strides) {
  KILN_ASSERT(shape.size() == strides.size(), "layout of rank {} for a shape of rank {}", strides.size(), shape.size());
  if (numel(shape) == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t extent(const Shape& shape, const Strides& strides) {
  if (numel(shape) == 0) return 0;
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
  return last + 1;
}

std::optional<Strides> viewStrides(const Shape& shape, const Strides& strides, const Shape& newShape) {
  KILN_ASSERT(numel(shape) == numel(newShape), "viewStrides from {} to {}", shapeStr(shape), shapeStr(newShape));
  // One element, or none: any strides read it; take the contiguous ones.
  if (shape.empty() || newShape.empty() || numel(shape) <= 1) return contiguousStrides(newShape);
  // PyTorch's computeStride: walk the old dimensions from the innermost,
  // cutting them into chunks that are contiguous within themselves; each
  // chunk must be covered exactly by a run of new dimensions.
  Strides out(newShape.size());
  int64_t viewD = static_cast<int64_t>(newShape.size()) - 1;
  int64_t chunkBase = strides.back();
  int64_t tensorNumel = 1, viewNumel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensorNumel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] == 1)) {
        out[viewD] = viewNumel * chunkBase;
        viewNumel *= newShape[viewD];
        --viewD;
      }
      if (viewNumel != tensorNumel) return std::nullopt;
      if (d > 0) {
        chunkBase = strides[d - 1];
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD != -1) return std::nullopt;
  return out;
}

std::optional<Layout> movedLayout(Op op, const Attributes& attrs, const Shape& shape, const Layout& in) {
  KILN_ASSERT(in.strides.size() == shape.size(), "layout of rank {} for {}", in.strides.size(), shapeStr(shape));
  // Not a switch over every op: only the four view ops have a layout rule.
  if (op == Op::reshape) {
    auto strides = viewStrides(shape, in.strides, intListAttr(attrs, "shape", "reshape"));
    if (!strides) return std::nullopt;
    return Layout{std::move(*strides), in.offset};
  }
  if (op == Op::transpose) {
    const auto& perm = intListAttr(attrs, "perm", "transpose");
    Layout out{Strides(perm.size()), in.offset};
    for (size_t i = 0; i < perm.size(); ++i) out.strides[i] = in.strides[perm[i]];
    return out;
  }
  if (op == Op::slice) {
    const int64_t dim = intAttr(attrs, "dim", "slice");
    Layout out = in;
    out.offset += intAttr(attrs, "start", "slice") * in.strides[dim];
    out.strides[dim] *= intAttr(attrs, "step", "slice");
    return out;
  }
  if (op == Op::expand) {
    // Right-aligned: new leading dimensions and broadcast size-1 ones read
    // the same element again (stride 0).
    const auto& to = intListAttr(attrs, "shape", "expand");
    Layout out{Strides(to.size(), 0), in.offset};
    const size_t lead = to.size() - shape.size();
    for (size_t i = 0; i < shape.size(); ++i)
      out.strides[lead + i] = shape[i] == 1 && to[lead + i] != 1 ? 0 : in.strides[i];
    return out;
  }
  KILN_ASSERT(false, "movedLayout of {}, which is not a view op", opName(op));
  return std::nullopt;
}

}  // namespace kiln::ir

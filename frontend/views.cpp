// Views and copies of tensors (Tensor::view, permute, slice, ..., kiln::cat
// and kiln::stack) with libtorch's semantics and its argument checks, in
// kiln's error style. A view computes the sizes, strides and offset of its
// result with ir/layout.h (the rules codegen reads views with) and shares its
// input's storage; nothing runs. Under kiln::compile a view also appends the
// movement op (reshape, transpose, slice, expand) that gives its value, and
// its traced tensor keeps the strides its eager twin would have, so that
// view() accepts and refuses the same calls traced as eager. Copies
// (contiguous, clone, a reshape the strides do not allow as a view, cat,
// stack) run copy kernels that read their inputs through their strides;
// traced, they are movement ops or nothing (IR values are never aliased, so
// contiguous() and clone() of a traced tensor are that value).
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "frontend/autograd/formulas.h"
#include "frontend/autograd/function.h"
#include "frontend/dispatch.h"
#include "frontend/promotion.h"
#include "frontend/tensor.h"
#include "frontend/trace.h"
#include "passes/pass_manager.h"
#include "runtime/error.h"

namespace kiln {

namespace {
using ir::Op;
using ir::shapeStr;

/// One movement op a view appends when traced.
struct IrStep {
  Op op;
  ir::Attributes attrs;
};

/// Checks `x` for op `name`; returns the active trace, or nullptr when eager.
detail::TraceState* traceFor(const char* name, const Tensor& x) {
  KILN_CHECK(x.defined(), "{}: use of an undefined tensor", name);
  detail::TraceState* trace = detail::TraceState::current();
  KILN_CHECK(trace || !x.isTraced(),
             "{}: {} was produced while tracing (kiln::compile) and has no value outside the trace", name, x.str());
  return trace;
}

/// `dim` of a tensor of `rank` dimensions, negative ones counted from the
/// end; a 0-d tensor takes 0 and -1, as in PyTorch.
int64_t wrapDim(const char* name, int64_t dim, int64_t rank, const Tensor& x) {
  const int64_t r = std::max<int64_t>(rank, 1);
  KILN_CHECK(dim >= -r && dim < r, "{}: dimension {} out of range for {} (expected -{} to {})", name, dim, x.str(), r,
             r - 1);
  return dim < 0 ? dim + r : dim;
}

ir::Layout layoutOf(const Tensor& x) { return {x.strides(), x.storageOffset()}; }

/// A tensor of `shape` laid out as `layout` in x's storage. Traced, the
/// `steps` applied to x's value give its value.
/// The backward node of a view: its movement steps undone in reverse order.
void recordView(const Tensor& x, const Tensor& view, const char* name, const std::vector<IrStep>& steps) {
  if (!autograd::needsGrad(std::span<const Tensor>(&x, 1))) return;
  std::vector<Shape> shapes{x.shape()};  // the input shape of each step
  for (const IrStep& step : steps) {
    const ir::TensorType in{x.dtype(), shapes.back(), x.device()};
    shapes.push_back(ir::inferType(step.op, std::span<const ir::TensorType>(&in, 1), step.attrs).shape);
  }
  std::string node(name);
  node[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(node[0])));
  autograd::attach(node + "Backward", std::span<const Tensor>(&x, 1), std::span<const Tensor>(&view, 1),
                   [steps, shapes](const std::vector<Tensor>& grads) {
                     Tensor g = grads.at(0);
                     for (size_t i = steps.size(); i-- > 0;)
                       g = autograd::movementBackward(steps[i].op, steps[i].attrs, shapes[i], g);
                     return std::vector<Tensor>{g};
                   });
}

Tensor makeView(const Tensor& x, const char* name, const Shape& shape, ir::Layout layout,
                const std::vector<IrStep>& steps) {
  Tensor view;
  if (detail::TraceState* trace = traceFor(name, x)) {
    ir::Value* v = trace->valueOf(x, name);
    for (const IrStep& step : steps)
      v = trace->graph->create(step.op, std::vector<ir::Value*>{v}, step.attrs)->output();
    KILN_ASSERT(v->type().shape == shape, "{}: traced {}, computed {}", name, v->type().str(), shapeStr(shape));
    view = trace->wrap(v, std::move(layout));
  } else {
    auto impl = std::make_shared<TensorImpl>();
    impl->type = {x.dtype(), shape, x.device()};
    impl->strides = std::move(layout.strides);
    impl->offset = layout.offset;
    impl->storage = x.impl()->storage;
    view = Tensor(std::move(impl));
  }
  view.impl()->isView = true;
  view.impl()->version = x.impl()->version;
  recordView(x, view, name, steps);
  return view;
}

/// `x` itself as a new tensor handle (a view of all of it).
Tensor sameView(const Tensor& x, const char* name) { return makeView(x, name, x.shape(), layoutOf(x), {}); }

/// `x` in `shape` through a reshape node: a view when the strides allow.
Tensor reshapeView(const Tensor& x, const char* name, const Shape& shape) {
  std::optional<ir::Strides> strides = ir::viewStrides(x.shape(), x.strides(), shape);
  KILN_ASSERT(strides, "{}: {} is not a view", name, shapeStr(shape));
  return makeView(x, name, shape, {std::move(*strides), x.storageOffset()}, {{Op::reshape, {{"shape", shape}}}});
}

/// `shape` with its -1 resolved against x's element count.
Shape inferShape(const char* name, const Tensor& x, const Shape& shape) {
  int infer = -1;
  Shape known = shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(infer < 0, "{}: only one dimension can be inferred, got {} for {}", name, shapeStr(shape), x.str());
      infer = static_cast<int>(i);
      known[i] = 1;
    } else {
      KILN_CHECK(shape[i] >= 0, "{}: invalid size {} in {} for {}", name, shape[i], shapeStr(shape), x.str());
    }
  }
  Shape out = shape;
  if (infer >= 0) {
    const int64_t rest = ir::numel(known);
    KILN_CHECK(rest != 0, "{}: cannot infer the size of -1 in {} for {}: it could be any value", name, shapeStr(shape),
               x.str());
    if (x.numel() % rest == 0) out[infer] = x.numel() / rest;
  }
  KILN_CHECK(ir::numel(out) == x.numel() && (infer < 0 || x.numel() % ir::numel(known) == 0),
             "{}: shape {} is invalid for {} ({} elements)", name, shapeStr(shape), x.str(), x.numel());
  return out;
}

Tensor reshapeImpl(const char* name, const Tensor& x, const Shape& shape, bool viewOnly) {
  traceFor(name, x);
  const Shape to = inferShape(name, x, shape);
  if (ir::viewStrides(x.shape(), x.strides(), to)) return reshapeView(x, name, to);
  KILN_CHECK(!viewOnly, "view: cannot view {} with strides {} as {}: use reshape", x.str(), shapeStr(x.strides()),
             shapeStr(to));
  return reshapeView(x.contiguous(), name, to);
}

Tensor permuteImpl(const char* name, const Tensor& x, const std::vector<int64_t>& perm) {
  Shape shape(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) shape[i] = x.shape()[perm[i]];
  ir::Attributes attrs{{"perm", perm}};
  std::optional<ir::Layout> layout = ir::movedLayout(Op::transpose, attrs, x.shape(), layoutOf(x));
  return makeView(x, name, shape, std::move(*layout), {{Op::transpose, attrs}});
}

/// Elements start, start + step, ... below end of `dim` (already checked).
Tensor sliceImpl(const char* name, const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  ir::Attributes attrs{{"dim", dim}, {"start", start}, {"end", end}, {"step", step}};
  Shape shape = x.shape();
  shape[dim] = (end - start + step - 1) / step;
  std::optional<ir::Layout> layout = ir::movedLayout(Op::slice, attrs, x.shape(), layoutOf(x));
  return makeView(x, name, shape, std::move(*layout), {{Op::slice, attrs}});
}

/// The graph of an eager copy: a fusion whose body returns its input, so
/// that its one kernel reads the input through its strides and writes a
/// contiguous result.
std::unique_ptr<ir::Graph> copyGraph(const ir::TensorType& type) {
  auto g = std::make_unique<ir::Graph>("eager_copy");
  ir::Value* x = g->addInput(type);
  auto body = std::make_unique<ir::Graph>("fused");
  body->setOutputs({body->addInput(type)});
  ir::Node* fusion = g->appendRaw(Op::fusion, std::vector<ir::Value*>{x}, {type});
  fusion->setBody(std::move(body));
  g->setOutputs({fusion->output()});
  return g;
}

/// A contiguous copy of `x`; traced, x's value (values are never aliased).
Tensor copyOf(const char* name, const Tensor& x) {
  Tensor copy;
  if (detail::TraceState* trace = traceFor(name, x))
    copy = trace->wrap(trace->valueOf(x, name));
  else
    copy = detail::eagerCopy(x);
  autograd::attach(name == std::string("clone") ? "CloneBackward" : "ContiguousBackward", std::span<const Tensor>(&x, 1),
                   std::span<const Tensor>(&copy, 1),
                   [](const std::vector<Tensor>& grads) { return std::vector<Tensor>{grads.at(0)}; });
  return copy;
}
}  // namespace

Tensor detail::eagerCopy(const Tensor& x) {
  return runEagerGraph("copy", {x}, x.type(), [&] { return copyGraph(x.type()); });
}

void detail::copyInto(const Tensor& dst, const Tensor& src) {
  KILN_ASSERT(dst.type() == src.type(), "copy of {} into {}", src.str(), dst.str());
  if (dst.numel() == 0) return;
  runEagerGraph("copy", {src}, src.type(), [&] { return copyGraph(src.type()); }, dst);
}

Tensor Tensor::view(const Shape& shape) const { return reshapeImpl("view", *this, shape, true); }
Tensor Tensor::reshape(const Shape& shape) const { return reshapeImpl("reshape", *this, shape, false); }

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  traceFor("permute", *this);
  const int64_t rank = dim();
  std::vector<int64_t> perm;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  bool valid = static_cast<int64_t>(dims.size()) == rank;
  for (int64_t d : dims) {
    const int64_t w = d < 0 ? d + rank : d;
    valid = valid && w >= 0 && w < rank && !seen[w];
    if (!valid) break;
    seen[w] = true;
    perm.push_back(w);
  }
  KILN_CHECK(valid, "permute: dims {} are not a permutation of the {} dimensions of {}", shapeStr(dims), rank, str());
  return permuteImpl("permute", *this, perm);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  traceFor("transpose", *this);
  const int64_t d0 = wrapDim("transpose", dim0, dim(), *this), d1 = wrapDim("transpose", dim1, dim(), *this);
  if (dim() == 0) return sameView(*this, "transpose");
  std::vector<int64_t> perm(static_cast<size_t>(dim()));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[d0], perm[d1]);
  return permuteImpl("transpose", *this, perm);
}

Tensor Tensor::t() const {
  traceFor("t", *this);
  KILN_CHECK(dim() <= 2, "t: expected a tensor with at most 2 dimensions, got {}", str());
  if (dim() < 2) return sameView(*this, "t");
  return permuteImpl("t", *this, {1, 0});
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  traceFor("slice", *this);
  KILN_CHECK(this->dim() > 0, "slice: cannot slice a 0-d tensor {}", str());
  const int64_t d = wrapDim("slice", dim, this->dim(), *this);
  KILN_CHECK(step > 0, "slice: step must be positive, got {} for {}", step, str());
  // Python's slice rules: negative bounds count from the end, then both are
  // clamped into the dimension, and an end before the start is empty.
  const int64_t size = shape()[d];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  return sliceImpl("slice", *this, d, start, end, step);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  traceFor("narrow", *this);
  KILN_CHECK(this->dim() > 0, "narrow: cannot narrow a 0-d tensor {}", str());
  const int64_t d = wrapDim("narrow", dim, this->dim(), *this);
  const int64_t size = shape()[d];
  KILN_CHECK(start >= -size && start <= size, "narrow: start {} out of range for dimension {} of size {} of {}", start,
             d, size, str());
  if (start < 0) start += size;
  KILN_CHECK(length >= 0, "narrow: length must be non-negative, got {} for {}", length, str());
  KILN_CHECK(start + length <= size, "narrow: start {} and length {} exceed size {} of dimension {} of {}", start,
             length, size, d, str());
  return sliceImpl("narrow", *this, d, start, start + length, 1);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  traceFor("select", *this);
  KILN_CHECK(this->dim() > 0, "select: cannot select from a 0-d tensor {}", str());
  const int64_t d = wrapDim("select", dim, this->dim(), *this);
  const int64_t size = shape()[d];
  KILN_CHECK(index >= -size && index < size, "select: index {} out of range for dimension {} of size {} of {}", index,
             d, size, str());
  if (index < 0) index += size;
  Shape shape = this->shape();
  ir::Layout layout = layoutOf(*this);
  layout.offset += index * layout.strides[d];
  shape.erase(shape.begin() + d);
  layout.strides.erase(layout.strides.begin() + d);
  return makeView(*this, "select", shape, std::move(layout),
                  {{Op::slice, {{"dim", d}, {"start", index}, {"end", index + 1}, {"step", int64_t{1}}}},
                   {Op::reshape, {{"shape", shape}}}});
}

Tensor Tensor::expand(const Shape& shape) const {
  traceFor("expand", *this);
  const size_t rank = this->shape().size();
  KILN_CHECK(shape.size() >= rank,
             "expand: cannot expand {} to {}: the target has fewer dimensions ({}) than the tensor ({})", str(),
             shapeStr(shape), shape.size(), rank);
  const size_t lead = shape.size() - rank;
  Shape to = shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(shape[i] >= 0, "expand: size {} is not allowed for the new leading dimension {} of {} (expanding {})",
                 shape[i], i, shapeStr(shape), str());
      continue;
    }
    const int64_t from = this->shape()[i - lead];
    if (to[i] == -1) to[i] = from;
    KILN_CHECK(to[i] >= 0 && (from == to[i] || from == 1),
               "expand: cannot expand {} to {}: size {} of dimension {} is not 1 or {}", str(), shapeStr(shape), from,
               i - lead, shape[i]);
  }
  ir::Attributes attrs{{"shape", to}};
  std::optional<ir::Layout> layout = ir::movedLayout(Op::expand, attrs, this->shape(), layoutOf(*this));
  return makeView(*this, "expand", to, std::move(*layout), {{Op::expand, attrs}});
}

Tensor Tensor::squeeze() const {
  traceFor("squeeze", *this);
  Shape shape;
  ir::Layout layout{{}, storageOffset()};
  for (int d = 0; d < dim(); ++d) {
    if (this->shape()[d] == 1) continue;
    shape.push_back(this->shape()[d]);
    layout.strides.push_back(strides()[d]);
  }
  if (shape == this->shape()) return sameView(*this, "squeeze");
  return makeView(*this, "squeeze", shape, std::move(layout), {{Op::reshape, {{"shape", shape}}}});
}

Tensor Tensor::squeeze(int64_t dim) const {
  traceFor("squeeze", *this);
  const int64_t d = wrapDim("squeeze", dim, this->dim(), *this);
  if (this->dim() == 0 || shape()[d] != 1) return sameView(*this, "squeeze");
  Shape shape = this->shape();
  ir::Layout layout = layoutOf(*this);
  shape.erase(shape.begin() + d);
  layout.strides.erase(layout.strides.begin() + d);
  return makeView(*this, "squeeze", shape, std::move(layout), {{Op::reshape, {{"shape", shape}}}});
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  traceFor("unsqueeze", *this);
  const int64_t d = wrapDim("unsqueeze", dim, this->dim() + 1, *this);
  Shape shape = this->shape();
  ir::Layout layout = layoutOf(*this);
  // The new dimension's stride, as PyTorch picks it (it is never stepped).
  const int64_t stride = d < this->dim() ? shape[d] * layout.strides[d] : 1;
  shape.insert(shape.begin() + d, 1);
  layout.strides.insert(layout.strides.begin() + d, stride);
  return makeView(*this, "unsqueeze", shape, std::move(layout), {{Op::reshape, {{"shape", shape}}}});
}

Tensor Tensor::flatten(int64_t startDim, int64_t endDim) const {
  traceFor("flatten", *this);
  if (dim() == 0) return reshapeImpl("flatten", *this, {1}, false);
  const int64_t s = wrapDim("flatten", startDim, dim(), *this), e = wrapDim("flatten", endDim, dim(), *this);
  KILN_CHECK(s <= e, "flatten: start dimension {} is after end dimension {} for {}", s, e, str());
  if (s == e) return sameView(*this, "flatten");
  Shape shape(this->shape().begin(), this->shape().begin() + s);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= this->shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), this->shape().begin() + e + 1, this->shape().end());
  return reshapeImpl("flatten", *this, shape, false);
}

Tensor Tensor::contiguous() const {
  traceFor("contiguous", *this);
  if (isContiguous()) return *this;
  return copyOf("contiguous", *this);
}

Tensor Tensor::clone() const { return copyOf("clone", *this); }

namespace {
Tensor catEager(const std::vector<Tensor>& inputs, const ir::TensorType& out, int64_t d, const ir::Attributes& attrs);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i)
    KILN_CHECK(tensors[i].defined(), "cat: argument {} is an undefined tensor", i);
  const Tensor& first = tensors[0];
  KILN_CHECK(first.dim() > 0, "cat: zero-dimensional tensor {} cannot be concatenated", first.str());
  const int64_t d = wrapDim("cat", dim, first.dim(), first);
  DType dtype = first.dtype();
  ir::TensorType out = first.type();
  out.shape[d] = 0;
  for (const Tensor& t : tensors) {
    traceFor("cat", t);
    KILN_CHECK(t.device() == first.device(), "cat: expected all tensors on the same device, got {} and {}", first.str(),
               t.str());
    KILN_CHECK(t.dim() == first.dim(), "cat: expected tensors of the same rank, got {} and {}", first.str(), t.str());
    for (int64_t k = 0; k < t.dim(); ++k)
      KILN_CHECK(k == d || t.shape()[k] == first.shape()[k],
                 "cat: expected equal sizes outside dimension {}, got {} and {}", d, first.str(), t.str());
    dtype = detail::promoteTypes(dtype, t.dtype());
    out.shape[d] += t.shape()[d];
  }
  out.dtype = dtype;
  std::vector<Tensor> inputs;
  for (const Tensor& t : tensors) inputs.push_back(t.to(dtype));
  const ir::Attributes attrs{{"dim", d}};
  Tensor result;
  if (detail::TraceState* trace = detail::TraceState::current()) {
    std::vector<ir::Value*> values;
    for (const Tensor& t : inputs) values.push_back(trace->valueOf(t, "cat"));
    result = trace->wrap(trace->graph->create(Op::cat, values, attrs)->output());
  } else {
    result = catEager(inputs, out, d, attrs);
  }
  std::vector<int64_t> sizes;
  for (const Tensor& t : inputs) sizes.push_back(t.shape()[d]);
  autograd::attach("CatBackward", inputs, std::span<const Tensor>(&result, 1),
                   [sizes, d](const std::vector<Tensor>& grads) {
                     std::vector<Tensor> pieces;
                     int64_t at = 0;
                     for (int64_t size : sizes) {
                       pieces.push_back(grads.at(0).narrow(d, at, size));
                       at += size;
                     }
                     return pieces;
                   });
  return result;
}

namespace {
Tensor catEager(const std::vector<Tensor>& inputs, const ir::TensorType& out, int64_t d, const ir::Attributes& attrs) {
  return detail::runEagerGraph(fmt::format("cat|{}", d), inputs, out, [&] {
    auto g = std::make_unique<ir::Graph>("eager_cat");
    std::vector<ir::Value*> values;
    for (const Tensor& t : inputs) values.push_back(g->addInput(t.type()));
    g->setOutputs({g->create(Op::cat, values, attrs)->output()});
    passes::PassManager("fuse-elementwise").run(*g);
    return g;
  });
}
}  // namespace

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i)
    KILN_CHECK(tensors[i].defined(), "stack: argument {} is an undefined tensor", i);
  for (const Tensor& t : tensors)
    KILN_CHECK(t.shape() == tensors[0].shape(), "stack: expected all tensors to have the same shape, got {} and {}",
               tensors[0].str(), t.str());
  const int64_t d = wrapDim("stack", dim, tensors[0].dim() + 1, tensors[0]);
  std::vector<Tensor> pieces;
  for (const Tensor& t : tensors) pieces.push_back(t.unsqueeze(d));
  return cat(pieces, d);
}

}  // namespace kiln

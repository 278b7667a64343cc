// kiln::Tensor: a device-aware tensor with NumPy broadcasting, and the
// factories that make one (zeros, ones, full, arange, fromVector; randn
// and rand are frontend/random.h).
// Elements are f32, f64, f16 (kiln::Half), bf16 (kiln::BFloat16), i32, i64
// or bool (runtime/numeric.h); `to(dtype)` converts.
//
// A Tensor is a handle: copies share the same TensorImpl. Eager tensors
// share storage (a runtime::Buffer from the device's caching allocator) and
// read it through sizes, strides (in elements) and a storage offset, as in
// PyTorch: factories and ops make contiguous row-major tensors, and the view
// ops (view, permute, transpose, slice, select, expand, squeeze, ...;
// frontend/views.cpp) make tensors that share their input's storage. Ops
// read views through their strides, without copies. Inside kiln::compile a
// tensor may instead be traced: it stands for an IR value of the graph under
// construction and has no data (reading its values is an error that says
// so), but it has the sizes and strides its eager twin would have, so that
// view() accepts and refuses exactly what it would eagerly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/graph.h"
#include "ir/layout.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln {

class Stream;

using ir::Shape;

namespace detail {
class TraceState;
}
namespace autograd {
struct Meta;
}

struct TensorImpl {
  ir::TensorType type;
  ir::Strides strides;                       ///< one per dimension, in elements
  int64_t offset = 0;                        ///< of the first element in storage, in elements
  std::shared_ptr<runtime::Buffer> storage;  ///< null for traced tensors
  ir::Value* traced = nullptr;               ///< the IR value, while tracing
  detail::TraceState* trace = nullptr;       ///< the trace `traced` belongs to
  /// Bumped by every in-place write; shared by a tensor and its views (and
  /// detach()ed twins), as in PyTorch, so that autograd can tell when a
  /// tensor it saved for backward was modified (Note [Saved tensors]).
  std::shared_ptr<uint64_t> version = std::make_shared<uint64_t>(0);
  bool isView = false;                       ///< shares another tensor's storage (made by a view op)
  std::shared_ptr<autograd::Meta> autograd;  ///< null: no gradient is tracked (frontend/autograd/)
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return type().shape; }
  const Shape& sizes() const { return shape(); }
  int64_t size(int dim) const;
  int dim() const { return type().rank(); }
  int64_t numel() const { return type().numel(); }
  DType dtype() const { return type().dtype; }
  Device device() const { return type().device; }
  const ir::TensorType& type() const;
  /// "f32[2,3]@cpu".
  std::string str() const;
  /// Whether this tensor is a placeholder inside kiln::compile.
  bool isTraced() const { return impl_ && impl_->traced; }

  /// Elements between neighbours along each dimension (0 where expanded).
  const ir::Strides& strides() const;
  int64_t stride(int dim) const;
  /// Where the first element sits in the storage, in elements.
  int64_t storageOffset() const;
  /// Whether the elements sit in row-major order without gaps (strides of
  /// size-1 dimensions do not matter), as torch.Tensor.is_contiguous.
  bool isContiguous() const;

  // Views and copies, with libtorch's names and semantics (frontend/views.cpp).
  // Dimensions may be negative (counted from the end). Views share this
  // tensor's storage; under kiln::compile they become movement ops.

  /// The same elements in `shape` (one size may be -1), sharing storage;
  /// an error when the strides do not allow it (use reshape).
  Tensor view(const Shape& shape) const;
  /// view() when the strides allow it, else a contiguous copy in `shape`.
  Tensor reshape(const Shape& shape) const;
  /// Result dimension i is dimension dims[i].
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  /// transpose(0, 1) of a tensor of at most 2 dimensions.
  Tensor t() const;
  /// Elements start, start + step, ... below end of `dim`; start and end
  /// are clamped to the size as Python slices are (negative ones count from
  /// the end); step > 0.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  /// `length` elements of `dim` from `start`.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Element `index` of `dim`, which goes away.
  Tensor select(int64_t dim, int64_t index) const;
  /// Broadcast to `shape` (-1 keeps a size) without copying: stride 0.
  Tensor expand(const Shape& shape) const;
  /// Without its size-1 dimensions; squeeze(dim) removes `dim` if its size is 1.
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  /// With a new size-1 dimension at `dim` (-1: the end).
  Tensor unsqueeze(int64_t dim) const;
  /// Dimensions startDim..endDim merged into one (a reshape).
  Tensor flatten(int64_t startDim = 0, int64_t endDim = -1) const;
  /// This tensor when contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// A contiguous copy that shares nothing with this tensor.
  Tensor clone() const;

  /// Pointer to the first element of a contiguous eager CPU tensor whose
  /// dtype is T's (dtypeOf<T>(): float for f32, Half for f16, bool for bool,
  /// ...); an error for a non-contiguous one (call contiguous() first).
  template <typename T>
  requires isElementType<T> T* data() const { return static_cast<T*>(rawData("data", dtypeOf<T>())); }
  /// The value of a one-element f32 tensor.
  float item() const;
  /// The value of a one-element tensor of T's dtype (from any device).
  template <typename T>
  requires isElementType<T> T item()
  const {
    KILN_CHECK(defined() && numel() == 1, "item: expected a tensor with one element, got {}", str());
    T value;
    gather("item", dtypeOf<T>(), &value);
    return value;
  }
  /// The elements of a tensor of T's dtype (f32 by default), in row-major
  /// order (gathered through the strides of a view).
  template <typename T = float>
  requires isElementType<T> std::vector<T> toVector()
  const {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> bytes(static_cast<size_t>(numel()));  // vector<bool> packs bits
      gather("toVector", DType::boolean, bytes.data());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> out(static_cast<size_t>(numel()));
      gather("toVector", dtypeOf<T>(), out.data());
      return out;
    }
  }
  /// This tensor converted to `dtype` (a `cast`; see docs/ops.md for what
  /// each conversion does); the tensor itself when it already has it.
  Tensor to(DType dtype) const;
  /// This tensor on `device` (a contiguous copy through the two devices'
  /// drivers, by way of the host between two kinds of device); the tensor
  /// itself when it is there already. Gradients flow back to this device.
  /// The copy is enqueued on the current streams of the two devices. With
  /// `nonBlocking`, a copy from pinned host memory (pinMemory()) returns at
  /// once, ordered on the device's stream, and a copy to the CPU lands in
  /// pinned memory and returns at once (synchronize the stream before
  /// reading it on the host, as in PyTorch); a copy from pageable memory is
  /// synchronous either way (Note [Pinned memory] in runtime/pinned_memory.h).
  Tensor to(Device device, bool nonBlocking = false) const;
  /// A copy of this CPU tensor in pinned host memory (itself when it is
  /// pinned already), the source of asynchronous copies to a device.
  Tensor pinMemory() const;
  /// Whether the tensor's memory is pinned host memory.
  bool isPinned() const;
  /// The tensor's memory is used by work enqueued on `stream` too (a stream
  /// other than the one it was allocated on): the caching allocator does
  /// not hand it out again until that work has finished
  /// (torch.Tensor.record_stream; Note [Memory belongs to a stream]).
  void recordStream(const Stream& stream) const;
  /// to(Device::cpu()).
  Tensor cpu() const { return to(Device::cpu()); }

  // Autograd (frontend/autograd/; docs/autograd.md), as torch.Tensor's.

  /// Whether gradients flow to this tensor: a leaf marked with
  /// setRequiresGrad(), or the result of an op on such tensors.
  bool requiresGrad() const;
  /// Marks a leaf (a tensor no op with gradients made) as one whose .grad
  /// backward() fills; floating-point tensors only. Returns *this.
  const Tensor& setRequiresGrad(bool requiresGrad = true) const;
  /// The gradient backward() accumulated into this leaf (undefined until then).
  Tensor grad() const;
  /// Replaces the gradient (undefined: none, as optimizers' zeroGrad sets it).
  void setGrad(const Tensor& grad) const;
  /// Whether this is a leaf: made by the user rather than by an op on
  /// tensors that require grad.
  bool isLeaf() const;
  /// Name of the backward function that made this tensor ("MulBackward"),
  /// empty for a leaf.
  std::string gradFnName() const;
  /// Computes the gradients of this tensor with respect to every leaf that
  /// requires grad and accumulates them into their grad(). `gradient` is
  /// d(something)/d(this), of this tensor's shape; it may be omitted for a
  /// one-element tensor (then 1). The graph is freed afterwards unless
  /// `retainGraph`; a second backward through it is an error.
  void backward(const Tensor& gradient = {}, bool retainGraph = false) const;
  /// The same data (shared storage and version counter), cut off from autograd.
  Tensor detach() const;
  /// How many in-place writes this tensor's storage has seen.
  uint64_t version() const;

  // In-place ops (frontend/inplace.cpp): compute the op, then write the
  // result into this tensor's elements (through its strides, so a view
  // writes into its base) and bump the version counter. The result must have
  // this tensor's shape (the other operand broadcasts to it) and convert to
  // its dtype (a float result into an integer tensor is an error). With
  // autograd: an error on a leaf that requires grad (outside NoGradGuard)
  // and on a view of a tensor that requires grad; on other tensors the
  // history moves to the new value.
  const Tensor& add_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& add_(double other) const;
  const Tensor& sub_(const Tensor& other, double alpha = 1.0) const;
  const Tensor& sub_(double other) const;
  const Tensor& mul_(const Tensor& other) const;
  const Tensor& mul_(double other) const;
  const Tensor& div_(const Tensor& other) const;
  const Tensor& div_(double other) const;
  /// clamp(*this, min, max) in place; either bound may be std::nullopt.
  const Tensor& clamp_(std::optional<double> min, std::optional<double> max) const;
  const Tensor& relu_() const;
  const Tensor& neg_() const;
  const Tensor& sqrt_() const;
  const Tensor& exp_() const;
  /// Copies `src` (broadcast to this shape, converted to this dtype) into this tensor.
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& implPtr() const { return impl_; }

 private:
  /// An error naming `what` unless this is an eager tensor of dtype `dtype`
  /// whose values can be read.
  void checkReadable(const char* what, DType dtype) const;
  /// The host address of the first element of a contiguous eager CPU tensor
  /// of dtype `dtype`, or an error saying why not, naming `what`.
  void* rawData(const char* what, DType dtype) const;
  /// Copies the elements, in row-major order, to host memory at `out`
  /// (from any device: through its driver, after the stream's work).
  void gather(const char* what, DType dtype, void* out) const;
  std::shared_ptr<TensorImpl> impl_;
};

/// A tensor of `shape` filled with `value`.
Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = defaultDevice());
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = defaultDevice());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = defaultDevice());
/// [start, start + step, ...) up to `end`, exclusive, as in torch.arange;
/// element i is start + i * step computed in f64, then converted to `dtype`.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32, Device device = defaultDevice());
Tensor arange(double end, DType dtype = DType::f32);
/// A tensor of `shape` holding `values` (row-major); sizes must match.
Tensor fromVector(const std::vector<float>& values, const Shape& shape, Device device = defaultDevice());
/// A 1-d tensor holding `values`.
Tensor fromVector(const std::vector<float>& values, Device device = defaultDevice());

/// The inputs joined along `dim`, as torch.cat: all of one rank, equal
/// sizes in the other dimensions, dtypes promoted as add promotes them.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// The inputs, of one shape, joined along a new dimension `dim`, as torch.stack.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

namespace detail {
/// An eager tensor of `type` that owns `storage`, contiguous.
Tensor contiguousTensor(ir::TensorType type, std::shared_ptr<runtime::Buffer> storage);
/// A tensor of `shape` holding the host `values` (row-major), copied to `device`.
Tensor fromElements(const void* values, int64_t count, DType dtype, const Shape& shape, Device device);
/// A contiguous eager tensor of `type` whose every element is the one at
/// host address `element` (itemSize(type.dtype) bytes): copied to the
/// device, then broadcast by a copy kernel (Note [Fills are kernels]).
Tensor broadcastElement(const void* element, const ir::TensorType& type);
/// A contiguous copy of eager `x` made by a copy kernel on its device, even
/// while tracing, and without autograd (frontend/views.cpp).
Tensor eagerCopy(const Tensor& x);
/// Copies eager `src` into the elements of eager `dst` (same type; any
/// strides on either side, dst's non-overlapping) with one copy kernel.
void copyInto(const Tensor& dst, const Tensor& src);
}  // namespace detail

/// A tensor of the dtype of T (double: f64, int32_t: i32, int64_t: i64,
/// bool, Half: f16, BFloat16: bf16) holding `values` in `shape`. (A braced
/// list of numbers makes an f32 tensor, through the overload above.)
template <typename T>
requires(isElementType<T> && !std::is_same_v<T, float>) Tensor
    fromVector(const std::vector<T>& values, const Shape& shape, Device device = defaultDevice()) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());  // vector<bool> packs bits
    return detail::fromElements(bytes.data(), static_cast<int64_t>(values.size()), DType::boolean, shape, device);
  } else {
    return detail::fromElements(values.data(), static_cast<int64_t>(values.size()), dtypeOf<T>(), shape, device);
  }
}
template <typename T>
requires(isElementType<T> && !std::is_same_v<T, float>) Tensor
    fromVector(const std::vector<T>& values, Device device = defaultDevice()) {
  return fromVector(values, {static_cast<int64_t>(values.size())}, device);
}

}  // namespace kiln

// Generator, randn and rand, which lived here before (source compatibility):
// after the namespace, since frontend/random.h includes this file.
#include "frontend/random.h"  // IWYU pragma: export

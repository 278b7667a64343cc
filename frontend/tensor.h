// kiln::Tensor: a device-aware tensor with NumPy broadcasting, and the
// factories that make one (zeros, ones, full, arange, randn, fromVector).
// Elements are f32, f64, f16 (kiln::Half), bf16 (kiln::BFloat16), i32, i64
// or bool (runtime/numeric.h); `to(dtype)` converts.
//
// A Tensor is a handle: copies share the same TensorImpl. Eager tensors own
// storage (a runtime::Buffer from the device's caching allocator) and are
// contiguous in row-major order. Inside kiln::compile a tensor may instead be
// traced: it stands for an IR value of the graph under construction and has
// no data; reading its values is an error that says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/graph.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln {

using ir::Shape;

namespace detail {
class TraceState;
}

struct TensorImpl {
  ir::TensorType type;
  std::shared_ptr<runtime::Buffer> storage;  ///< null for traced tensors
  ir::Value* traced = nullptr;               ///< the IR value, while tracing
  detail::TraceState* trace = nullptr;       ///< the trace `traced` belongs to
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

  /// Pointer to the first element of an eager CPU tensor whose dtype is
  /// T's (dtypeOf<T>(): float for f32, Half for f16, bool for bool, ...).
  template <typename T>
  requires isElementType<T> T* data() const { return static_cast<T*>(rawData("data", dtypeOf<T>())); }
  /// The value of a one-element f32 tensor.
  float item() const;
  /// The value of a one-element tensor of T's dtype.
  template <typename T>
  requires isElementType<T> T item()
  const {
    KILN_CHECK(defined() && numel() == 1, "item: expected a tensor with one element, got {}", str());
    return *static_cast<const T*>(rawData("item", dtypeOf<T>()));
  }
  /// The elements of a tensor of T's dtype (f32 by default), in row-major order.
  template <typename T = float>
  requires isElementType<T> std::vector<T> toVector()
  const {
    const T* p = static_cast<const T*>(rawData("toVector", dtypeOf<T>()));
    return std::vector<T>(p, p + numel());
  }
  /// This tensor converted to `dtype` (a `cast`; see docs/ops.md for what
  /// each conversion does); the tensor itself when it already has it.
  Tensor to(DType dtype) const;

  TensorImpl* impl() const { return impl_.get(); }

 private:
  /// The storage of an eager CPU tensor of dtype `dtype`, or an error saying
  /// why not, naming `what`.
  void* rawData(const char* what, DType dtype) const;
  std::shared_ptr<TensorImpl> impl_;
};

/// A tensor of `shape` filled with `value`.
Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
/// [start, start + step, ...) up to `end`, exclusive, as in torch.arange;
/// element i is start + i * step computed in f64, then converted to `dtype`.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32, Device device = Device::cpu());
Tensor arange(double end, DType dtype = DType::f32);
/// A tensor of `shape` holding `values` (row-major); sizes must match.
Tensor fromVector(const std::vector<float>& values, const Shape& shape, Device device = Device::cpu());
/// A 1-d tensor holding `values`.
Tensor fromVector(const std::vector<float>& values, Device device = Device::cpu());

namespace detail {
Tensor fromElements(const void* values, int64_t count, DType dtype, const Shape& shape, Device device);
}

/// A tensor of the dtype of T (double: f64, int32_t: i32, int64_t: i64,
/// bool, Half: f16, BFloat16: bf16) holding `values` in `shape`. (A braced
/// list of numbers makes an f32 tensor, through the overload above.)
template <typename T>
requires(isElementType<T> && !std::is_same_v<T, float>) Tensor
    fromVector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu()) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());  // vector<bool> packs bits
    return detail::fromElements(bytes.data(), static_cast<int64_t>(values.size()), DType::boolean, shape, device);
  } else {
    return detail::fromElements(values.data(), static_cast<int64_t>(values.size()), dtypeOf<T>(), shape, device);
  }
}
template <typename T>
requires(isElementType<T> && !std::is_same_v<T, float>) Tensor
    fromVector(const std::vector<T>& values, Device device = Device::cpu()) {
  return fromVector(values, {static_cast<int64_t>(values.size())}, device);
}

/// The state of a counter-based Philox4x32-10 stream (DESIGN.md §8): every
/// draw of n elements uses counters (offset, 0..n) under key `seed` and then
/// advances offset by one, so a seed and an offset name a draw exactly.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manualSeed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  /// Returns the offset of the next draw and advances past it.
  uint64_t advance() { return offset_++; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// The process-wide default generator.
Generator& defaultGenerator();
/// Seeds the default generator.
void manualSeed(uint64_t seed);

/// Standard normal samples (Box-Muller over Philox draws).
Tensor randn(const Shape& shape, Generator& generator = defaultGenerator(), Device device = Device::cpu());

}  // namespace kiln

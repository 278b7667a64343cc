// Tensor accessors, factories and the default generator.
#include "frontend/tensor.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "frontend/dispatch.h"
#include "runtime/error.h"
#include "runtime/numeric.h"
#include "runtime/philox.h"
#include "runtime/thread_pool.h"

namespace kiln {

namespace {
void checkShape(const char* op, const Shape& shape) {
  for (int64_t d : shape) KILN_CHECK(d >= 0, "{}: negative dimension in shape {}", op, ir::shapeStr(shape));
}

Tensor allocate(ir::TensorType type) {
  auto storage = runtime::allocateBuffer(type.device, static_cast<size_t>(type.numel() * itemSize(type.dtype)));
  return detail::contiguousTensor(std::move(type), std::move(storage));
}

/// The C++ element type kiln::toVector<T>() and data<T>() take for `dtype`.
const char* elementTypeName(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::f16: return "kiln::Half";
    case DType::bf16: return "kiln::BFloat16";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
    case DType::boolean: return "bool";
  }
  return "?";
}
}  // namespace

const ir::TensorType& Tensor::type() const {
  KILN_CHECK(impl_, "tensor: use of an undefined tensor");
  return impl_->type;
}

int64_t Tensor::size(int d) const {
  const int rank = dim();
  KILN_CHECK(d >= -rank && d < rank, "size: dimension {} out of range for {}", d, str());
  return shape()[d < 0 ? d + rank : d];
}

std::string Tensor::str() const { return impl_ ? type().str() : std::string("undefined"); }

const ir::Strides& Tensor::strides() const {
  KILN_CHECK(impl_, "strides: use of an undefined tensor");
  return impl_->strides;
}

int64_t Tensor::stride(int d) const {
  const int rank = dim();
  KILN_CHECK(d >= -rank && d < rank, "stride: dimension {} out of range for {}", d, str());
  return strides()[d < 0 ? d + rank : d];
}

int64_t Tensor::storageOffset() const {
  KILN_CHECK(impl_, "storageOffset: use of an undefined tensor");
  return impl_->offset;
}

bool Tensor::isContiguous() const { return ir::isContiguous(shape(), strides()); }

void* Tensor::rawData(const char* what, DType dtype, bool contiguous) const {
  KILN_CHECK(impl_, "{}: use of an undefined tensor", what);
  KILN_CHECK(!impl_->traced,
             "{}: cannot read the values of {} while tracing (kiln::compile): values are not known "
             "until the compiled function runs; return the tensor instead",
             what, str());
  KILN_CHECK(impl_->storage, "{}: {} has no storage", what, str());
  KILN_CHECK(device().isCpu(), "{}: {} is not on the cpu", what, str());
  KILN_CHECK(dtype == this->dtype(), "{}: {} holds {}, not {} (read it as {}, or convert it with to())", what, str(),
             elementTypeName(this->dtype()), elementTypeName(dtype), elementTypeName(this->dtype()));
  KILN_CHECK(!contiguous || isContiguous(),
             "{}: {} with strides {} is not contiguous (call contiguous() first, or read it with toVector())", what,
             str(), ir::shapeStr(strides()));
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * itemSize(dtype);
}

void Tensor::gather(const char* what, DType dtype, void* out) const {
  const auto* base = static_cast<const char*>(rawData(what, dtype, false));
  const int64_t n = numel(), size = itemSize(dtype);
  if (n == 0) return;
  if (isContiguous()) {
    std::memcpy(out, base, static_cast<size_t>(n * size));
    return;
  }
  // Row-major walk of the multi-index, innermost dimension fastest.
  const Shape& sizes = shape();
  const ir::Strides& st = strides();
  const int rank = dim();
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  auto* dst = static_cast<char*>(out);
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * size, base + at * size, static_cast<size_t>(size));
    for (int d = rank - 1; d >= 0; --d) {
      at += st[d];
      if (++index[d] < sizes[d]) break;
      at -= st[d] * sizes[d];
      index[d] = 0;
    }
  }
}

float Tensor::item() const { return item<float>(); }

Tensor Tensor::to(DType dtype) const {
  if (defined() && this->dtype() == dtype) return *this;
  return detail::dispatch(ir::Op::cast, {*this}, {{"dtype", dtype}});
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  checkShape("full", shape);
  Tensor t = allocate({dtype, shape, device});
  // One element converted as `cast` converts an f64 (runtime/numeric.h), then copied.
  auto* data = static_cast<char*>(t.impl()->storage->data());
  const int64_t n = t.numel(), size = itemSize(dtype);
  if (n > 0) storeAs(data, dtype, value);
  for (int64_t i = 1; i < n; ++i) std::memcpy(data + i * size, data, static_cast<size_t>(size));
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  KILN_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
             "arange: expected finite bounds and a non-zero step, got start={}, end={}, step={}", start, end, step);
  KILN_CHECK(dtype != DType::boolean, "arange: dtype bool is not supported");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  Tensor t = allocate({dtype, {n}, device});
  auto* data = static_cast<char*>(t.impl()->storage->data());
  for (int64_t i = 0; i < n; ++i) storeAs(data + i * itemSize(dtype), dtype, start + static_cast<double>(i) * step);
  return t;
}

Tensor arange(double end, DType dtype) { return arange(0.0, end, 1.0, dtype); }

Tensor fromVector(const std::vector<float>& values, const Shape& shape, Device device) {
  return detail::fromElements(values.data(), static_cast<int64_t>(values.size()), DType::f32, shape, device);
}

Tensor fromVector(const std::vector<float>& values, Device device) {
  return fromVector(values, {static_cast<int64_t>(values.size())}, device);
}

Tensor detail::contiguousTensor(ir::TensorType type, std::shared_ptr<runtime::Buffer> storage) {
  auto impl = std::make_shared<TensorImpl>();
  impl->strides = ir::contiguousStrides(type.shape);
  impl->type = std::move(type);
  impl->storage = std::move(storage);
  return Tensor(std::move(impl));
}

Tensor detail::fromElements(const void* values, int64_t count, DType dtype, const Shape& shape, Device device) {
  checkShape("fromVector", shape);
  KILN_CHECK(count == ir::numel(shape), "fromVector: {} values cannot fill shape {} ({} elements)", count,
             ir::shapeStr(shape), ir::numel(shape));
  Tensor t = allocate({dtype, shape, device});
  if (count > 0) std::memcpy(t.impl()->storage->data(), values, static_cast<size_t>(count * itemSize(dtype)));
  return t;
}

Generator& defaultGenerator() {
  static Generator generator(0);
  return generator;
}

void manualSeed(uint64_t seed) { defaultGenerator().manualSeed(seed); }

namespace {
/// An f32 tensor of `shape` whose element i is `value(block)` of the Philox
/// block with counter (i, offset) under the generator's seed, for one draw
/// (the generator advances once).
template <typename F>
Tensor fromPhiloxBlocks(const char* name, const Shape& shape, Generator& generator, Device device, F value) {
  checkShape(name, shape);
  Tensor t = allocate({DType::f32, shape, device});
  float* p = t.data<float>();
  const uint64_t offset = generator.advance();
  const runtime::PhiloxKey key = {static_cast<uint32_t>(generator.seed()),
                                  static_cast<uint32_t>(generator.seed() >> 32)};
  runtime::ThreadPool::instance().parallelFor(t.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      p[i] = value(runtime::philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                                           static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                                          key));
  });
  return t;
}
}  // namespace

Tensor randn(const Shape& shape, Generator& generator, Device device) {
  return fromPhiloxBlocks("randn", shape, generator, device, [](const auto& r) {
    // Box-Muller; u1 is in (0, 1], so the log is finite.
    const double u1 = runtime::uniformFromBits(r[0]), u2 = runtime::uniformFromBits(r[1]);
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  });
}

Tensor rand(const Shape& shape, Generator& generator, Device device) {
  return fromPhiloxBlocks("rand", shape, generator, device, [](const auto& r) {
    return static_cast<float>(r[0] >> 8) * (1.0f / 16777216.0f);  // exact: 24 bits, scaled by a power of 2
  });
}

}  // namespace kiln

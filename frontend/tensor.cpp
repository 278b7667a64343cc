// Tensor accessors, factories and the default generator.
#include "frontend/tensor.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "runtime/error.h"
#include "runtime/philox.h"
#include "runtime/thread_pool.h"

namespace kiln {

namespace {
void checkShape(const char* op, const Shape& shape) {
  for (int64_t d : shape) KILN_CHECK(d >= 0, "{}: negative dimension in shape {}", op, ir::shapeStr(shape));
}

Tensor allocate(ir::TensorType type) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = runtime::allocateBuffer(type.device, static_cast<size_t>(type.numel() * itemSize(type.dtype)));
  impl->type = std::move(type);
  return Tensor(std::move(impl));
}

template <typename T>
void fill(void* data, int64_t n, double value) {
  T v = static_cast<T>(value);
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] = v;
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

void* Tensor::rawData(const char* what) const {
  KILN_CHECK(impl_, "{}: use of an undefined tensor", what);
  KILN_CHECK(!impl_->traced, "{}: cannot read the values of {} while tracing (kiln::compile): values are not known "
             "until the compiled function runs; return the tensor instead", what, str());
  KILN_CHECK(impl_->storage, "{}: {} has no storage", what, str());
  KILN_CHECK(device().isCpu(), "{}: {} is not on the cpu", what, str());
  return impl_->storage->data();
}

float Tensor::item() const {
  KILN_CHECK(defined() && numel() == 1, "item: expected a tensor with one element, got {}", str());
  KILN_CHECK(dtype() == DType::f32, "item: expected f32, got {}", str());
  return *static_cast<const float*>(rawData("item"));
}

std::vector<float> Tensor::toVector() const {
  const void* p = rawData("toVector");
  KILN_CHECK(dtype() == DType::f32, "toVector: expected an f32 tensor, got {}", str());
  std::vector<float> out(static_cast<size_t>(numel()));
  if (!out.empty()) std::memcpy(out.data(), p, out.size() * sizeof(float));
  return out;
}

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  checkShape("full", shape);
  Tensor t = allocate({dtype, shape, device});
  void* data = t.impl()->storage->data();
  const int64_t n = t.numel();
  switch (dtype) {
    case DType::f32: fill<float>(data, n, value); break;
    case DType::f64: fill<double>(data, n, value); break;
    case DType::i32: fill<int32_t>(data, n, value); break;
    case DType::i64: fill<int64_t>(data, n, value); break;
    case DType::boolean: fill<bool>(data, n, value); break;
    case DType::f16:
    case DType::bf16: fail("full: dtype {} is not supported yet", dtypeName(dtype));
  }
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  KILN_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
             "arange: expected finite bounds and a non-zero step, got start={}, end={}, step={}", start, end, step);
  KILN_CHECK(dtype == DType::f32, "arange: dtype {} is not supported yet (only f32)", dtypeName(dtype));
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  Tensor t = allocate({dtype, {n}, device});
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(start + static_cast<double>(i) * step);
  return t;
}

Tensor arange(double end) { return arange(0.0, end); }

Tensor fromVector(const std::vector<float>& values, const Shape& shape, Device device) {
  checkShape("fromVector", shape);
  KILN_CHECK(static_cast<int64_t>(values.size()) == ir::numel(shape),
             "fromVector: {} values cannot fill shape {} ({} elements)", values.size(), ir::shapeStr(shape),
             ir::numel(shape));
  Tensor t = allocate({DType::f32, shape, device});
  if (!values.empty()) std::memcpy(t.data<float>(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor fromVector(const std::vector<float>& values, Device device) {
  return fromVector(values, {static_cast<int64_t>(values.size())}, device);
}

Generator& defaultGenerator() {
  static Generator generator(0);
  return generator;
}

void manualSeed(uint64_t seed) { defaultGenerator().manualSeed(seed); }

Tensor randn(const Shape& shape, Generator& generator, Device device) {
  checkShape("randn", shape);
  Tensor t = allocate({DType::f32, shape, device});
  float* p = t.data<float>();
  const uint64_t offset = generator.advance();
  const runtime::PhiloxKey key = {static_cast<uint32_t>(generator.seed()), static_cast<uint32_t>(generator.seed() >> 32)};
  runtime::ThreadPool::instance().parallelFor(t.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      auto r = runtime::philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                                       static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                                      key);
      // Box-Muller; u1 is in (0, 1], so the log is finite.
      double u1 = runtime::uniformFromBits(r[0]), u2 = runtime::uniformFromBits(r[1]);
      p[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
    }
  });
  return t;
}

}  // namespace kiln

// Tensor accessors and factories.
#include "frontend/tensor.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "frontend/autograd/function.h"
#include "frontend/dispatch.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/numeric.h"
#include "runtime/pinned_memory.h"
#include "runtime/profiler_events.h"
#include "runtime/stream.h"

namespace kiln {

namespace {
void checkShape(const char* op, const Shape& shape) {
  for (int64_t d : shape) KILN_CHECK(d >= 0, "{}: negative dimension in shape {}", op, ir::shapeStr(shape));
}

/// A factory's device must be usable: an error naming the factory and why not.
void checkDevice(const char* op, Device device) {
  std::string why;
  KILN_CHECK(runtime::isDeviceAvailable(device, &why), "{}: cannot make a tensor on {}: {}", op, device.str(), why);
}

Tensor allocate(ir::TensorType type) {
  auto storage = runtime::allocateBuffer(type.device, static_cast<size_t>(type.numel() * itemSize(type.dtype)));
  return detail::contiguousTensor(std::move(type), std::move(storage));
}

/// A contiguous CPU tensor in pinned host memory.
Tensor pinnedTensor(ir::TensorType type) {
  auto storage = runtime::allocatePinnedBuffer(static_cast<size_t>(type.numel() * itemSize(type.dtype)));
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

void Tensor::checkReadable(const char* what, DType dtype) const {
  KILN_CHECK(impl_, "{}: use of an undefined tensor", what);
  KILN_CHECK(!impl_->traced,
             "{}: cannot read the values of {} while tracing (kiln::compile): values are not known "
             "until the compiled function runs; return the tensor instead",
             what, str());
  KILN_CHECK(impl_->storage, "{}: {} has no storage", what, str());
  KILN_CHECK(dtype == this->dtype(), "{}: {} holds {}, not {} (read it as {}, or convert it with to())", what, str(),
             elementTypeName(this->dtype()), elementTypeName(dtype), elementTypeName(this->dtype()));
}

void* Tensor::rawData(const char* what, DType dtype) const {
  checkReadable(what, dtype);
  KILN_CHECK(device().isCpu(), "{}: {} is not on the cpu (copy it with toVector(), or move it with to())", what, str());
  KILN_CHECK(isContiguous(),
             "{}: {} with strides {} is not contiguous (call contiguous() first, or read it with toVector())", what,
             str(), ir::shapeStr(strides()));
  // The user's accessor of CPU memory (Note [Device memory is opaque]).
  return static_cast<char*>(impl_->storage->hostData()) + impl_->offset * itemSize(dtype);
}

void Tensor::gather(const char* what, DType dtype, void* out) const {
  checkReadable(what, dtype);
  if (numel() == 0) return;
  // A view is made contiguous on its device first (one copy kernel), then
  // copied to the host in one piece; the copy waits for the stream.
  const Tensor source = isContiguous() ? *this : detail::eagerCopy(*this);
  const runtime::Buffer& storage = *source.impl()->storage;
  profiler::RecordFunction range("memcpy", "copy_device_to_host");
  if (range.event()) [[unlikely]]
    range.event()->detail = fmt::format("{} bytes from {}", numel() * itemSize(dtype), device().str());
  storage.driver().copyDeviceToHost(out, storage.ptr(static_cast<size_t>(source.storageOffset() * itemSize(dtype))),
                                    static_cast<size_t>(numel() * itemSize(dtype)), currentStream(device()).handle());
}

float Tensor::item() const { return item<float>(); }

Tensor Tensor::to(DType dtype) const {
  if (defined() && this->dtype() == dtype) return *this;
  return detail::dispatch(ir::Op::cast, {*this}, {{"dtype", dtype}});
}

Tensor Tensor::to(Device target, bool nonBlocking) const {
  KILN_CHECK(defined(), "to: use of an undefined tensor");
  if (device() == target) return *this;
  KILN_CHECK(!isTraced(), "to: moving {} to {} while tracing (kiln::compile) is not supported yet", str(),
             target.str());
  checkDevice("to", target);
  profiler::RecordFunction range("op", "to");
  const Tensor source = isContiguous() ? *this : detail::eagerCopy(*this);
  const size_t bytes = static_cast<size_t>(numel() * itemSize(dtype()));
  if (range.event()) [[unlikely]]
    range.event()->detail = fmt::format("{} bytes from {} to {}", bytes, device().str(), target.str());
  const runtime::Buffer& from = *source.impl()->storage;
  const auto fromPtr = from.ptr(static_cast<size_t>(source.storageOffset() * itemSize(dtype())));
  const bool toHost = target.isCpu();
  Tensor moved = toHost && nonBlocking ? pinnedTensor({dtype(), shape(), target}) : allocate({dtype(), shape(), target});
  const runtime::Buffer& to = *moved.impl()->storage;
  const runtime::StreamHandle fromStream = currentStream(device()).handle();
  const runtime::StreamHandle toStream = currentStream(target).handle();
  if (&from.driver() == &to.driver()) {
    to.driver().copyDeviceToDevice(to.ptr(), fromPtr, bytes, toStream);
  } else if (device().isCpu()) {
    // Note [Pinned memory]: only pinned memory is read after the call returns.
    const void* host = runtime::hostAddress(fromPtr);
    if (nonBlocking && from.pinned()) {
      to.driver().copyHostToDeviceAsync(to.ptr(), host, bytes, toStream);
      runtime::PinnedAllocator::instance().recordUse(host, target, toStream);
    } else {
      to.driver().copyHostToDevice(to.ptr(), host, bytes, toStream);
    }
  } else if (toHost) {
    void* host = to.hostData();
    if (nonBlocking) {
      from.driver().copyDeviceToHostAsync(host, fromPtr, bytes, fromStream);
      runtime::PinnedAllocator::instance().recordUse(host, device(), fromStream);
    } else {
      from.driver().copyDeviceToHost(host, fromPtr, bytes, fromStream);
    }
  } else {
    // Between two drivers by way of the host: the read waits for the
    // source's stream; the write is ordered on the target's.
    std::vector<unsigned char> host(bytes);
    from.driver().copyDeviceToHost(host.data(), fromPtr, bytes, fromStream);
    to.driver().copyHostToDevice(to.ptr(), host.data(), bytes, toStream);
  }
  const Device back = device();
  autograd::attach("ToCopyBackward", std::span<const Tensor>(this, 1), std::span<const Tensor>(&moved, 1),
                   [back](const std::vector<Tensor>& grads) { return std::vector<Tensor>{grads.at(0).to(back)}; });
  return moved;
}

Tensor Tensor::pinMemory() const {
  KILN_CHECK(defined(), "pinMemory: use of an undefined tensor");
  KILN_CHECK(device().isCpu(), "pinMemory: {} is on {}; only CPU tensors can be pinned", str(), device().str());
  KILN_CHECK(!isTraced(), "pinMemory: {} is traced (kiln::compile)", str());
  if (isPinned()) return *this;
  const Tensor source = isContiguous() ? *this : detail::eagerCopy(*this);
  Tensor pinned = pinnedTensor(type());
  const size_t bytes = static_cast<size_t>(numel() * itemSize(dtype()));
  if (bytes)
    std::memcpy(pinned.impl()->storage->hostData(),
                static_cast<const char*>(source.impl()->storage->hostData()) + source.storageOffset() * itemSize(dtype()),
                bytes);
  return pinned;
}

bool Tensor::isPinned() const { return defined() && impl_->storage && impl_->storage->pinned(); }

void Tensor::recordStream(const Stream& stream) const {
  KILN_CHECK(defined() && impl_->storage, "recordStream: use of an undefined tensor");
  KILN_CHECK(stream.device() == device(), "recordStream: {} is on {}, the stream on {}", str(), device().str(),
             stream.device().str());
  const runtime::Buffer& b = *impl_->storage;
  b.driver().recordStream(b.ptr(), stream.handle());
}

// Note [Fills are kernels]
// A fill runs on the tensor's device like any op: full() converts its value
// to the dtype on the host (as `cast` converts an f64), copies that one
// element to the device, and a copy kernel broadcasts it (its input read
// with stride 0), so every device fills through the kernels it already
// compiles, never through a host loop over the elements; copy_ writes
// through any strides with a copy kernel too (frontend/inplace.cpp), and
// random fills are kernels of their own ops. Factories whose values come
// from the host (fromVector, arange) copy them through the device's driver.
Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  checkShape("full", shape);
  checkDevice("full", device);
  // One element converted on the host as `cast` converts an f64
  // (runtime/numeric.h), then broadcast by a copy kernel on the device.
  unsigned char element[8];
  storeAs(element, dtype, value);
  return detail::broadcastElement(element, {dtype, shape, device});
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor arange(double start, double end, double step, DType dtype, Device device) {
  KILN_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
             "arange: expected finite bounds and a non-zero step, got start={}, end={}, step={}", start, end, step);
  KILN_CHECK(dtype != DType::boolean, "arange: dtype bool is not supported");
  checkDevice("arange", device);
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  // Element i is start + i * step in f64, converted on the host, then copied to the device.
  std::vector<unsigned char> host(static_cast<size_t>(n * itemSize(dtype)));
  for (int64_t i = 0; i < n; ++i)
    storeAs(host.data() + i * itemSize(dtype), dtype, start + static_cast<double>(i) * step);
  return detail::fromElements(host.data(), n, dtype, {n}, device);
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
  checkDevice("fromVector", device);
  Tensor t = allocate({dtype, shape, device});
  const runtime::Buffer& storage = *t.impl()->storage;
  storage.driver().copyHostToDevice(storage.ptr(), values, static_cast<size_t>(count * itemSize(dtype)),
                                    currentStream(device).handle());
  return t;
}

Tensor detail::broadcastElement(const void* element, const ir::TensorType& type) {
  Tensor scalar = fromElements(element, 1, type.dtype, {}, type.device);
  if (type.rank() == 0) return scalar;
  if (type.numel() == 0) return allocate(type);
  // The element seen with stride 0 along every dim, copied by one kernel
  // (Note [Fills are kernels]).
  auto impl = std::make_shared<TensorImpl>();
  impl->type = type;
  impl->strides.assign(type.shape.size(), 0);
  impl->storage = scalar.impl()->storage;
  return eagerCopy(Tensor(std::move(impl)));
}

}  // namespace kiln

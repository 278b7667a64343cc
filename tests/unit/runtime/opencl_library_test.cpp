// The library calls on OpenCL devices (runtime/opencl_library.h) against the
// CPU's (runtime/blas.h, runtime/indexing.h): the same buffers and arguments,
// run through a LibraryCall on opencl:0 with buffers of its driver (each
// starting some bytes into its allocation, so that the element offsets are
// exercised) and on host buffers, for every dtype.
//
// - matmul f32/f64 (CLBlast, or kiln's kernel without it): within
//   |opencl - cpu| <= 2·k·u·Σ|a||b| per element (u = 2^-24 for f32, 2^-53
//   for f64; the classic bound on a sum of k products, one for each side:
//   CLBlast and OpenBLAS sum in different orders, and may use FMA).
// - matmul f16/bf16: bit for bit, on operands that are multiples of 1/8 in
//   [-2, 2], whose products and sums are exact in f32 on both sides, so that
//   both round the same f32 once; i32/i64: bit for bit (wrapping).
// - index_select (every dtype, moved as bits) and index_add (f16/bf16 add in
//   f32 and round after every addition, integers wrap): bit for bit.
//   index_add's data has no NaN: a compiler may swap the operands of an
//   addition, which changes which NaN payload comes out.
// - an index out of range: kiln::Error with the CPU's text, output untouched.
//
// Skipped, saying why, where there is no OpenCL device. PoCL builds each
// kernel at its first launch and CLBlast's programs at their first call (all
// their kernels at once: 15-36 s cold each), so the shapes are small and one
// test makes every call that goes to CLBlast.
#include "runtime/opencl_library.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/blas.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/executable.h"
#include "runtime/indexing.h"
#include "runtime/numeric.h"
#include "runtime/opencl_runtime.h"

namespace kiln::runtime {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64};

/// What random values to make.
enum class Values {
  uniform,  ///< floats in [-1, 1], integers over their whole range
  eighths,  ///< multiples of 1/8 in [-2, 2] (exact products and sums)
  wide,     ///< floats of every magnitude, subnormals and infinities (no NaN)
  bits,     ///< any bit pattern
};

template <typename T>
T get(const Bytes& bytes, int64_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void set(Bytes& bytes, int64_t i, T v) {
  std::memcpy(bytes.data() + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

/// Element i as a double (f16/bf16 widened).
double valueAt(const Bytes& bytes, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32: return get<float>(bytes, i);
    case DType::f64: return get<double>(bytes, i);
    case DType::f16: return f16BitsToF32(get<uint16_t>(bytes, i));
    case DType::bf16: return bf16BitsToF32(get<uint16_t>(bytes, i));
    case DType::i32: return get<int32_t>(bytes, i);
    case DType::i64: return static_cast<double>(get<int64_t>(bytes, i));
    case DType::boolean: return get<uint8_t>(bytes, i);
  }
  return 0;
}

void setFloat(Bytes& bytes, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::f32: return set(bytes, i, static_cast<float>(v));
    case DType::f64: return set(bytes, i, v);
    case DType::f16: return set(bytes, i, f32ToF16Bits(static_cast<float>(v)));
    case DType::bf16: return set(bytes, i, f32ToBf16Bits(static_cast<float>(v)));
    case DType::i32:
    case DType::i64:
    case DType::boolean: break;
  }
  FAIL() << "setFloat of " << dtypeName(dtype);
}

Bytes randomValues(DType dtype, int64_t count, Values kind, std::mt19937_64& rng) {
  const int64_t item = itemSize(dtype);
  Bytes bytes(static_cast<size_t>(count * item));
  const bool isFloat = isFloatingPoint(dtype);
  for (int64_t i = 0; i < count; ++i) {
    if (kind == Values::bits || !isFloat) {
      const uint64_t r = rng();
      std::memcpy(bytes.data() + i * item, &r, static_cast<size_t>(item));
      if (dtype == DType::boolean) bytes[static_cast<size_t>(i)] &= 1;
      continue;
    }
    double v = 0;
    if (kind == Values::uniform) {
      v = std::uniform_real_distribution<double>(-1, 1)(rng);
    } else if (kind == Values::eighths) {
      v = static_cast<double>(std::uniform_int_distribution<int>(-16, 16)(rng)) / 8;
    } else {
      // Exponents across the dtype's range, from subnormal to overflowing
      // (rounded to inf), and an occasional infinity.
      const int low = dtype == DType::f16 ? -26 : -140, high = dtype == DType::f16 ? 16 : 100;
      v = std::ldexp(std::uniform_real_distribution<double>(1, 2)(rng),
                     std::uniform_int_distribution<int>(low, high)(rng));
      if (rng() % 2) v = -v;
      if (rng() % 50 == 0) v = v > 0 ? INFINITY : -INFINITY;
    }
    setFloat(bytes, dtype, i, v);
  }
  return bytes;
}

/// Elements from the first to the last that a view reads.
int64_t extent(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    last += (sizes[d] - 1) * strides[d];
  }
  return last + 1;
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  return strides;
}

class OpenCLLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!opencl::available(&why)) GTEST_SKIP() << "no OpenCL device: " << why;
  }
  void TearDown() override {
    for (DevicePtr p : allocations_) device().free(p);
  }

  static DeviceInterface& device() { return deviceInterface(Device::opencl(0)); }

  /// `bytes` on the device, `offset` bytes into an allocation whose other
  /// bytes are 0xa5.
  DevicePtr upload(const Bytes& bytes, size_t offset, StreamHandle stream = {}) {
    const DevicePtr base = device().allocate(offset + bytes.size() + 16, stream);
    allocations_.push_back(base);
    Bytes all(offset + bytes.size() + 16, 0xa5);
    std::copy(bytes.begin(), bytes.end(), all.begin() + static_cast<std::ptrdiff_t>(offset));
    device().copyHostToDevice(base, all.data(), all.size(), stream);
    return {base.handle, base.offset + offset};
  }
  static Bytes download(DevicePtr p, size_t bytes, StreamHandle stream = {}) {
    Bytes host(bytes);
    device().copyDeviceToHost(host.data(), p, bytes, stream);
    return host;
  }

  /// Runs `cpu` on host copies of `inputs` and `opencl` on device copies
  /// (input i `8 * (i + 1)` bytes into its allocation, the output 24), each
  /// writing an output of `outBytes` bytes that starts as 0xff bytes;
  /// returns the CPU's output, then the device's.
  std::pair<Bytes, Bytes> runBoth(CpuLibraryFn cpu, LibraryFn opencl, const std::vector<Bytes>& inputs, size_t outBytes,
                                  const std::vector<int64_t>& args, StreamHandle stream = {}) {
    std::vector<Bytes> host = inputs;
    host.emplace_back(outBytes, 0xff);
    std::vector<void*> hostPtrs;
    for (Bytes& b : host) hostPtrs.push_back(b.data());
    cpu(hostPtrs, args);

    std::vector<DevicePtr> buffers;
    for (size_t i = 0; i < inputs.size(); ++i) buffers.push_back(upload(inputs[i], 8 * (i + 1), stream));
    buffers.push_back(upload(Bytes(outBytes, 0xff), 24, stream));
    const LibraryCall call{Device::opencl(0), stream, buffers, args};
    opencl(call);
    return {host.back(), download(buffers.back(), outBytes, stream)};
  }

  std::vector<DevicePtr> allocations_;
};

// --- matmul ---

/// One layout of a matmul: a's and b's strides; the dtype is set per run.
struct MatmulLayout {
  MatmulCall call;
  int64_t aElements() const {
    std::vector<int64_t> sizes = call.batch, strides = call.aBatchStrides;
    sizes.insert(sizes.end(), {call.m, call.k});
    strides.insert(strides.end(), {call.aRowStride, call.aColStride});
    return extent(sizes, strides);
  }
  int64_t bElements() const {
    std::vector<int64_t> sizes = call.batch, strides = call.bBatchStrides;
    sizes.insert(sizes.end(), {call.k, call.n});
    strides.insert(strides.end(), {call.bRowStride, call.bColStride});
    return extent(sizes, strides);
  }
  int64_t outElements() const {
    int64_t n = call.m * call.n;
    for (int64_t size : call.batch) n *= size;
    return n;
  }
};

MatmulLayout plain(int64_t m, int64_t n, int64_t k) {
  MatmulLayout l;
  l.call.m = m, l.call.n = n, l.call.k = k;
  l.call.aRowStride = k, l.call.aColStride = 1;
  l.call.bRowStride = n, l.call.bColStride = 1;
  return l;
}

class OpenCLMatmul : public OpenCLLibrary {
 protected:
  /// The layout in each of `dtypes`, compared as the file's comment says.
  void check(MatmulLayout layout, const std::vector<DType>& dtypes, StreamHandle stream = {}) {
    std::mt19937_64 rng(1234);
    for (DType dtype : dtypes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)));
      MatmulCall& c = layout.call;
      c.dtype = dtype;
      const bool half = dtype == DType::f16 || dtype == DType::bf16;
      const Values kind = half ? Values::eighths : Values::uniform;
      const Bytes a = randomValues(dtype, layout.aElements(), kind, rng);
      const Bytes b = randomValues(dtype, layout.bElements(), kind, rng);
      const int64_t item = itemSize(dtype);
      const auto outBytes = static_cast<size_t>(layout.outElements() * item);
      const auto [cpu, onDevice] = runBoth(&runtime::matmul, &opencl::matmul, {a, b}, outBytes, c.encode(), stream);
      if (dtype != DType::f32 && dtype != DType::f64) {
        EXPECT_EQ(cpu, onDevice) << "bit for bit";
        continue;
      }
      // Σ|a||b| per element: the CPU's matmul of the magnitudes.
      Bytes absA = a, absB = b;
      for (Bytes* x : {&absA, &absB})
        for (int64_t i = 0; i < static_cast<int64_t>(x->size()) / item; ++i)
          setFloat(*x, dtype, i, std::fabs(valueAt(*x, dtype, i)));
      Bytes scale(outBytes);
      std::vector<void*> ptrs = {absA.data(), absB.data(), scale.data()};
      runtime::matmul(ptrs, c.encode());
      const double u = dtype == DType::f64 ? 0x1p-53 : 0x1p-24;
      int bad = 0;
      for (int64_t i = 0; i < layout.outElements(); ++i) {
        const double want = valueAt(cpu, dtype, i), got = valueAt(onDevice, dtype, i);
        const double tolerance = 2.0 * static_cast<double>(c.k) * u * valueAt(scale, dtype, i);
        if (!(std::fabs(got - want) <= tolerance) && bad++ < 5)
          ADD_FAILURE() << "element " << i << ": " << got << " on opencl:0, " << want << " on the CPU (tolerance "
                        << tolerance << ")";
      }
    }
  }
};

struct NamedLayout {
  std::string name;
  MatmulLayout layout;
  bool batched = false;  ///< a batch that stays one (CLBlast: strided-batched calls)
};

// ctest shows a parameter by this, not by its bytes.
void PrintTo(const NamedLayout& l, std::ostream* os) { *os << l.name; }

std::vector<NamedLayout> layouts() {
  std::vector<NamedLayout> all;
  all.push_back({"Contiguous", plain(5, 7, 9)});
  {
    // a is the transpose of a contiguous [k, m], b of a contiguous [n, k].
    MatmulLayout l = plain(6, 5, 11);
    l.call.aRowStride = 1, l.call.aColStride = 6;
    l.call.bRowStride = 1, l.call.bColStride = 11;
    all.push_back({"Transposed", l});
  }
  {
    // Views of every row's first columns: rows 13 and 8 elements apart.
    MatmulLayout l = plain(4, 6, 10);
    l.call.aRowStride = 13, l.call.bRowStride = 8;
    all.push_back({"RowsApartByMoreThanTheirLength", l});
  }
  {
    // a = s[::2, ::3] of a contiguous [8, 21] s; b's columns 2 apart and
    // rows 17: CLBlast gets copies.
    MatmulLayout l = plain(4, 5, 7);
    l.call.aRowStride = 42, l.call.aColStride = 3;
    l.call.bRowStride = 17, l.call.bColStride = 2;
    all.push_back({"DoublyStrided", l});
  }
  {
    // [3, 4, 6] x [6, 5]: b is one matrix for the batch (stride 0), which
    // folds into the rows.
    MatmulLayout l = plain(4, 5, 6);
    l.call.batch = {3};
    l.call.aBatchStrides = {24};
    l.call.bBatchStrides = {0};
    all.push_back({"BatchBroadcastFoldsIntoRows", l});
  }
  {
    // A [2, 1, 3] batch: a broadcast over the first dim and transposed, b
    // batched with a gap between its matrices, and a size-1 dim that drops.
    MatmulLayout l = plain(3, 4, 5);
    l.call.batch = {2, 1, 3};
    l.call.aBatchStrides = {0, 99, 15};
    l.call.aRowStride = 1, l.call.aColStride = 3;
    l.call.bBatchStrides = {3 * 24, 0, 24};
    all.push_back({"BatchWithABroadcastAndATransposedOperand", l, true});
  }
  {
    // b broadcast over the first batch dim and doubly strided; a's batch
    // strides do not merge.
    MatmulLayout l = plain(3, 2, 4);
    l.call.batch = {2, 3};
    l.call.aBatchStrides = {40, 12};
    l.call.bBatchStrides = {0, 50};
    l.call.bRowStride = 10, l.call.bColStride = 3;
    all.push_back({"BatchOfDoublyStridedOperands", l, true});
  }
  return all;
}

class OpenCLMatmulLayouts : public OpenCLMatmul, public ::testing::WithParamInterface<NamedLayout> {};

// f16, bf16, i32 and i64: kiln's GEMM kernel.
TEST_P(OpenCLMatmulLayouts, KernelDTypesBitForBit) {
  check(GetParam().layout, {DType::f16, DType::bf16, DType::i32, DType::i64});
}

INSTANTIATE_TEST_SUITE_P(OpenCL, OpenCLMatmulLayouts, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<NamedLayout>& info) { return info.param.name; });

// f32 and f64: CLBlast (kiln's kernel in a build without it). One test for
// every layout, so that one process pays for CLBlast's programs: PoCL builds
// each (routine, precision) cold in 15 s (Sgemm) to 36 s (strided-batched),
// all of its kernels at once. f64 batches that stay batches are left out:
// CLBlastDgemmStridedBatched is CLBlastSgemmStridedBatched's call with the
// other name, and its program would cost another 36 s. On a stream of its
// own, so that CLBlast's queue and the scratch buffers are the call's.
TEST_F(OpenCLMatmul, F32AndF64ThroughClblastOnAStreamOfItsOwn) {
  const StreamHandle stream = device().createStream();
  for (const NamedLayout& l : layouts()) {
    SCOPED_TRACE(l.name);
    if (l.batched)
      check(l.layout, {DType::f32}, stream);
    else
      check(l.layout, {DType::f32, DType::f64}, stream);
  }
  device().synchronizeStream(stream);
  device().destroyStream(stream);
}

TEST_F(OpenCLMatmul, AnEmptyInnerDimGivesZerosAndAnEmptyResultWritesNothing) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    MatmulLayout zeros = plain(3, 4, 0);
    zeros.call.dtype = dtype;
    const auto outBytes = static_cast<size_t>(12 * itemSize(dtype));
    const auto [cpu, onDevice] = runBoth(&runtime::matmul, &opencl::matmul, {{}, {}}, outBytes, zeros.call.encode());
    EXPECT_EQ(onDevice, Bytes(outBytes, 0));
    EXPECT_EQ(cpu, onDevice);
    MatmulLayout empty = plain(0, 4, 5);
    empty.call.dtype = dtype;
    const auto [cpuEmpty, onDeviceEmpty] =
        runBoth(&runtime::matmul, &opencl::matmul, {Bytes(40), Bytes(40)}, 8, empty.call.encode());
    EXPECT_EQ(onDeviceEmpty, Bytes(8, 0xff)) << "nothing written";
  }
}

// --- index_select and index_add ---

/// An index of `count` values at stride `stride` (the gaps hold -1).
Bytes makeIndex(DType dtype, const std::vector<int64_t>& values, int64_t stride) {
  const int64_t item = itemSize(dtype);
  const int64_t n = values.empty() ? 0 : (static_cast<int64_t>(values.size()) - 1) * stride + 1;
  Bytes bytes(static_cast<size_t>(n * item), 0xff);
  for (size_t j = 0; j < values.size(); ++j) {
    const int64_t at = static_cast<int64_t>(j) * stride;
    if (dtype == DType::i32)
      set(bytes, at, static_cast<int32_t>(values[j]));
    else
      set(bytes, at, values[j]);
  }
  return bytes;
}

struct IndexCase {
  IndexCall call;  // dtype set per run
  std::vector<int64_t> index;
};

class OpenCLIndexing : public OpenCLLibrary {
 protected:
  void checkSelect(IndexCase ic, const std::vector<DType>& dtypes) {
    std::mt19937_64 rng(99);
    for (DType dtype : dtypes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)));
      IndexCall& c = ic.call;
      c.dtype = dtype;
      c.numIndices = static_cast<int64_t>(ic.index.size());
      const Bytes x = randomValues(dtype, extent(c.sizes, c.strides), Values::bits, rng);
      int64_t outElements = c.numIndices;
      for (size_t d = 0; d < c.sizes.size(); ++d)
        if (static_cast<int64_t>(d) != c.dim) outElements *= c.sizes[d];
      const auto [cpu, onDevice] =
          runBoth(&runtime::indexSelect, &opencl::indexSelect, {x, makeIndex(c.indexDType, ic.index, c.indexStride)},
                  static_cast<size_t>(outElements * itemSize(dtype)), c.encode());
      EXPECT_EQ(cpu, onDevice);
    }
  }
  void checkAdd(IndexCase ic, const std::vector<DType>& dtypes, StreamHandle stream = {}) {
    std::mt19937_64 rng(7);
    for (DType dtype : dtypes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)));
      IndexCall& c = ic.call;
      c.dtype = dtype;
      c.numIndices = static_cast<int64_t>(ic.index.size());
      std::vector<int64_t> sourceSizes = c.sizes;
      sourceSizes[static_cast<size_t>(c.dim)] = c.numIndices;
      const Bytes x = randomValues(dtype, extent(c.sizes, c.strides), Values::wide, rng);
      const Bytes source = randomValues(dtype, extent(sourceSizes, c.sourceStrides), Values::wide, rng);
      int64_t outElements = 1;
      for (int64_t size : c.sizes) outElements *= size;
      const auto [cpu, onDevice] =
          runBoth(&runtime::indexAdd, &opencl::indexAdd, {x, makeIndex(c.indexDType, ic.index, c.indexStride), source},
                  static_cast<size_t>(outElements * itemSize(dtype)), c.encode(), stream);
      EXPECT_EQ(cpu, onDevice);
    }
  }
};

std::vector<DType> withBool() {
  std::vector<DType> all(std::begin(kAllDTypes), std::end(kAllDTypes));
  all.push_back(DType::boolean);
  return all;
}
const std::vector<DType> kArithmetic(std::begin(kAllDTypes), std::end(kAllDTypes));

TEST_F(OpenCLIndexing, SelectAlongTheMiddleDimOfAStridedTensorWithAStridedI32Index) {
  // x [4, 5, 3] is a permutation of a contiguous [3, 4, 5]; the index is
  // read every other element and repeats.
  IndexCase ic;
  ic.call.indexDType = DType::i32;
  ic.call.dim = 1;
  ic.call.sizes = {4, 5, 3};
  ic.call.strides = {5, 1, 20};
  ic.call.indexStride = 2;
  ic.index = {4, 0, 2, 2, 1, 4};
  checkSelect(ic, withBool());
}

TEST_F(OpenCLIndexing, SelectRowsWithAnI64Index) {
  IndexCase ic;
  ic.call.indexDType = DType::i64;
  ic.call.dim = 0;
  ic.call.sizes = {6, 7};
  ic.call.strides = {7, 1};
  ic.call.indexStride = 1;
  ic.index = {5, 0, 5, 3};
  checkSelect(ic, withBool());
}

TEST_F(OpenCLIndexing, SelectOfNoIndicesWritesNothing) {
  IndexCase ic;
  ic.call.sizes = {6, 7};
  ic.call.strides = {7, 1};
  checkSelect(ic, {DType::f32});
}

TEST_F(OpenCLIndexing, AddRepeatedRowsInIndexOrderFromAStridedSourceOnAStream) {
  // x [5, 4] is a transposed view, source [7, 4] has rows 6 apart; rows 2
  // and 4 get several additions each.
  IndexCase ic;
  ic.call.indexDType = DType::i64;
  ic.call.dim = 0;
  ic.call.sizes = {5, 4};
  ic.call.strides = {1, 5};
  ic.call.sourceStrides = {6, 1};
  ic.call.indexStride = 1;
  ic.index = {2, 0, 2, 2, 4, 1, 4};
  const StreamHandle stream = device().createStream();  // the index is read back on the call's stream
  checkAdd(ic, kArithmetic, stream);
  device().destroyStream(stream);
}

TEST_F(OpenCLIndexing, AddAlongTheMiddleDimWithAStridedI32Index) {
  IndexCase ic;
  ic.call.indexDType = DType::i32;
  ic.call.dim = 1;
  ic.call.sizes = {3, 6, 2};
  ic.call.strides = {12, 2, 1};
  ic.call.sourceStrides = {1, 3, 24};  // a permutation of a contiguous [2, 8, 3]
  ic.call.indexStride = 3;
  ic.index = {5, 5, 0, 3, 5, 1, 0, 5};
  checkAdd(ic, kArithmetic);
}

TEST_F(OpenCLIndexing, AddInPlaceOnAContiguousTensor) {
  // x and out are one buffer: the copy of x is skipped, the sums are the same.
  std::mt19937_64 rng(5);
  IndexCall c;
  c.dtype = DType::f16;
  c.indexDType = DType::i64;
  c.sizes = {4, 3};
  c.strides = {3, 1};
  c.sourceStrides = {3, 1};
  c.numIndices = 5;
  const Bytes x = randomValues(DType::f16, 12, Values::wide, rng);
  const Bytes source = randomValues(DType::f16, 15, Values::wide, rng);
  const Bytes index = makeIndex(DType::i64, {3, 1, 3, 0, 3}, 1);
  Bytes cpu = x;
  std::vector<void*> ptrs = {const_cast<uint8_t*>(x.data()), const_cast<uint8_t*>(index.data()),
                             const_cast<uint8_t*>(source.data()), cpu.data()};
  runtime::indexAdd(ptrs, c.encode());
  const DevicePtr xs = upload(x, 16);
  const std::vector<DevicePtr> buffers = {xs, upload(index, 0), upload(source, 8), xs};
  const std::vector<int64_t> args = c.encode();
  opencl::indexAdd(LibraryCall{Device::opencl(0), {}, buffers, args});
  EXPECT_EQ(download(xs, x.size()), cpu);
}

TEST_F(OpenCLIndexing, AddOnATensorOfMoreDimsThanAKernelWalks) {
  // x [2, ..., 2] (18 dims) is the full transpose of a contiguous tensor:
  // no dims merge, so its copy to out is split on the host; source is
  // contiguous and merges to [3, 2^17].
  IndexCase ic;
  ic.call.indexDType = DType::i64;
  ic.call.dim = 0;
  ic.call.sizes = std::vector<int64_t>(18, 2);
  for (int d = 0; d < 18; ++d) ic.call.strides.push_back(int64_t{1} << d);
  std::vector<int64_t> sourceSizes = ic.call.sizes;
  sourceSizes[0] = 3;
  ic.call.sourceStrides = contiguousStrides(sourceSizes);
  ic.call.indexStride = 1;
  ic.index = {1, 0, 1};
  checkAdd(ic, {DType::f32});
}

TEST_F(OpenCLIndexing, AnIndexOutOfRangeIsTheCpuErrorAndWritesNothing) {
  for (DType indexDType : {DType::i32, DType::i64}) {
    for (int64_t bad : {int64_t{7}, int64_t{-1}}) {
      SCOPED_TRACE(fmt::format("{} index {}", dtypeName(indexDType), bad));
      IndexCall c;
      c.dtype = DType::f32;
      c.indexDType = indexDType;
      c.dim = 0;
      c.sizes = {5, 2};
      c.strides = {2, 1};
      c.sourceStrides = {2, 1};
      c.numIndices = 3;
      const Bytes index = makeIndex(indexDType, {0, bad, 4}, 1);
      const std::vector<int64_t> addArgs = c.encode();
      IndexCall s = c;
      s.sourceStrides.clear();
      const std::vector<int64_t> selectArgs = s.encode();
      const Bytes x(40, 0), source(24, 0), untouched(40, 0xff);
      std::vector<void*> cpuSelect = {const_cast<uint8_t*>(x.data()), const_cast<uint8_t*>(index.data()),
                                      const_cast<uint8_t*>(untouched.data())};
      std::string cpuText;
      try {
        runtime::indexSelect(cpuSelect, selectArgs);
      } catch (const Error& e) {
        cpuText = e.what();
      }
      EXPECT_EQ(cpuText, fmt::format("index_select: index {} is out of range for dimension 0 of size 5", bad));

      const DevicePtr xd = upload(x, 0), indexd = upload(index, 8), sourced = upload(source, 0);
      const DevicePtr out = upload(untouched, 16);
      const std::vector<DevicePtr> select = {xd, indexd, out};
      try {
        opencl::indexSelect(LibraryCall{Device::opencl(0), {}, select, selectArgs});
        ADD_FAILURE() << "expected a kiln::Error";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), cpuText);
      }
      const std::vector<DevicePtr> add = {xd, indexd, sourced, out};
      try {
        opencl::indexAdd(LibraryCall{Device::opencl(0), {}, add, addArgs});
        ADD_FAILURE() << "expected a kiln::Error";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  fmt::format("index_add: index {} is out of range for dimension 0 of size 5", bad));
      }
      EXPECT_EQ(download(out, untouched.size()), untouched) << "nothing written";
    }
  }
}

}  // namespace
}  // namespace kiln::runtime

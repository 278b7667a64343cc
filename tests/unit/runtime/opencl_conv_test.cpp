// The three convolution calls on OpenCL devices (runtime/opencl_conv.cpp)
// against a plain f64 loop written here from runtime/conv.h's formula, and
// ConvCall's arguments (runtime/conv_call.cpp).
//
// Each case is run as forward, transpose and weightGrad, in f32, f64 (where
// the device has it), f16 and bf16, on random values in [-1, 1] rounded to
// the dtype (the reference reads the same rounded values). The operands sit
// some bytes into their allocations, are read through their strides (the
// gaps between the elements hold other random values), and the result is
// written contiguous into a buffer that starts as 0xff bytes (NaN in every
// float dtype), between guard bytes that must stay as they were. An element
// passes when |opencl − reference| <= tolerance · Σ|terms| (the sum of the
// magnitudes of its products; 0 for a sum of no terms, which must then be
// exactly 0):
// - f32: 1e-5. The classic bound on a sum of K products in f32 is
//   K · 2^-24 · Σ|terms|, below 1e-5 · Σ|terms| for K <= 167; the cases stay
//   under 160 terms an element, and the test checks that they do.
// - f64: 1e-13 (the same bound with 2^-53).
// - f16: 1e-3 and bf16: 8e-3: the sum in f32 as above, then one rounding to
//   2^-11 (f16) or 2^-8 (bf16) of a value no larger than Σ|terms|.
//
// Skipped, saying why, where there is no OpenCL device.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "runtime/conv.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"
#include "runtime/executable.h"
#include "runtime/numeric.h"
#include "runtime/opencl_library.h"
#include "runtime/opencl_runtime.h"

namespace kiln::runtime {
namespace {

using Bytes = std::vector<uint8_t>;
using Kind = ConvCall::Kind;
using Strides = std::array<int64_t, 4>;

constexpr int64_t kMaxTerms = 160;  ///< per element, for the f32 tolerance (the file's comment)

double valueAt(const Bytes& bytes, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      return v;
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, bytes.data() + i * 8, 8);
      return v;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t v;
      std::memcpy(&v, bytes.data() + i * 2, 2);
      return dtype == DType::f16 ? f16BitsToF32(v) : bf16BitsToF32(v);
    }
    default: break;
  }
  ADD_FAILURE() << "valueAt of " << dtypeName(dtype);
  return 0;
}

void setValue(Bytes& bytes, DType dtype, int64_t i, double v) {
  const auto f = static_cast<float>(v);
  uint16_t h = 0;
  switch (dtype) {
    case DType::f32: std::memcpy(bytes.data() + i * 4, &f, 4); return;
    case DType::f64: std::memcpy(bytes.data() + i * 8, &v, 8); return;
    case DType::f16: h = f32ToF16Bits(f); break;
    case DType::bf16: h = f32ToBf16Bits(f); break;
    default: ADD_FAILURE() << "setValue of " << dtypeName(dtype); return;
  }
  std::memcpy(bytes.data() + i * 2, &h, 2);
}

/// Where an operand is read from: its strides and how many elements into
/// its allocation it starts (a sliced view's offset).
struct Layout {
  Strides strides{};
  int64_t offset = 0;
};

/// One convolution geometry; the kind and dtype are set per run. Operands
/// are contiguous unless a layout says otherwise.
struct ConvCase {
  std::string name;
  ConvCall call;
  std::optional<Layout> x, w, y;
};

// ctest shows a parameter by this, not by its bytes.
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

/// The sizes of x, w and y, NCHW / OIHW.
std::array<int64_t, 4> xSizes(const ConvCall& c) { return {c.n, c.c, c.h, c.w}; }
std::array<int64_t, 4> wSizes(const ConvCall& c) { return {c.o, c.c / c.groups, c.kh, c.kw}; }
std::array<int64_t, 4> ySizes(const ConvCall& c) { return {c.n, c.o, c.ho, c.wo}; }

int64_t numel(const std::array<int64_t, 4>& sizes) { return sizes[0] * sizes[1] * sizes[2] * sizes[3]; }

/// Elements from an operand's first to its last, plus its offset.
int64_t storage(const std::array<int64_t, 4>& sizes, const Layout& l) {
  int64_t last = 0;
  for (size_t d = 0; d < 4; ++d) {
    if (sizes[d] == 0) return l.offset;
    last += (sizes[d] - 1) * l.strides[d];
  }
  return l.offset + last + 1;
}

/// A geometry: ho and wo from the bottom and right padding (rounded down
/// with the stride, as a framework's output size is).
ConvCall geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw, int64_t groups,
                  std::array<int64_t, 2> stride, std::array<int64_t, 2> dilation,
                  std::array<int64_t, 4> pad /* top, left, bottom, right */) {
  ConvCall call;
  call.n = n, call.c = c, call.h = h, call.w = w, call.o = o, call.kh = kh, call.kw = kw, call.groups = groups;
  call.strideH = stride[0], call.strideW = stride[1], call.dilationH = dilation[0], call.dilationW = dilation[1];
  call.padTop = pad[0], call.padLeft = pad[1];
  call.ho = (h + pad[0] + pad[2] - (kh - 1) * dilation[0] - 1) / stride[0] + 1;
  call.wo = (w + pad[1] + pad[3] - (kw - 1) * dilation[1] - 1) / stride[1] + 1;
  return call;
}

std::vector<ConvCase> cases() {
  std::vector<ConvCase> all;
  all.push_back({"Plain3x3", geometry(2, 3, 7, 6, 4, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}), {}, {}, {}});
  // Two groups of 4 input and 6 output channels: a work-item takes 4
  // output channels, so the second tile of each group has 2.
  all.push_back(
      {"TwoGroupsOfUnevenTiles", geometry(2, 8, 6, 5, 12, 3, 2, 2, {1, 1}, {1, 1}, {1, 0, 1, 0}), {}, {}, {}});
  all.push_back({"Depthwise", geometry(2, 5, 7, 7, 5, 3, 3, 5, {1, 1}, {1, 1}, {1, 1, 1, 1}), {}, {}, {}});
  all.push_back({"DepthwiseTimesTwo", geometry(1, 3, 6, 5, 6, 3, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}), {}, {}, {}});
  all.push_back({"Stride2", geometry(2, 4, 9, 8, 5, 3, 3, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}), {}, {}, {}});
  all.push_back({"Dilation2", geometry(1, 3, 8, 9, 4, 3, 3, 1, {1, 1}, {2, 2}, {2, 2, 2, 2}), {}, {}, {}});
  // Rows 8 and 9 of x are never read (padBottom -2): their gradient is 0.
  all.push_back({"AsymmetricWithNegativePadBottom",
                 geometry(2, 3, 10, 7, 4, 3, 3, 1, {2, 1}, {1, 2}, {1, 0, -2, 1}),
                 {},
                 {},
                 {}});
  // Two quads of window columns (weightGrad computes 4 a work-item), the
  // second of 3.
  all.push_back({"SevenWideWindow", geometry(1, 2, 5, 12, 4, 2, 7, 1, {1, 1}, {1, 1}, {0, 3, 0, 3}), {}, {}, {}});
  all.push_back({"OneByOne", geometry(2, 6, 5, 4, 8, 1, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}), {}, {}, {}});
  // Every other row and column of x is skipped (padRight -1).
  all.push_back({"OneByOneStride2", geometry(2, 6, 5, 6, 4, 1, 1, 1, {2, 2}, {1, 1}, {0, 0, 0, -1}), {}, {}, {}});
  {
    // x and y channels-last, w HWIO.
    ConvCase c{"ChannelsLast", geometry(2, 5, 6, 5, 6, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}), {}, {}, {}};
    const ConvCall& k = c.call;
    c.x = Layout{{k.h * k.w * k.c, 1, k.w * k.c, k.c}, 0};
    c.w = Layout{{1, k.o, k.kw * k.c * k.o, k.c * k.o}, 0};
    c.y = Layout{{k.ho * k.wo * k.o, 1, k.wo * k.o, k.o}, 0};
    all.push_back(c);
  }
  {
    // x = big[1:3, 2:5, 1:8, ::2] of a contiguous big [4, 6, 9, 14]; y rows
    // 9 apart and images 2 channels apart more than they need; w's output
    // channels 50 apart.
    ConvCase c{"SlicedViews", geometry(2, 3, 7, 7, 4, 3, 2, 1, {1, 2}, {1, 1}, {0, 1, 1, 0}), {}, {}, {}};
    c.x = Layout{{6 * 9 * 14, 9 * 14, 14, 2}, 1 * 6 * 9 * 14 + 2 * 9 * 14 + 1 * 14 + 1};
    c.w = Layout{{50, 6, 2, 1}, 3};
    c.y = Layout{{(4 + 2) * c.call.ho * 9, c.call.ho * 9, 9, 1}, 5};
    all.push_back(c);
  }
  // A batch of none: forward's and transpose's results are empty (nothing
  // written), weightGrad's is all zeros.
  all.push_back({"EmptyBatch", geometry(0, 4, 5, 5, 4, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}), {}, {}, {}});
  // No input channels: forward's result is all zeros, the others empty.
  all.push_back({"NoInputChannels", geometry(1, 0, 4, 4, 3, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}), {}, {}, {}});
  return all;
}

/// The f64 reference and Σ|terms| of the result of `kind`, contiguous, from
/// the other two operands given as functions of their NCHW / OIHW indices:
/// conv.h's formula, one term at a time.
struct Reference {
  std::vector<double> value, magnitude;
  int64_t maxTerms = 0;
};

template <typename X, typename W, typename Y>
Reference reference(const ConvCall& c, Kind kind, X x, W w, Y y) {
  const std::array<int64_t, 4> sizes = kind == Kind::forward     ? ySizes(c)
                                       : kind == Kind::transpose ? xSizes(c)
                                                                 : wSizes(c);
  Reference r;
  r.value.assign(static_cast<size_t>(numel(sizes)), 0.0);
  r.magnitude.assign(r.value.size(), 0.0);
  std::vector<int64_t> terms(r.value.size(), 0);
  const auto at = [&](int64_t a, int64_t b, int64_t d, int64_t e) {
    return static_cast<size_t>(((a * sizes[1] + b) * sizes[2] + d) * sizes[3] + e);
  };
  const int64_t cg = c.c / c.groups, og = c.o / c.groups;
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t o = 0; o < c.o; ++o)
      for (int64_t i = 0; i < c.ho; ++i)
        for (int64_t j = 0; j < c.wo; ++j)
          for (int64_t cl = 0; cl < cg; ++cl)
            for (int64_t p = 0; p < c.kh; ++p)
              for (int64_t q = 0; q < c.kw; ++q) {
                const int64_t ch = o / og * cg + cl;
                const int64_t ih = i * c.strideH + p * c.dilationH - c.padTop;
                const int64_t iw = j * c.strideW + q * c.dilationW - c.padLeft;
                if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
                size_t to = 0;
                double term = 0;
                switch (kind) {
                  case Kind::forward: to = at(n, o, i, j), term = x(n, ch, ih, iw) * w(o, cl, p, q); break;
                  case Kind::transpose: to = at(n, ch, ih, iw), term = y(n, o, i, j) * w(o, cl, p, q); break;
                  case Kind::weightGrad: to = at(o, cl, p, q), term = x(n, ch, ih, iw) * y(n, o, i, j); break;
                }
                r.value[to] += term;
                r.magnitude[to] += std::fabs(term);
                r.maxTerms = std::max(r.maxTerms, ++terms[to]);
              }
  return r;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32: return 1e-5;
    case DType::f64: return 1e-13;
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    default: break;
  }
  return 0;
}

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::forward: return "forward";
    case Kind::transpose: return "transpose";
    case Kind::weightGrad: return "weightGrad";
  }
  return "";
}

class OpenCLConv : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!opencl::available(&why)) GTEST_SKIP() << "no OpenCL device: " << why;
  }
  void TearDown() override {
    for (DevicePtr p : allocations_) device().free(p);
  }

  static DeviceInterface& device() { return deviceInterface(Device::opencl(0)); }

  static std::vector<DType> dtypes() {
    std::vector<DType> all = {DType::f32, DType::f16, DType::bf16};
    if (opencl::devices()[0].fp64) all.insert(all.begin() + 1, DType::f64);
    return all;
  }

  /// `bytes` on the device in an allocation of their own.
  DevicePtr upload(const Bytes& bytes, StreamHandle stream) {
    const DevicePtr p = device().allocate(std::max<size_t>(bytes.size(), 1), stream);
    allocations_.push_back(p);
    if (!bytes.empty()) device().copyHostToDevice(p, bytes.data(), bytes.size(), stream);
    return p;
  }

  /// What a test may do to the random operands (x, w, y bytes and their
  /// layouts) before they are used.
  using Tweak = std::function<void(const ConvCall&, Bytes& x, Bytes& w, Bytes& y)>;

  /// Runs `kind` of `cc` in `dtype` on opencl:0 and checks it as the file's
  /// comment says.
  void check(const ConvCase& cc, Kind kind, DType dtype, StreamHandle stream = {}, const Tweak& tweak = {}) {
    SCOPED_TRACE(fmt::format("{} {} {}", cc.name, kindName(kind), dtypeName(dtype)));
    std::mt19937_64 rng(42);
    ConvCall c = cc.call;
    c.kind = kind, c.dtype = dtype;
    const int64_t item = itemSize(dtype);
    const Layout xl = cc.x.value_or(Layout{contiguousStrides(c.n, c.c, c.h, c.w), 0});
    const Layout wl = cc.w.value_or(Layout{contiguousStrides(c.o, c.c / c.groups, c.kh, c.kw), 0});
    const Layout yl = cc.y.value_or(Layout{contiguousStrides(c.n, c.o, c.ho, c.wo), 0});
    // Every operand's strides go into the call; the result's must be ignored.
    c.xStrides = xl.strides, c.wStrides = wl.strides, c.yStrides = yl.strides;

    // The operands, random values everywhere in their storage.
    const auto random = [&](int64_t count) {
      Bytes b(static_cast<size_t>(count * item));
      for (int64_t i = 0; i < count; ++i) setValue(b, dtype, i, std::uniform_real_distribution<double>(-1, 1)(rng));
      return b;
    };
    Bytes xb = random(storage(xSizes(c), xl)), wb = random(storage(wSizes(c), wl)), yb = random(storage(ySizes(c), yl));
    if (tweak) tweak(c, xb, wb, yb);
    const auto reader = [&](const Bytes& b, const Layout& l) {
      return [&b, &l, dtype](int64_t a0, int64_t a1, int64_t a2, int64_t a3) {
        return valueAt(b, dtype,
                       l.offset + a0 * l.strides[0] + a1 * l.strides[1] + a2 * l.strides[2] + a3 * l.strides[3]);
      };
    };
    const Reference ref = reference(c, kind, reader(xb, xl), reader(wb, wl), reader(yb, yl));
    ASSERT_LE(ref.maxTerms, kMaxTerms) << "a case too large for the documented f32 tolerance";

    // The buffers in the kind's order, the result last: 0xff between 40
    // guard bytes of 0xa5 on each side, 40 bytes into its allocation.
    const Bytes* in0 = kind == Kind::transpose ? &yb : &xb;
    const Bytes* in1 = kind == Kind::weightGrad ? &yb : &wb;
    const Layout& l0 = kind == Kind::transpose ? yl : xl;
    const Layout& l1 = kind == Kind::weightGrad ? yl : wl;
    const int64_t resultBytes = static_cast<int64_t>(ref.value.size()) * item;
    constexpr int64_t kGuard = 40;
    Bytes out(static_cast<size_t>(resultBytes + 2 * kGuard), 0xa5);
    std::fill(out.begin() + kGuard, out.end() - kGuard, 0xff);
    const DevicePtr b0 = upload(*in0, stream), b1 = upload(*in1, stream), b2 = upload(out, stream);
    // Each operand from its first element: the DevicePtr's byte offset.
    const DevicePtr buffers[3] = {{b0.handle, b0.offset + static_cast<size_t>(l0.offset * item)},
                                  {b1.handle, b1.offset + static_cast<size_t>(l1.offset * item)},
                                  {b2.handle, b2.offset + static_cast<size_t>(kGuard)}};
    const std::vector<int64_t> args = c.encode();
    opencl::conv(LibraryCall{Device::opencl(0), stream, buffers, args});
    Bytes got(out.size());
    device().copyDeviceToHost(got.data(), b2, got.size(), stream);

    EXPECT_TRUE(std::all_of(got.begin(), got.begin() + kGuard, [](uint8_t v) { return v == 0xa5; }) &&
                std::all_of(got.end() - kGuard, got.end(), [](uint8_t v) { return v == 0xa5; }))
        << "bytes outside the result were written";
    Bytes result(got.begin() + kGuard, got.end() - kGuard);
    const double tol = tolerance(dtype);
    int bad = 0;
    for (size_t i = 0; i < ref.value.size(); ++i) {
      const double v = valueAt(result, dtype, static_cast<int64_t>(i));
      const double allowed = tol * ref.magnitude[i];
      if (!(v == ref.value[i] || std::fabs(v - ref.value[i]) <= allowed) && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": " << v << " on opencl:0, " << ref.value[i] << " in f64 (allowed "
                      << allowed << ")";
    }
    EXPECT_EQ(bad, 0) << "elements out of tolerance";
  }

  std::vector<DevicePtr> allocations_;
};

class OpenCLConvCases : public OpenCLConv, public ::testing::WithParamInterface<ConvCase> {};

TEST_P(OpenCLConvCases, ForwardMatchesTheReference) {
  for (DType dtype : dtypes()) check(GetParam(), Kind::forward, dtype);
}
TEST_P(OpenCLConvCases, TransposeMatchesTheReference) {
  for (DType dtype : dtypes()) check(GetParam(), Kind::transpose, dtype);
}
TEST_P(OpenCLConvCases, WeightGradMatchesTheReference) {
  for (DType dtype : dtypes()) check(GetParam(), Kind::weightGrad, dtype);
}

INSTANTIATE_TEST_SUITE_P(OpenCL, OpenCLConvCases, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return info.param.name; });

TEST_F(OpenCLConv, TheCasesAreWhatTheirNamesSay) {
  for (const ConvCase& c : cases()) {
    SCOPED_TRACE(c.name);
    if (c.name == "AsymmetricWithNegativePadBottom") {
      EXPECT_EQ(c.call.padBottom(), -2);
      EXPECT_EQ(c.call.padRight(), 1);
      EXPECT_NE(c.call.padTop, c.call.padLeft);
    }
    if (c.name == "OneByOneStride2") {
      EXPECT_EQ(c.call.padRight(), -1);
    }
    if (c.name == "Depthwise") {
      EXPECT_EQ(c.call.groups, c.call.c);
    }
    EXPECT_GE(c.call.ho, 0);
    EXPECT_GE(c.call.wo, 0);
  }
}

TEST_F(OpenCLConv, OnAStreamOfItsOwn) {
  const StreamHandle stream = device().createStream();
  const ConvCase c = cases()[1];
  for (Kind kind : {Kind::forward, Kind::transpose, Kind::weightGrad}) check(c, kind, DType::f32, stream);
  device().synchronizeStream(stream);
  device().destroyStream(stream);
}

// A term whose x position is outside x is left out of the sum, not added as
// 0 · w: with every value positive and w's (0, 0) window position (forward,
// transpose) or y's first column and row (weightGrad) infinite, the
// elements where that position falls outside x, along a row or a column,
// stay finite, the others are +inf, as the reference (which skips those
// terms) says. Along a row the kernels test each of their 4 columns.
TEST_F(OpenCLConv, ATermOutsideXIsLeftOutNotZeroTimesInfinity) {
  const ConvCase c = cases()[0];  // Plain3x3, padding 1 all round, contiguous
  ASSERT_EQ(c.name, "Plain3x3");
  const auto positive = [](Bytes& b, DType dtype) {
    for (int64_t i = 0; i < static_cast<int64_t>(b.size()) / itemSize(dtype); ++i)
      setValue(b, dtype, i, std::fabs(valueAt(b, dtype, i)) + 0.125);
  };
  for (DType dtype : dtypes()) {
    const auto tweak = [dtype, &positive](const ConvCall& k, Bytes& x, Bytes& w, Bytes& y) {
      positive(x, dtype), positive(w, dtype), positive(y, dtype);
      if (k.kind == Kind::weightGrad) {
        for (int64_t n = 0; n < k.n; ++n)
          for (int64_t o = 0; o < k.o; ++o) setValue(y, dtype, (n * k.o + o) * k.ho * k.wo, INFINITY);
      } else {
        for (int64_t o = 0; o < k.o * (k.c / k.groups); ++o) setValue(w, dtype, o * k.kh * k.kw, INFINITY);
      }
    };
    for (Kind kind : {Kind::forward, Kind::transpose, Kind::weightGrad}) check(c, kind, dtype, {}, tweak);
  }
}

// Empty operands may come without a buffer (a null cl_mem): weightGrad of an
// empty batch and forward without input channels read nothing and write
// zeros.
TEST_F(OpenCLConv, EmptyOperandsMayHaveNoBuffer) {
  for (const char* name : {"EmptyBatch", "NoInputChannels"}) {
    SCOPED_TRACE(name);
    ConvCall c;
    for (const ConvCase& cc : cases())
      if (cc.name == name) c = cc.call;
    c.kind = std::string(name) == "EmptyBatch" ? Kind::weightGrad : Kind::forward;
    c.xStrides = contiguousStrides(c.n, c.c, c.h, c.w);
    c.wStrides = contiguousStrides(c.o, c.c / c.groups, c.kh, c.kw);
    c.yStrides = contiguousStrides(c.n, c.o, c.ho, c.wo);
    const int64_t count = numel(c.kind == Kind::weightGrad ? wSizes(c) : ySizes(c));
    ASSERT_GT(count, 0);
    const DevicePtr out = upload(Bytes(static_cast<size_t>(count * 4), 0xff), {});
    const DevicePtr buffers[3] = {{}, {}, out};
    const std::vector<int64_t> args = c.encode();
    opencl::conv(LibraryCall{Device::opencl(0), {}, buffers, args});
    Bytes got(static_cast<size_t>(count * 4));
    device().copyDeviceToHost(got.data(), out, got.size(), {});
    EXPECT_EQ(got, Bytes(got.size(), 0));
  }
}

// --- ConvCall's arguments ---

TEST(ConvCallArgs, EncodeDecodeRoundTripsEveryField) {
  ConvCall c;
  c.kind = Kind::weightGrad, c.dtype = DType::bf16;
  // Every field different (and the channels divisible by the groups, which
  // a decode may check).
  c.n = 2, c.c = 6, c.h = 5, c.w = 7, c.o = 9, c.kh = 13, c.kw = 17, c.ho = 19, c.wo = 23;
  c.strideH = 29, c.strideW = 31, c.padTop = 37, c.padLeft = -41, c.dilationH = 43, c.dilationW = 47, c.groups = 3;
  c.xStrides = {101, 102, 103, 104}, c.wStrides = {201, 202, 203, 204}, c.yStrides = {301, 302, 303, 304};
  const std::vector<int64_t> args = c.encode();
  EXPECT_EQ(args.size(), 30u);
  const ConvCall d = ConvCall::decode(args);
  EXPECT_EQ(d.kind, c.kind);
  EXPECT_EQ(d.dtype, c.dtype);
  EXPECT_EQ(std::vector<int64_t>({d.n, d.c, d.h, d.w, d.o, d.kh, d.kw, d.ho, d.wo, d.strideH, d.strideW, d.padTop,
                                  d.padLeft, d.dilationH, d.dilationW, d.groups}),
            std::vector<int64_t>({2, 6, 5, 7, 9, 13, 17, 19, 23, 29, 31, 37, -41, 43, 47, 3}));
  EXPECT_EQ(d.xStrides, c.xStrides);
  EXPECT_EQ(d.wStrides, c.wStrides);
  EXPECT_EQ(d.yStrides, c.yStrides);
  EXPECT_EQ(d.encode(), args);
  for (Kind kind : {Kind::forward, Kind::transpose}) {
    c.kind = kind;
    EXPECT_EQ(ConvCall::decode(c.encode()).kind, kind);
  }
}

TEST(ConvCallArgs, DecodeAssertsTheLength) {
  std::vector<int64_t> args = ConvCall{}.encode();
  args.pop_back();
  EXPECT_THROW(ConvCall::decode(args), InternalError);
  args.push_back(0);
  args.push_back(0);
  EXPECT_THROW(ConvCall::decode(args), InternalError);
}

TEST(ConvCallArgs, ContiguousStridesAreRowMajor) {
  EXPECT_EQ(contiguousStrides(2, 3, 4, 5), (Strides{60, 20, 5, 1}));
  EXPECT_EQ(contiguousStrides(0, 3, 0, 5), (Strides{0, 0, 5, 1}));
}

}  // namespace
}  // namespace kiln::runtime

// cuDNN's convolutions (runtime/cuda_dnn.h) on a CUDA GPU against the CPU's
// direct loops (runtime::detail::convDirect) on the same ConvCalls: the
// three kinds, f32 / f64 / f16 / bf16, stride, dilation, groups, PyTorch's
// output padding, asymmetric padding (Note [Asymmetric padding on cuDNN]),
// channels-last x and a filter that is not packed, under the default,
// deterministic and benchmark algorithm choices. Label `gpu`: skipped with
// "no GPU" and the driver's reason where CUDA is unavailable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "frontend/kiln.h"
#include "runtime/conv.h"
#include "runtime/cuda_dnn.h"
#include "runtime/determinism.h"
#include "runtime/device_interface.h"
#include "runtime/numeric.h"

namespace kiln {
namespace {

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    std::string why;                                                             \
    if (!isAvailable(DeviceType::cuda, &why)) GTEST_SKIP() << "no GPU: " << why; \
    if (!runtime::cuda::dnnAvailable(&why)) GTEST_SKIP() << "no cuDNN: " << why; \
  } while (0)

constexpr Device kGpu = Device::cuda(0);
using runtime::ConvCall;

ConvCall call(ConvCall::Kind kind, DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k,
              int64_t stride, int64_t pad, int64_t dilation = 1, int64_t groups = 1) {
  ConvCall r;
  r.kind = kind;
  r.dtype = dtype;
  r.n = n, r.c = c, r.h = h, r.w = w, r.o = o, r.kh = k, r.kw = k;
  r.strideH = r.strideW = stride;
  r.padTop = r.padLeft = pad;
  r.dilationH = r.dilationW = dilation;
  r.groups = groups;
  r.ho = (h + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  r.wo = (w + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  return r;
}

/// Fills in contiguous strides for whatever strides are still unset.
ConvCall withStrides(ConvCall c) {
  const std::array<int64_t, 4> none{};
  if (c.xStrides == none) c.xStrides = runtime::contiguousStrides(c.n, c.c, c.h, c.w);
  if (c.wStrides == none) c.wStrides = runtime::contiguousStrides(c.o, c.c / c.groups, c.kh, c.kw);
  if (c.yStrides == none) c.yStrides = runtime::contiguousStrides(c.n, c.o, c.ho, c.wo);
  return c;
}

int64_t extent(std::array<int64_t, 4> dims, std::array<int64_t, 4> strides) {
  int64_t e = 1;
  for (int d = 0; d < 4; ++d) {
    if (dims[d] == 0) return 0;
    e += (dims[d] - 1) * strides[d];
  }
  return e;
}

void store(DType t, std::vector<unsigned char>& bytes, size_t i, double v) {
  switch (t) {
    case DType::f32: {
      const float f = static_cast<float>(v);
      std::memcpy(bytes.data() + i * 4, &f, 4);
      break;
    }
    case DType::f64: std::memcpy(bytes.data() + i * 8, &v, 8); break;
    case DType::f16: {
      const uint16_t b = f32ToF16Bits(static_cast<float>(v));
      std::memcpy(bytes.data() + i * 2, &b, 2);
      break;
    }
    case DType::bf16: {
      const uint16_t b = f32ToBf16Bits(static_cast<float>(v));
      std::memcpy(bytes.data() + i * 2, &b, 2);
      break;
    }
    case DType::i32:
    case DType::i64:
    case DType::boolean: FAIL() << "not a float dtype";
  }
}

double load(DType t, const std::vector<unsigned char>& bytes, size_t i) {
  switch (t) {
    case DType::f32: {
      float f;
      std::memcpy(&f, bytes.data() + i * 4, 4);
      return f;
    }
    case DType::f64: {
      double d;
      std::memcpy(&d, bytes.data() + i * 8, 8);
      return d;
    }
    case DType::f16: {
      uint16_t b;
      std::memcpy(&b, bytes.data() + i * 2, 2);
      return f16BitsToF32(b);
    }
    case DType::bf16: {
      uint16_t b;
      std::memcpy(&b, bytes.data() + i * 2, 2);
      return bf16BitsToF32(b);
    }
    case DType::i32:
    case DType::i64:
    case DType::boolean: break;
  }
  return NAN;
}

/// Runs `c` on cuDNN and on the CPU's direct loops from the same random
/// operands (multiples of 1/8 in [-1, 1]) and compares the results.
void expectMatchesCpu(ConvCall c, const std::string& label) {
  SCOPED_TRACE(label);
  c = withStrides(c);
  const int64_t item = itemSize(c.dtype);
  const int64_t cg = c.c / c.groups;
  const std::array<int64_t, 4> xDims{c.n, c.c, c.h, c.w}, wDims{c.o, cg, c.kh, c.kw}, yDims{c.n, c.o, c.ho, c.wo};
  std::array<std::array<int64_t, 4>, 3> dims{}, strides{};
  switch (c.kind) {
    case ConvCall::Kind::forward: dims = {xDims, wDims, yDims}, strides = {c.xStrides, c.wStrides, {}}; break;
    case ConvCall::Kind::transpose: dims = {yDims, wDims, xDims}, strides = {c.yStrides, c.wStrides, {}}; break;
    case ConvCall::Kind::weightGrad: dims = {xDims, yDims, wDims}, strides = {c.xStrides, c.yStrides, {}}; break;
  }
  strides[2] = runtime::contiguousStrides(dims[2][0], dims[2][1], dims[2][2], dims[2][3]);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> value(-8, 8);
  std::vector<std::vector<unsigned char>> host(3);
  std::vector<int64_t> counts(3);
  for (size_t b = 0; b < 3; ++b) {
    counts[b] = extent(dims[b], strides[b]);
    host[b].assign(static_cast<size_t>(std::max<int64_t>(counts[b], 1) * item), 0);
    if (b < 2)
      for (int64_t i = 0; i < counts[b]; ++i) store(c.dtype, host[b], static_cast<size_t>(i), value(rng) / 8.0);
  }
  // The CPU's answer.
  std::vector<unsigned char> expected = host[2];
  void* cpu[3] = {host[0].data(), host[1].data(), expected.data()};
  runtime::detail::convDirect(c, cpu);
  // cuDNN's, into a poisoned result.
  runtime::DeviceInterface& d = runtime::deviceInterface(kGpu);
  runtime::DevicePtr gpu[3];
  for (size_t b = 0; b < 3; ++b) {
    gpu[b] = d.allocate(host[b].size(), {});
    if (b < 2) {
      d.copyHostToDevice(gpu[b], host[b].data(), host[b].size(), {});
    } else {
      const unsigned char poison = 0x7f;
      d.fill(gpu[b], host[b].size(), &poison, 1, {});
    }
  }
  const std::vector<int64_t> args = c.encode();
  runtime::cuda::conv({kGpu, {}, gpu, args});
  std::vector<unsigned char> got(host[2].size());
  d.copyDeviceToHost(got.data(), gpu[2], got.size(), {});
  for (runtime::DevicePtr p : gpu) d.free(p);
  // f32 within what Winograd / FFT algorithms round; f16 / bf16 one
  // rounding of a sum of exact products.
  const double tolerance = c.dtype == DType::f64   ? 1e-9
                           : c.dtype == DType::f32 ? 1e-4
                           : c.dtype == DType::f16 ? 1e-2
                                                   : 6e-2;
  int bad = 0;
  for (int64_t i = 0; i < counts[2] && bad < 5; ++i) {
    const double want = load(c.dtype, expected, static_cast<size_t>(i)),
                 have = load(c.dtype, got, static_cast<size_t>(i));
    if (!(std::abs(want - have) <= tolerance * std::max(1.0, std::abs(want)))) {
      ADD_FAILURE() << "element " << i << ": cuDNN " << have << ", CPU " << want;
      ++bad;
    }
  }
}

TEST(CudaConv, ForwardTransposeAndWeightGradientMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  using K = ConvCall::Kind;
  expectMatchesCpu(call(K::forward, DType::f32, 2, 3, 7, 6, 4, 3, 1, 1), "forward 3x3");
  expectMatchesCpu(call(K::forward, DType::f32, 2, 4, 9, 8, 6, 3, 2, 2, 2, 2),
                   "forward stride 2, dilation 2, groups 2");
  expectMatchesCpu(call(K::forward, DType::f32, 1, 4, 6, 6, 4, 3, 1, 1, 1, 4), "depthwise");
  ConvCall t = call(K::transpose, DType::f32, 2, 3, 8, 8, 5, 3, 2, 1);  // output_padding 1: h = 8 from ho = 4
  expectMatchesCpu(t, "transpose stride 2 output padding 1");
  expectMatchesCpu(call(K::transpose, DType::f32, 2, 4, 7, 7, 6, 3, 1, 1, 1, 2), "transpose groups 2");
  expectMatchesCpu(call(K::weightGrad, DType::f32, 3, 3, 7, 7, 4, 3, 1, 1), "weight gradient");
  expectMatchesCpu(call(K::weightGrad, DType::f32, 2, 4, 9, 9, 4, 3, 2, 1, 1, 2), "weight gradient stride 2 groups 2");
}

TEST(CudaConv, EveryFloatTypeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  using K = ConvCall::Kind;
  for (DType t : {DType::f64, DType::f16, DType::bf16}) {
    const std::string name(dtypeName(t));
    expectMatchesCpu(call(K::forward, t, 2, 4, 6, 6, 4, 3, 1, 1), name + " forward");
    expectMatchesCpu(call(K::transpose, t, 2, 4, 6, 6, 4, 3, 1, 1), name + " transpose");
    expectMatchesCpu(call(K::weightGrad, t, 2, 4, 6, 6, 4, 3, 1, 1), name + " weight gradient");
  }
}

TEST(CudaConv, AsymmetricPaddingMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  using K = ConvCall::Kind;
  for (K kind : {K::forward, K::transpose, K::weightGrad}) {
    ConvCall same = call(kind, DType::f32, 2, 3, 5, 6, 4, 2, 1, 0);  // "same" for an even kernel
    same.ho = 5, same.wo = 6;
    expectMatchesCpu(same, "bottom/right padding 1, top/left 0");
    ConvCall top = call(kind, DType::f32, 1, 2, 5, 5, 3, 3, 1, 2);
    top.ho = top.wo = 5;  // top 2, bottom 0
    expectMatchesCpu(top, "top/left padding 2, bottom/right 0");
    ConvCall cut = call(kind, DType::f32, 1, 2, 6, 6, 2, 3, 1, 0);
    cut.ho = 2, cut.wo = 3;  // the last rows and columns never read
    expectMatchesCpu(cut, "a bottom never read");
  }
}

TEST(CudaConv, StridedOperandsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  ConvCall c = call(ConvCall::Kind::forward, DType::f32, 2, 3, 6, 5, 4, 3, 1, 1);
  c.xStrides = {6 * 5 * 3, 1, 5 * 3, 3};  // channels-last
  c.wStrides = {3 * 9, 1, 3 * 3, 3};      // OHWI: copied to a packed filter
  expectMatchesCpu(c, "channels-last x, OHWI w");
  ConvCall t = call(ConvCall::Kind::transpose, DType::f32, 2, 3, 6, 5, 4, 3, 1, 1);
  t.yStrides = {6 * 5 * 4, 1, 5 * 4, 4};
  t.wStrides = {3 * 9, 1, 3 * 3, 3};
  expectMatchesCpu(t, "channels-last y, OHWI w");
}

TEST(CudaConv, DeterministicAndBenchmarkChoicesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  using K = ConvCall::Kind;
  runtime::cuda::detail::forgetDnnChoices();
  runtime::setDeterministic(true);
  for (K kind : {K::forward, K::transpose, K::weightGrad})
    expectMatchesCpu(call(kind, DType::f32, 4, 8, 12, 12, 8, 3, 1, 1), "deterministic");
  runtime::setDeterministic(false);
  runtime::setConvBenchmark(true);
  for (K kind : {K::forward, K::transpose, K::weightGrad})
    for (int twice = 0; twice < 2; ++twice)  // measured, then kept
      expectMatchesCpu(call(kind, DType::f32, 4, 8, 12, 12, 8, 3, 1, 1), "benchmark");
  runtime::setConvBenchmark(false);
  runtime::cuda::detail::forgetDnnChoices();
}

}  // namespace
}  // namespace kiln

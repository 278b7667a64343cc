// kiln::conv2d and kiln::convTranspose2d (frontend/conv.h) against float64
// loops written here from torch's definitions, on every CPU path (oneDNN
// for f32 and bf16, kiln's direct loops for f64 and f16), their gradients
// on oneDNN against the direct loops' (which gradcheck_test checks against
// finite differences), compiled against eager, nn::Conv2d's parameters, and
// the errors.
#include "ir/conv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "codegen/disk_cache.h"
#include "codegen/target.h"
#include "common/error_of.h"
#include "common/same_bits.h"
#include "frontend/kiln.h"
#include "runtime/blas.h"
#include "runtime/conv.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

struct Geometry {
  int64_t n, c, h, w, o, kh, kw;
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 4> pad{};  // top, left, bottom, right
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  int64_t ho() const { return ir::convOutputSize(h, kh, stride[0], pad[0], pad[2], dilation[0]); }
  int64_t wo() const { return ir::convOutputSize(w, kw, stride[1], pad[1], pad[3], dilation[1]); }
};

/// torch's conv2d by its definition: out[n][o][i][j] = Σ x[n][c][i s + p d
/// - pad][...] w[o][c - group's first][p][q], and the sum of |terms| (the
/// scale of the rounding error).
std::pair<std::vector<double>, std::vector<double>> reference(const Geometry& g, const std::vector<double>& x,
                                                              const std::vector<double>& w) {
  const int64_t ho = g.ho(), wo = g.wo(), cg = g.c / g.groups, og = g.o / g.groups;
  std::vector<double> y(static_cast<size_t>(g.n * g.o * ho * wo)), mag(y.size());
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) {
          double s = 0, m = 0;
          for (int64_t cc = 0; cc < cg; ++cc)
            for (int64_t p = 0; p < g.kh; ++p)
              for (int64_t q = 0; q < g.kw; ++q) {
                const int64_t r = i * g.stride[0] + p * g.dilation[0] - g.pad[0];
                const int64_t col = j * g.stride[1] + q * g.dilation[1] - g.pad[1];
                if (r < 0 || r >= g.h || col < 0 || col >= g.w) continue;
                const int64_t c = (o / og) * cg + cc;
                const double t = x[static_cast<size_t>(((n * g.c + c) * g.h + r) * g.w + col)] *
                                 w[static_cast<size_t>(((o * cg + cc) * g.kh + p) * g.kw + q)];
                s += t, m += std::fabs(t);
              }
          y[static_cast<size_t>(((n * g.o + o) * ho + i) * wo + j)] = s;
          mag[static_cast<size_t>(((n * g.o + o) * ho + i) * wo + j)] = m;
        }
  return {y, mag};
}

Tensor conv(const Geometry& g, const Tensor& x, const Tensor& w) {
  ir::ConvAttrs a;
  a.stride = g.stride, a.padding = g.pad, a.dilation = g.dilation, a.groups = g.groups;
  return detail::dispatch(ir::Op::conv2d, {x, w}, ir::convAttributes(ir::Op::conv2d, a));
}

/// |a - b| <= atol + rtol |b| elementwise, compared in f64 on the host.
::testing::AssertionResult allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const std::vector<double> x = a.to(Device::cpu()).to(DType::f64).toVector<double>();
  const std::vector<double> y = b.to(Device::cpu()).to(DType::f64).toVector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

std::vector<Geometry> geometries() {
  std::vector<Geometry> all;
  all.push_back({2, 3, 7, 6, 4, 3, 3});
  all.push_back({1, 4, 9, 8, 6, 3, 2, {2, 3}, {1, 0, 2, 1}});             // stride, asymmetric padding
  all.push_back({2, 4, 8, 8, 4, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, 2});  // dilation, groups
  all.push_back({1, 6, 5, 5, 6, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6});  // depthwise, stride
  all.push_back({3, 8, 4, 4, 16, 1, 1});                                  // 1x1
  all.push_back({1, 2, 9, 9, 3, 2, 2, {3, 3}, {0, 0, 0, 0}});             // the floor drops the last row and column
  return all;
}

std::string name(const Geometry& g) {
  return fmt::format(
      "x [{}, {}, {}, {}], w [{}, {}, {}, {}], stride [{}, {}], padding [{}, {}, {}, {}], dilation "
      "[{}, {}], groups {}",
      g.n, g.c, g.h, g.w, g.o, g.c / g.groups, g.kh, g.kw, g.stride[0], g.stride[1], g.pad[0], g.pad[1], g.pad[2],
      g.pad[3], g.dilation[0], g.dilation[1], g.groups);
}

/// Each dtype's tolerance relative to the sum of |terms|: f64 exact but for
/// rounding, f32 a few ulps of the largest partial sum, f16/bf16 one
/// rounding of the result plus their inputs' rounding (inputs here are
/// rounded to the dtype before the reference sees them).
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::f64: return 1e-13;
    case DType::f32: return 2e-6;
    case DType::f16: return 2e-3;
    default: return 1.6e-2;
  }
}

TEST(Conv2d, EachDTypeMatchesTheFloat64Definition) {
  Generator gen(1);
  for (DType dtype : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    for (const Geometry& g : geometries()) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + name(g));
      const Tensor x = randn({g.n, g.c, g.h, g.w}, gen).to(dtype);
      const Tensor w = randn({g.o, g.c / g.groups, g.kh, g.kw}, gen).to(dtype);
      const auto [want, mag] = reference(g, x.to(DType::f64).toVector<double>(), w.to(DType::f64).toVector<double>());
      const Tensor y = conv(g, x, w);
      ASSERT_EQ(y.shape(), (Shape{g.n, g.o, g.ho(), g.wo()}));
      const std::vector<double> got = y.to(DType::f64).toVector<double>();
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], tolerance(dtype) * (mag[i] + 1e-30) + (dtype == DType::f64 ? 0 : 1e-30))
            << "element " << i;
    }
  }
}

TEST(Conv2d, ChannelsLastAndStridedInputsReadThroughTheirStrides) {
  Generator gen(2);
  const Geometry g{2, 6, 6, 5, 4, 3, 3, {1, 2}, {1, 1, 1, 1}, {1, 1}, 2};
  for (DType dtype : {DType::f32, DType::f64}) {
    const Tensor x = randn({g.n, g.c, g.h, g.w}, gen).to(dtype);
    const Tensor w = randn({g.o, g.c / g.groups, g.kh, g.kw}, gen).to(dtype);
    const Tensor want = conv(g, x, w);
    const Tensor channelsLast = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
    ASSERT_EQ(channelsLast.stride(1), 1);
    // oneDNN may pick another kernel for another layout: f32 sums in
    // another order (the sums here are of ~50 terms of magnitude ~1).
    EXPECT_TRUE(allclose(conv(g, channelsLast, w), want, 1e-5, 1e-5)) << dtypeName(dtype);
    // A slice of a larger tensor: an offset and a row stride of its own.
    const Tensor big = randn({g.n, g.c, g.h + 3, g.w + 4}, gen).to(dtype);
    const Tensor view = big.slice(2, 1, 1 + g.h).slice(3, 2, 2 + g.w);
    EXPECT_TRUE(allclose(conv(g, view, w), conv(g, view.contiguous(), w), 1e-5, 1e-5)) << dtypeName(dtype);
  }
}

/// conv_transpose2d by its definition: each x element scattered through w.
TEST(ConvTranspose2d, MatchesTheFloat64Definition) {
  Generator gen(3);
  for (DType dtype : {DType::f64, DType::f32}) {
    const int64_t n = 2, cin = 4, h = 3, w = 4, groups = 2, coutG = 3, kh = 3, kw = 2;
    ConvTranspose2dOptions o;
    o.stride = {2, 3}, o.padding = {1, 0}, o.outputPadding = {1, 1}, o.groups = groups, o.dilation = {1, 2};
    const Tensor x = randn({n, cin, h, w}, gen).to(dtype);
    const Tensor wt = randn({cin, coutG, kh, kw}, gen).to(dtype);
    const Tensor b = randn({coutG * groups}, gen).to(dtype);
    const Tensor y = convTranspose2d(x, wt, b, o);
    const int64_t ho = (h - 1) * 2 - 2 + 1 * (kh - 1) + 1 + 1, wo = (w - 1) * 3 - 0 + 2 * (kw - 1) + 1 + 1;
    ASSERT_EQ(y.shape(), (Shape{n, coutG * groups, ho, wo}));
    const std::vector<double> xv = x.to(DType::f64).toVector<double>(), wv = wt.to(DType::f64).toVector<double>(),
                              bv = b.to(DType::f64).toVector<double>();
    std::vector<double> want(static_cast<size_t>(n * coutG * groups * ho * wo));
    for (int64_t nn = 0; nn < n; ++nn)
      for (int64_t co = 0; co < coutG * groups; ++co)
        for (int64_t i = 0; i < ho; ++i)
          for (int64_t j = 0; j < wo; ++j)
            want[static_cast<size_t>(((nn * coutG * groups + co) * ho + i) * wo + j)] = bv[static_cast<size_t>(co)];
    const int64_t cinG = cin / groups;
    for (int64_t nn = 0; nn < n; ++nn)
      for (int64_t ci = 0; ci < cin; ++ci)
        for (int64_t i = 0; i < h; ++i)
          for (int64_t j = 0; j < w; ++j)
            for (int64_t co = 0; co < coutG; ++co)
              for (int64_t p = 0; p < kh; ++p)
                for (int64_t q = 0; q < kw; ++q) {
                  const int64_t oi = i * 2 + p * 1 - 1, oj = j * 3 + q * 2 - 0;
                  if (oi < 0 || oi >= ho || oj < 0 || oj >= wo) continue;
                  const int64_t outC = (ci / cinG) * coutG + co;
                  want[static_cast<size_t>(((nn * coutG * groups + outC) * ho + oi) * wo + oj)] +=
                      xv[static_cast<size_t>(((nn * cin + ci) * h + i) * w + j)] *
                      wv[static_cast<size_t>(((ci * coutG + co) * kh + p) * kw + q)];
                }
    const std::vector<double> got = y.to(DType::f64).toVector<double>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << dtypeName(dtype) << " element " << i;
  }
}

/// The gradients oneDNN computes (f32: backward-data and backward-weights
/// primitives) equal the direct loops' (f64), which gradcheck checks.
TEST(Conv2d, OneDnnGradientsEqualTheDirectLoops) {
  Generator gen(4);
  for (const Geometry& g : geometries()) {
    SCOPED_TRACE(name(g));
    const Tensor x64 = randn({g.n, g.c, g.h, g.w}, gen).to(DType::f64);
    const Tensor w64 = randn({g.o, g.c / g.groups, g.kh, g.kw}, gen).to(DType::f64);
    const Tensor gy = randn({g.n, g.o, g.ho(), g.wo()}, gen).to(DType::f64);
    std::vector<Tensor> grads[2];
    for (int f32 = 0; f32 < 2; ++f32) {
      const DType dt = f32 ? DType::f32 : DType::f64;
      const Tensor x = x64.to(dt).detach().setRequiresGrad(), w = w64.to(dt).detach().setRequiresGrad();
      conv(g, x, w).backward(gy.to(dt));
      grads[f32] = {x.grad().to(DType::f64), w.grad().to(DType::f64)};
    }
    EXPECT_TRUE(allclose(grads[1][0], grads[0][0], 1e-4, 1e-4)) << "input gradient";
    EXPECT_TRUE(allclose(grads[1][1], grads[0][1], 1e-4, 1e-4)) << "weight gradient";
  }
}

TEST(Conv2d, RunsOnOneDnnForF32WhereTheBuildHasIt) {
  if (!runtime::haveOneDnn()) GTEST_SKIP() << "this build has no oneDNN (Debian libdnnl-dev)";
  runtime::ConvCall k;
  k.n = 2, k.c = 16, k.h = 14, k.w = 14, k.o = 16, k.kh = 3, k.kw = 3, k.ho = 14, k.wo = 14, k.padTop = 1,
  k.padLeft = 1;
  k.xStrides = runtime::contiguousStrides(2, 16, 14, 14), k.wStrides = runtime::contiguousStrides(16, 16, 3, 3);
  for (auto kind :
       {runtime::ConvCall::Kind::forward, runtime::ConvCall::Kind::transpose, runtime::ConvCall::Kind::weightGrad}) {
    k.kind = kind;
    k.yStrides = runtime::contiguousStrides(2, 16, 14, 14);
    const std::string impl = runtime::detail::convImplementation(k);
    EXPECT_EQ(impl.rfind("onednn", 0), 0u) << impl;
    EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
  }
  k.dtype = DType::f64;
  EXPECT_EQ(runtime::detail::convImplementation(k), "direct");
}

TEST(Conv2d, CompiledEqualsEagerForwardAndBackward) {
  Generator gen(5);
  const Tensor w1 = (randn({8, 3, 3, 3}, gen) * 0.3).setRequiresGrad();
  const Tensor w2 = (randn({4, 8, 3, 3}, gen) * 0.3).setRequiresGrad();
  const Tensor b1 = randn({8}, gen).setRequiresGrad();
  const Tensor x = randn({2, 3, 10, 10}, gen);
  auto step = [&](const Tensor& in) {
    Conv2dOptions o;
    o.padding = std::string("same");
    Conv2dOptions strided;
    strided.stride = {2, 2}, strided.padding = std::array<int64_t, 2>{1, 1};
    Tensor loss = mean(pow(conv2d(relu(conv2d(in, w1, b1, o)), w2, Tensor(), strided), 2.0));
    loss.backward();
    return loss;
  };
  auto compiled = compile(step);
  for (int call = 0; call < 2; ++call) {
    for (const Tensor* p : {&w1, &w2, &b1}) p->setGrad(Tensor());
    const Tensor eager = step(x);
    const std::vector<Tensor> eagerGrads = {w1.grad().clone(), w2.grad().clone(), b1.grad().clone()};
    for (const Tensor* p : {&w1, &w2, &b1}) p->setGrad(Tensor());
    const Tensor got = compiled(x);
    EXPECT_TRUE(sameBits(got, eager)) << "call " << call;
    const std::vector<Tensor> grads = {w1.grad(), w2.grad(), b1.grad()};
    for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(sameBits(grads[i], eagerGrads[i])) << "parameter " << i;
  }
}

TEST(Conv2d, MistakesNameTheOpAndTheShapes) {
  const Tensor x = zeros({1, 4, 5, 5});
  EXPECT_EQ(errorOf([&] {
              conv2d(x, zeros({2, 3, 3, 3}));
            }),
            "conv2d: expected a weight of 4 input channels per group (4 channels, 1 groups), got f32[1,4,5,5]@cpu and "
            "f32[2,3,3,3]@cpu");
  Conv2dOptions groups;
  groups.groups = 3;
  EXPECT_NE(errorOf([&] {
              conv2d(x, zeros({3, 1, 3, 3}), Tensor(), groups);
            }).find("groups 3 must divide"),
            std::string::npos);
  EXPECT_EQ(errorOf([&] {
              conv2d(x, zeros({2, 4, 7, 7}));
            }),
            "conv2d: the output would be 0x0: the padded input is smaller than the dilated kernel, got "
            "f32[1,4,5,5]@cpu and f32[2,4,7,7]@cpu with padding [0, 0, 0, 0], dilation [1, 1]");
  Conv2dOptions same;
  same.padding = std::string("same"), same.stride = {2, 2};
  EXPECT_EQ(errorOf([&] {
              conv2d(x, zeros({2, 4, 3, 3}), Tensor(), same);
            }),
            "conv2d: padding=\"same\" is not supported for strided convolutions (stride [2, 2]), as in PyTorch");
  EXPECT_EQ(errorOf([&] {
              conv2d(x, zeros({2, 4, 3, 3}, DType::f64));
            }),
            "conv2d: expected input and weight of one floating-point dtype, got input f32[1,4,5,5]@cpu, weight "
            "f64[2,4,3,3]@cpu");
  EXPECT_EQ(errorOf([&] {
              conv2d(x, zeros({2, 4, 3, 3}), zeros({3}));
            }),
            "conv2d: expected a bias of shape [2], got input f32[1,4,5,5]@cpu, weight f32[2,4,3,3]@cpu, bias "
            "f32[3]@cpu");
  EXPECT_EQ(errorOf([&] {
              conv2d(zeros({4, 5}), zeros({2, 4, 3, 3}));
            }),
            "conv2d: expected an input of 3 (unbatched) or 4 dims (NCHW), got input f32[4,5]@cpu, weight "
            "f32[2,4,3,3]@cpu");
  ConvTranspose2dOptions op;
  op.outputPadding = {1, 0};
  EXPECT_EQ(errorOf([&] {
              convTranspose2d(x, zeros({4, 2, 3, 3}), Tensor(), op);
            }),
            "conv_transpose2d: output_padding must be >= 0 and smaller than the stride, got output_padding [1, 0], "
            "stride [1, 1]");
}

TEST(Conv2d, UnbatchedInputsAndSamePadding) {
  Generator gen(6);
  const Tensor x = randn({3, 7, 8}, gen).to(DType::f64);
  const Tensor w = randn({5, 3, 4, 3}, gen).to(DType::f64);
  Conv2dOptions same;
  same.padding = std::string("same"), same.dilation = {1, 2};
  const Tensor y = conv2d(x, w, Tensor(), same);
  ASSERT_EQ(y.shape(), (Shape{5, 7, 8}));
  // PyTorch's "same": total padding d (k - 1), the odd one at the bottom/right.
  const Geometry g{1, 3, 7, 8, 5, 4, 3, {1, 1}, {1, 2, 2, 2}, {1, 2}};
  EXPECT_TRUE(allclose(y, conv(g, x.unsqueeze(0), w).squeeze(0), 1e-12, 1e-12));
}

TEST(NnConv2d, PyTorchsParametersAndInitialization) {
  Conv2dOptions o;
  o.groups = 2;
  nn::Conv2d conv(4, 6, std::array<int64_t, 2>{3, 2}, o);
  const auto params = conv->namedParameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(conv->weight.shape(), (Shape{6, 2, 3, 2}));
  EXPECT_EQ(conv->bias.shape(), (Shape{6}));
  // kaiming_uniform_(a = √5) and the bias: both U(-1/√fanIn, 1/√fanIn), fanIn = 2·3·2.
  const double bound = 1.0 / std::sqrt(12.0);
  for (const Tensor& t : {conv->weight, conv->bias}) {
    const std::vector<float> v = t.toVector<float>();
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*lo, -bound);
    EXPECT_LE(*hi, bound);
    EXPECT_GT(*hi - *lo, bound / 2) << "drawn, not constant";
  }
  EXPECT_EQ(conv->forward(zeros({1, 4, 5, 5})).shape(), (Shape{1, 6, 3, 4}));
  nn::ConvTranspose2d up(4, 6, std::array<int64_t, 2>{2, 2}, ConvTranspose2dOptions{{2, 2}, {0, 0}, {0, 0}, 2, {1, 1}});
  EXPECT_EQ(up->weight.shape(), (Shape{4, 3, 2, 2}));
  EXPECT_EQ(up->forward(zeros({1, 4, 5, 5})).shape(), (Shape{1, 6, 10, 10}));
  EXPECT_NE(
      errorOf([] {
        nn::Conv2d(4, 6, std::array<int64_t, 2>{3, 3}, Conv2dOptions{{1, 1}, std::array<int64_t, 2>{0, 0}, {1, 1}, 4});
      }).find("divisible by groups"),
      std::string::npos);
}

TEST(Conv2d, OnAnOpenClDevice) {
  const Device device = Device::opencl();
  std::string why;
  if (!runtime::isDeviceAvailable(device, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  Generator gen(7);
  const Tensor x = randn({2, 4, 9, 8}, gen), w = randn({6, 2, 3, 3}, gen), b = randn({6}, gen);
  Conv2dOptions o;
  o.stride = {2, 1}, o.padding = std::array<int64_t, 2>{1, 1}, o.groups = 2;
  const Tensor want = conv2d(x, w, b, o);
  const Tensor xd = x.to(device).setRequiresGrad(), wd = w.to(device).setRequiresGrad();
  const Tensor got = conv2d(xd, wd, b.to(device), o);
  EXPECT_TRUE(allclose(got.to(Device::cpu()), want, 1e-5, 1e-5));
  const Tensor xc = x.clone().setRequiresGrad(), wc = w.clone().setRequiresGrad();
  sum(pow(conv2d(xc, wc, b, o), 2.0)).backward();
  sum(pow(got, 2.0)).backward();
  EXPECT_TRUE(allclose(xd.grad().to(Device::cpu()), xc.grad(), 1e-4, 1e-4));
  EXPECT_TRUE(allclose(wd.grad().to(Device::cpu()), wc.grad(), 1e-4, 1e-4));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(Conv2d, BenchmarkModeKeepsItsChoiceInTheDiskCache) {
  codegen::DiskCache& cache = codegen::DiskCache::instance();
  if (!cache.enabled()) GTEST_SKIP() << "the disk kernel cache is off";
  Generator gen(8);
  const Tensor x = randn({1, 3, 11, 13}, gen), w = randn({5, 3, 3, 3}, gen);
  Conv2dOptions o;
  o.padding = std::array<int64_t, 2>{1, 1};
  const Tensor plain = conv2d(x, w, Tensor(), o);
  runtime::ConvCall k;
  k.n = 1, k.c = 3, k.h = 11, k.w = 13, k.o = 5, k.kh = 3, k.kw = 3, k.ho = 11, k.wo = 13, k.padTop = 1, k.padLeft = 1;
  k.xStrides = runtime::contiguousStrides(1, 3, 11, 13), k.wStrides = runtime::contiguousStrides(5, 3, 3, 3);
  const int threads = runtime::ThreadPool::instance().numThreads();
  if (runtime::detail::convCandidates(k, threads).size() < 2) GTEST_SKIP() << "one algorithm only (no oneDNN)";
  const std::string key = runtime::detail::convChoiceKey(k, threads, codegen::cpuTarget().description(Device::cpu()));
  backends::setBenchmark(true);
  const Tensor measured = conv2d(x, w, Tensor(), o);
  backends::setBenchmark(false);
  runtime::detail::forgetConvChoices();
  const std::optional<std::string> kept = cache.load(key);
  ASSERT_TRUE(kept.has_value()) << key;
  const std::string chosen = kept->substr(0, kept->find(' '));
  EXPECT_TRUE(chosen == "onednn" || chosen == "onednn_blocked" || chosen == "direct") << *kept;
  EXPECT_TRUE(allclose(measured, plain, 1e-5, 1e-5));
}

}  // namespace
}  // namespace kiln

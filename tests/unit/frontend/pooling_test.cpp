// kiln::pad, maxPool2d, avgPool2d, adaptiveAvgPool2d and interpolate
// (frontend/pooling.h) against plain loops written here in f64 from
// PyTorch's definitions (its kernels' loops: window bounds, divisors, tie
// and NaN rules, source index formulas), their gradients against finite
// differences, max pool's gradient on ties as PyTorch's (all of it to the
// first maximum of each window), compiled against eager, OpenCL against the
// CPU, and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// An f64 tensor of normal samples.
Tensor image(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, g).to(DType::f64);
}

std::vector<double> values(const Tensor& t) { return t.to(DType::f64).toVector<double>(); }

/// Element-wise |got - want| <= tol, NaN matching NaN.
void expectNear(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << ": element " << i << " is " << got[i] << ", want NaN";
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tol) << what << ": element " << i;
  }
}

/// An NCHW image on the host, read as x.at(n, c, h, w).
struct Host {
  int64_t n, c, h, w;
  std::vector<double> v;
  explicit Host(const Tensor& t) : n(t.size(0)), c(t.size(1)), h(t.size(2)), w(t.size(3)), v(values(t)) {}
  double at(int64_t in, int64_t ic, int64_t ih, int64_t iw) const { return v[((in * c + ic) * h + ih) * w + iw]; }
};

struct PoolCase {
  Shape shape;
  Size2 kernel;
  std::optional<Size2> stride;
  Size2 padding{0, 0};
  Size2 dilation{1, 1};
  bool ceilMode = false;
  Shape expected;  ///< the output shape, as PyTorch gives it
};

// Output shapes as torch.nn.functional.max_pool2d gives them.
const PoolCase kMaxCases[] = {
    {{2, 3, 6, 6}, {2, 2}, std::nullopt, {0, 0}, {1, 1}, false, {2, 3, 3, 3}},
    {{1, 2, 5, 5}, {2, 2}, Size2{2, 2}, {0, 0}, {1, 1}, true, {1, 2, 3, 3}},
    {{1, 2, 5, 5}, {2, 2}, Size2{2, 2}, {0, 0}, {1, 1}, false, {1, 2, 2, 2}},
    {{2, 1, 6, 7}, {3, 3}, Size2{2, 2}, {1, 1}, {1, 1}, false, {2, 1, 3, 4}},
    {{1, 1, 4, 4}, {2, 2}, Size2{2, 2}, {1, 1}, {1, 1}, true, {1, 1, 3, 3}},
    {{1, 2, 7, 8}, {3, 2}, Size2{1, 2}, {1, 0}, {2, 3}, false, {1, 2, 5, 3}},
    {{1, 1, 7, 6}, {2, 3}, Size2{3, 2}, {1, 1}, {2, 1}, true, {1, 1, 3, 4}},
};

/// PyTorch's pooling_output_shape.
int64_t refPooledSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1);
  int64_t out = static_cast<int64_t>(ceil ? std::ceil(span / static_cast<double>(s))
                                          : std::floor(span / static_cast<double>(s))) +
                1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

/// PyTorch's cpu_max_pool loop: values and indices.
std::pair<std::vector<double>, std::vector<int64_t>> refMaxPool(const Host& x, const PoolCase& c) {
  const Size2 s = c.stride.value_or(c.kernel);
  const int64_t oh = refPooledSize(x.h, c.kernel[0], s[0], c.padding[0], c.dilation[0], c.ceilMode);
  const int64_t ow = refPooledSize(x.w, c.kernel[1], s[1], c.padding[1], c.dilation[1], c.ceilMode);
  std::vector<double> vals;
  std::vector<int64_t> idx;
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t ch = 0; ch < x.c; ++ch)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t h0 = i * s[0] - c.padding[0], w0 = j * s[1] - c.padding[1];
          const int64_t h1 = std::min(h0 + (c.kernel[0] - 1) * c.dilation[0] + 1, x.h);
          const int64_t w1 = std::min(w0 + (c.kernel[1] - 1) * c.dilation[1] + 1, x.w);
          while (h0 < 0) h0 += c.dilation[0];
          while (w0 < 0) w0 += c.dilation[1];
          double best = -kInf;
          int64_t at = h0 * x.w + w0;
          for (int64_t y = h0; y < h1; y += c.dilation[0])
            for (int64_t z = w0; z < w1; z += c.dilation[1]) {
              const double v = x.at(n, ch, y, z);
              if (v > best || std::isnan(v)) best = v, at = y * x.w + z;
            }
          vals.push_back(best);
          idx.push_back(at);
        }
  return {vals, idx};
}

TEST(Pooling, MaxPoolMatchesPyTorchsLoop) {
  uint64_t seed = 1;
  for (const PoolCase& c : kMaxCases) {
    SCOPED_TRACE(ir::shapeStr(c.shape) + " kernel " + std::to_string(c.kernel[0]) + "x" + std::to_string(c.kernel[1]));
    Tensor x = image(c.shape, seed++);
    const auto [values0, indices0] = maxPool2dWithIndices(x, c.kernel, c.stride, c.padding, c.dilation, c.ceilMode);
    EXPECT_EQ(values0.shape(), c.expected);
    EXPECT_EQ(indices0.dtype(), DType::i64);
    const auto [wantValues, wantIndices] = refMaxPool(Host(x), c);
    expectNear(values(values0), wantValues, 0, "values");
    EXPECT_EQ(indices0.toVector<int64_t>(), wantIndices);
    expectNear(values(maxPool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceilMode)), wantValues, 0, "maxPool2d");
  }
}

TEST(Pooling, MaxPoolNaNAndUnbatchedAndF32) {
  // NaN wins (the last NaN of the window, PyTorch's `val > max || isnan(val)`).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = fromVector<double>({1, nan, 3, 4, nan, 0, 5, 2, 7, 8, 9, 10, 11, 12, 13, 14}, {1, 1, 4, 4});
  const auto [v, i] = maxPool2dWithIndices(x, {2, 2});
  const std::vector<double> got = values(v);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(i.toVector<int64_t>(), (std::vector<int64_t>{4, 6, 13, 15}));
  expectNear({got[1], got[2], got[3]}, {5, 12, 14}, 0, "the windows without NaN");
  // [C, H, W] in, [C, OH, OW] out, as PyTorch.
  Tensor u = image({2, 5, 5}, 7).to(DType::f32);
  Tensor pooled = maxPool2d(u, {3, 3}, Size2{2, 2}, {1, 1});
  EXPECT_EQ(pooled.str(), "f32[2,3,3]@cpu");
  expectNear(values(pooled), values(maxPool2d(u.unsqueeze(0), {3, 3}, Size2{2, 2}, {1, 1}).squeeze(0)), 0, "unbatched");
}

TEST(Pooling, MaxPoolGradientOnTiesGoesToTheFirstMaximum) {
  // All equal: each window sends its gradient to its first element, as
  // PyTorch's max_pool2d backward (which scatters to the index).
  Tensor x = ones({1, 1, 4, 4}, DType::f64).setRequiresGrad();
  sum(maxPool2d(x, {2, 2}, Size2{1, 1})).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0}));
  Tensor y = ones({1, 1, 4, 4}, DType::f64).setRequiresGrad();
  sum(maxPool2d(y, {2, 2})).backward();
  EXPECT_EQ(values(y.grad()), (std::vector<double>{1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0}));
  // Padding: the first element inside the input. Windows (oh, ow) of a 3x3
  // with kernel 3, padding 1 start at (max(oh-1, 0), max(ow-1, 0)).
  Tensor z = full({1, 1, 3, 3}, 2.0, DType::f64).setRequiresGrad();
  const auto [v, i] = maxPool2dWithIndices(z, {3, 3}, Size2{1, 1}, {1, 1});
  EXPECT_EQ(i.toVector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0, 0, 1, 3, 3, 4}));
  v.backward(ones({1, 1, 3, 3}, DType::f64));
  EXPECT_EQ(values(z.grad()), (std::vector<double>{4, 2, 0, 2, 1, 0, 0, 0, 0}));
  // A tie between two window elements with different upstream gradients.
  Tensor t = fromVector<double>({3, 3, 1, 3}, {1, 1, 2, 2}).setRequiresGrad();
  maxPool2d(t, {2, 2}).backward(full({1, 1, 1, 1}, 5.0, DType::f64));
  EXPECT_EQ(values(t.grad()), (std::vector<double>{5, 0, 0, 0}));
}

TEST(Pooling, MaxPoolGradcheck) {
  for (const PoolCase& c : {kMaxCases[3], kMaxCases[5], kMaxCases[6]}) {
    Tensor x = image({1, 2, c.shape[2], c.shape[3]}, 11).setRequiresGrad();
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return maxPool2d(in[0], c.kernel, c.stride, c.padding, c.dilation, c.ceilMode);
        },
        {x}))
        << ir::shapeStr(c.shape);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return maxPool2dWithIndices(in[0], c.kernel, c.stride, c.padding, c.dilation, c.ceilMode).values * 2.0;
        },
        {x}));
  }
}

struct AvgCase {
  Shape shape;
  Size2 kernel;
  std::optional<Size2> stride;
  Size2 padding;
  bool ceilMode;
  bool countIncludePad;
  std::optional<int64_t> divisor;
};

/// PyTorch's cpu_avg_pool loop.
std::vector<double> refAvgPool(const Host& x, const AvgCase& c) {
  const Size2 s = c.stride.value_or(c.kernel);
  const int64_t oh = refPooledSize(x.h, c.kernel[0], s[0], c.padding[0], 1, c.ceilMode);
  const int64_t ow = refPooledSize(x.w, c.kernel[1], s[1], c.padding[1], 1, c.ceilMode);
  std::vector<double> out;
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t ch = 0; ch < x.c; ++ch)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t h0 = i * s[0] - c.padding[0], w0 = j * s[1] - c.padding[1];
          int64_t h1 = std::min(h0 + c.kernel[0], x.h + c.padding[0]);
          int64_t w1 = std::min(w0 + c.kernel[1], x.w + c.padding[1]);
          const int64_t poolSize = (h1 - h0) * (w1 - w0);
          h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
          h1 = std::min(h1, x.h), w1 = std::min(w1, x.w);
          if (h0 >= h1 || w0 >= w1) {
            out.push_back(0);
            continue;
          }
          double total = 0;
          for (int64_t y = h0; y < h1; ++y)
            for (int64_t z = w0; z < w1; ++z) total += x.at(n, ch, y, z);
          const int64_t d = c.divisor ? *c.divisor : c.countIncludePad ? poolSize : (h1 - h0) * (w1 - w0);
          out.push_back(total / static_cast<double>(d));
        }
  return out;
}

const AvgCase kAvgCases[] = {
    {{2, 2, 6, 6}, {2, 2}, std::nullopt, {0, 0}, false, true, std::nullopt},
    {{1, 2, 5, 7}, {3, 2}, Size2{2, 1}, {1, 1}, false, true, std::nullopt},
    {{1, 2, 5, 7}, {3, 2}, Size2{2, 1}, {1, 1}, false, false, std::nullopt},
    {{1, 1, 5, 5}, {2, 2}, Size2{2, 2}, {1, 1}, true, true, std::nullopt},
    {{1, 1, 5, 5}, {2, 2}, Size2{2, 2}, {1, 1}, true, false, std::nullopt},
    {{1, 1, 6, 5}, {3, 3}, Size2{2, 2}, {1, 0}, true, true, 4},
    {{1, 3, 4, 4}, {2, 2}, Size2{1, 1}, {0, 0}, false, true, -3},
};

TEST(Pooling, AvgPoolMatchesPyTorchsLoop) {
  uint64_t seed = 20;
  for (const AvgCase& c : kAvgCases) {
    SCOPED_TRACE(ir::shapeStr(c.shape) + " countIncludePad " + std::to_string(c.countIncludePad));
    Tensor x = image(c.shape, seed++);
    Tensor y = avgPool2d(x, c.kernel, c.stride, c.padding, c.ceilMode, c.countIncludePad, c.divisor);
    expectNear(values(y), refAvgPool(Host(x), c), 1e-12, "avg_pool2d");
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return avgPool2d(in[0], c.kernel, c.stride, c.padding, c.ceilMode, c.countIncludePad, c.divisor);
        },
        {image(c.shape, seed++).setRequiresGrad()}));
  }
  // PyTorch's ceil-mode shape: 5x5, kernel 2, stride 2, padding 1 gives 3x3.
  EXPECT_EQ(avgPool2d(zeros({1, 1, 5, 5}), {2, 2}, Size2{2, 2}, {1, 1}, true).str(), "f32[1,1,3,3]@cpu");
  // f16 adds in f32: 2048 + 1 would round away in f16.
  Tensor h = fromVector({2048, 1, 1, 2}, {1, 1, 2, 2}).to(DType::f16);
  EXPECT_EQ(avgPool2d(h, {2, 2}, std::nullopt, {0, 0}, false, true, 1).to(DType::f32).toVector(),
            (std::vector<float>{2052}));
}

/// PyTorch's adaptive bins.
std::vector<double> refAdaptive(const Host& x, int64_t oh, int64_t ow) {
  std::vector<double> out;
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t ch = 0; ch < x.c; ++ch)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const auto start = [](int64_t a, int64_t in, int64_t o) {
            return static_cast<int64_t>(std::floor(static_cast<double>(a * in) / static_cast<double>(o)));
          };
          const auto end = [](int64_t a, int64_t in, int64_t o) {
            return static_cast<int64_t>(std::ceil(static_cast<double>((a + 1) * in) / static_cast<double>(o)));
          };
          double total = 0;
          int64_t count = 0;
          for (int64_t y = start(i, x.h, oh); y < end(i, x.h, oh); ++y)
            for (int64_t z = start(j, x.w, ow); z < end(j, x.w, ow); ++z) total += x.at(n, ch, y, z), ++count;
          out.push_back(total / static_cast<double>(count));
        }
  return out;
}

TEST(Pooling, AdaptiveAvgPoolMatchesPyTorchsBins) {
  const std::pair<Shape, Size2> cases[] = {{{2, 3, 5, 7}, {1, 1}},
                                           {{2, 2, 6, 8}, {3, 4}},
                                           {{1, 2, 5, 7}, {3, 4}},
                                           {{1, 1, 4, 3}, {6, 5}},
                                           {{1, 2, 7, 5}, {2, 5}}};
  uint64_t seed = 40;
  for (const auto& [shape, size] : cases) {
    SCOPED_TRACE(ir::shapeStr(shape));
    Tensor x = image(shape, seed++);
    Tensor y = adaptiveAvgPool2d(x, size);
    EXPECT_EQ(y.shape(), (Shape{shape[0], shape[1], size[0], size[1]}));
    expectNear(values(y), refAdaptive(Host(x), size[0], size[1]), 1e-12, "adaptive_avg_pool2d");
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return adaptiveAvgPool2d(in[0], size); },
                          {image({1, 1, shape[2], shape[3]}, seed++).setRequiresGrad()}));
  }
  EXPECT_EQ(adaptiveAvgPool2d(zeros({3, 5, 5}), {2, 2}).str(), "f32[3,2,2]@cpu");
}

/// Source position of output j for a padded dim, PyTorch's definitions.
int64_t refPadSource(const std::string& mode, int64_t j, int64_t n, int64_t before) {
  int64_t s = j - before;
  if (mode == "replicate") return s < 0 ? 0 : s >= n ? n - 1 : s;
  if (mode == "circular") return s < 0 ? s + n : s >= n ? s - n : s;
  // reflect: mirrored about the edge elements, which are not repeated
  if (s < 0) return -s;
  if (s >= n) return (n - 1) - (s - (n - 1));
  return s;
}

TEST(Pooling, PadModesMatchTheirDefinitions) {
  Tensor x = image({2, 3, 4, 5}, 50);
  const Host hx(x);
  for (const std::string mode : {"reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    const std::vector<int64_t> pads{2, 3, 3, 1};  // left, right, top, bottom
    Tensor y = pad(x, pads, mode);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 8, 10}));
    std::vector<double> want;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t i = 0; i < 8; ++i)
          for (int64_t j = 0; j < 10; ++j)
            want.push_back(hx.at(n, c, refPadSource(mode, i, 4, 3), refPadSource(mode, j, 5, 2)));
    expectNear(values(y), want, 0, mode);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return pad(in[0], {2, 1, 1, 2}, mode);
        },
        {image({1, 2, 3, 3}, 51).setRequiresGrad()}));
  }
  // Constant: the value around, negative pads crop, any rank.
  Tensor c = pad(x, {1, -2, 0, 0, -1, 2}, "constant", 7.5);
  ASSERT_EQ(c.shape(), (Shape{2, 4, 4, 4}));
  std::vector<double> want;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t ch = 0; ch < 4; ++ch)
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j < 4; ++j) {
          const int64_t sc = ch + 1, sj = j - 1;  // channel 0 cropped; one column left, two cropped right
          want.push_back(sc < 3 && sj >= 0 && sj < 3 ? hx.at(n, sc, i, sj) : 7.5);
        }
  expectNear(values(c), want, 0, "constant");
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return pad(in[0], {2, -1, 1, 0});
      },
      {image({2, 3, 4}, 52).setRequiresGrad()}));
  // 1-d reflect of a 2-d tensor, as PyTorch's ReflectionPad1d: [1 2 3 4] -> [3 2 1 2 3 4 3 2].
  EXPECT_EQ(pad(fromVector({1, 2, 3, 4}, {1, 4}), {2, 2}, "reflect").toVector(),
            (std::vector<float>{3, 2, 1, 2, 3, 4, 3, 2}));
  EXPECT_EQ(pad(fromVector({1, 2, 3}, {1, 3}), {3, 1}, "circular").toVector(),
            (std::vector<float>{1, 2, 3, 1, 2, 3, 1}));
}

/// PyTorch's interpolation tables for an f64 input (scalar type double).
struct RefTable {
  std::vector<int64_t> i0, i1;
  std::vector<double> l0, l1;
};
RefTable refTable(const std::string& mode, int64_t in, int64_t out, std::optional<double> factor, bool align) {
  RefTable t;
  for (int64_t j = 0; j < out; ++j) {
    if (mode == "nearest") {
      const float scale = factor ? static_cast<float>(1.0 / *factor) : static_cast<float>(in) / static_cast<float>(out);
      const int64_t s =
          out == in       ? j
          : out == 2 * in ? j / 2
                          : std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(j) * scale)), in - 1);
      t.i0.push_back(s), t.i1.push_back(s), t.l0.push_back(1), t.l1.push_back(0);
      continue;
    }
    double src;
    if (align) {
      src = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) * static_cast<double>(j) : 0.0;
    } else {
      const double scale = factor ? 1.0 / *factor : static_cast<double>(in) / static_cast<double>(out);
      src = std::max(scale * (static_cast<double>(j) + 0.5) - 0.5, 0.0);
    }
    const int64_t a = std::min<int64_t>(static_cast<int64_t>(src), in - 1);
    const double l = std::min(std::max(src - static_cast<double>(a), 0.0), 1.0);
    t.i0.push_back(a), t.i1.push_back(std::min(a + 1, in - 1)), t.l0.push_back(1 - l), t.l1.push_back(l);
  }
  return t;
}

TEST(Pooling, InterpolateMatchesPyTorchsFormulas) {
  struct Case {
    Shape shape;
    InterpolateOptions options;
  };
  const Case cases[] = {
      {{1, 2, 3, 4}, {.size = Size2{6, 8}}},
      {{1, 2, 5, 4}, {.size = Size2{3, 7}}},
      {{2, 1, 4, 5}, {.scaleFactor = std::array<double, 2>{1.7, 0.6}}},
      {{1, 2, 3, 4}, {.size = Size2{5, 7}, .mode = "bilinear"}},
      {{1, 2, 3, 4}, {.size = Size2{5, 7}, .mode = "bilinear", .alignCorners = true}},
      {{1, 1, 6, 5}, {.size = Size2{4, 1}, .mode = "bilinear", .alignCorners = true}},
      {{2, 1, 4, 5}, {.scaleFactor = std::array<double, 2>{2.5, 0.5}, .mode = "bilinear"}},
  };
  uint64_t seed = 60;
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::shapeStr(c.shape) + " " + c.options.mode);
    Tensor x = image(c.shape, seed++);
    const Host hx(x);
    Tensor y = interpolate(x, c.options);
    const int64_t oh = y.size(2), ow = y.size(3);
    if (c.options.size) {
      EXPECT_EQ(oh, (*c.options.size)[0]);
      EXPECT_EQ(ow, (*c.options.size)[1]);
    } else {
      EXPECT_EQ(oh, static_cast<int64_t>(std::floor(static_cast<double>(c.shape[2]) * (*c.options.scaleFactor)[0])));
      EXPECT_EQ(ow, static_cast<int64_t>(std::floor(static_cast<double>(c.shape[3]) * (*c.options.scaleFactor)[1])));
    }
    std::optional<double> fh, fw;
    if (c.options.scaleFactor) fh = (*c.options.scaleFactor)[0], fw = (*c.options.scaleFactor)[1];
    const bool align = c.options.alignCorners.value_or(false);
    const RefTable th = refTable(c.options.mode, c.shape[2], oh, fh, align);
    const RefTable tw = refTable(c.options.mode, c.shape[3], ow, fw, align);
    std::vector<double> want;
    for (int64_t n = 0; n < hx.n; ++n)
      for (int64_t ch = 0; ch < hx.c; ++ch)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            const auto row = [&](int64_t r) {
              return hx.at(n, ch, r, tw.i0[j]) * tw.l0[j] + hx.at(n, ch, r, tw.i1[j]) * tw.l1[j];
            };
            want.push_back(row(th.i0[i]) * th.l0[i] + row(th.i1[i]) * th.l1[i]);
          }
    expectNear(values(y), want, 1e-12, c.options.mode);
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return interpolate(in[0], c.options); },
                          {image(c.shape, seed++).setRequiresGrad()}));
  }
  // A 2x nearest upsample repeats each element twice along each dim.
  EXPECT_EQ(interpolate(fromVector({1, 2, 3, 4}, {1, 1, 2, 2}), {.size = Size2{4, 4}}).toVector(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(Pooling, CompiledEqualsEagerAndAMaxPoolIsOneKernel) {
  Tensor x = randn({2, 3, 8, 8});
  for (const std::pair<const char*, std::function<Tensor(const Tensor&)>>& c :
       std::initializer_list<std::pair<const char*, std::function<Tensor(const Tensor&)>>>{
           {"max pool",
            [](const Tensor& a) {
              return maxPool2d(a, {2, 2});
            }},
           {"dilated strided max pool",
            [](const Tensor& a) {
              return maxPool2d(a, {3, 2}, Size2{2, 3}, {0, 0}, {2, 1});
            }},
           {"avg pool",
            [](const Tensor& a) {
              return avgPool2d(a, {3, 3}, Size2{1, 2});
            }},
       }) {
    auto f = compile(c.second);
    const Tensor want = c.second(x);
    const Tensor got = f(x);
    EXPECT_EQ(got.toVector(), want.toVector()) << c.first;
    // The k*k strided views and their maximum (add, divide) chain: one kernel.
    EXPECT_EQ(f.lastNumKernels(), 1) << c.first << "\n" << f.lastGraph();
  }
}

TEST(Pooling, OnOpenCLAsOnTheCpu) {
  const Device device = Device::opencl();
  std::string why;
  if (!runtime::isDeviceAvailable(device, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  Tensor x = randn({2, 3, 7, 6});
  const auto same = [&](const char* what, const std::function<Tensor(const Tensor&)>& fn) {
    expectNear(values(fn(x.to(device)).cpu()), values(fn(x)), 1e-6, what);
  };
  same("max pool", [](const Tensor& a) { return maxPool2d(a, {3, 3}, Size2{2, 2}, {1, 1}, {1, 1}, true); });
  same("max pool indices", [](const Tensor& a) { return maxPool2dWithIndices(a, {2, 2}).indices; });
  same("avg pool", [](const Tensor& a) { return avgPool2d(a, {3, 2}, Size2{2, 1}, {1, 1}, false, false); });
  same("adaptive avg pool", [](const Tensor& a) { return adaptiveAvgPool2d(a, {3, 4}); });
  same("reflect pad", [](const Tensor& a) { return pad(a, {1, 2, 2, 1}, "reflect"); });
  same("constant pad", [](const Tensor& a) { return pad(a, {1, 2, 2, 1}, "constant", -1); });
  same("bilinear", [](const Tensor& a) { return interpolate(a, {.size = Size2{9, 4}, .mode = "bilinear"}); });
  // Max pool's gradient (an indexAdd) on the device.
  Tensor xd = x.to(device).setRequiresGrad();
  Tensor xc = x.clone().setRequiresGrad();
  sum(maxPool2d(xd, {2, 2})).backward();
  sum(maxPool2d(xc, {2, 2})).backward();
  expectNear(values(xd.grad().cpu()), values(xc.grad()), 0, "max pool gradient");
}

TEST(Pooling, Errors) {
  Tensor x = zeros({1, 2, 4, 4});
  EXPECT_EQ(errorOf([&] { maxPool2d(x, {0, 2}); }), "max_pool2d: expected kernel sizes > 0, got [0, 2]");
  EXPECT_EQ(errorOf([&] { maxPool2d(x, {2, 2}, Size2{0, 1}); }), "max_pool2d: expected strides > 0, got [0, 1]");
  EXPECT_EQ(errorOf([&] {
              maxPool2d(x, {3, 3}, std::nullopt, {2, 1});
            }),
            "max_pool2d: padding should be at most half of the kernel size, got padding [2, 1] for kernel [3, 3]");
  EXPECT_EQ(errorOf([&] {
              avgPool2d(x, {2, 2}, std::nullopt, {0, 2});
            }),
            "avg_pool2d: padding should be at most half of the kernel size, got padding [0, 2] for kernel [2, 2]");
  EXPECT_EQ(errorOf([&] {
              maxPool2d(x, {5, 5});
            }),
            "max_pool2d: the output size [0, 0] computed for f32[1,2,4,4]@cpu is too small");
  EXPECT_EQ(errorOf([&] {
              maxPool2d(zeros({4, 4}), {2, 2});
            }),
            "max_pool2d: expected a 3-d [C, H, W] or 4-d [N, C, H, W] input, got f32[4,4]@cpu");
  EXPECT_EQ(errorOf([&] {
              maxPool2d(zeros({1, 1, 4, 4}, DType::i32), {2, 2});
            }),
            "max_pool2d: expected a floating-point dtype (f32, f64, f16, bf16), got i32[1,1,4,4]@cpu");
  EXPECT_EQ(errorOf([&] {
              pad(x, {1, 1}, "reflect");
            }),
            "pad: mode 'reflect' pads the last 1, 2 or 3 dims of a tensor with 1 or 2 more dims, got 2 pads for "
            "f32[1,2,4,4]@cpu");
  EXPECT_EQ(errorOf([&] {
              pad(x, {4, 0, 0, 0}, "reflect");
            }),
            "pad: reflect padding must be smaller than the padded dimension, got 4 and 0 for dimension 3 of "
            "f32[1,2,4,4]@cpu");
  EXPECT_EQ(errorOf([&] { pad(x, {1}); }),
            "pad: expected an even number of pads, at most two per dimension, got [1] for f32[1,2,4,4]@cpu");
  EXPECT_EQ(errorOf([&] {
              pad(x, {1, 1}, "wrap");
            }),
            "pad: unknown mode 'wrap' (expected constant, reflect, replicate or circular)");
  EXPECT_EQ(errorOf([&] {
              interpolate(x, {.size = Size2{2, 2}, .alignCorners = true});
            }),
            "interpolate: alignCorners can only be set with the interpolating modes (bilinear)");
  EXPECT_EQ(errorOf([&] { interpolate(x, {}); }), "interpolate: expected either size or scaleFactor, not neither");
}

TEST(Pooling, Modules) {
  Tensor x = image({2, 3, 6, 6}, 80);
  nn::MaxPool2d mp(nn::MaxPool2dOptions{.kernel = {3, 3}, .stride = Size2{2, 2}, .padding = {1, 1}});
  expectNear(values(mp(x)), values(maxPool2d(x, {3, 3}, Size2{2, 2}, {1, 1})), 0, "MaxPool2d");
  nn::MaxPool2d square(2);
  EXPECT_EQ(square(x).shape(), (Shape{2, 3, 3, 3}));
  nn::AvgPool2d ap(nn::AvgPool2dOptions{.kernel = {2, 3}, .padding = {1, 1}, .countIncludePad = false});
  expectNear(values(ap(x)), values(avgPool2d(x, {2, 3}, std::nullopt, {1, 1}, false, false)), 0, "AvgPool2d");
  nn::AdaptiveAvgPool2d gap(1);
  EXPECT_EQ(gap(x).shape(), (Shape{2, 3, 1, 1}));
  nn::AdaptiveAvgPool2d ap45({4, 5});
  EXPECT_EQ(ap45(x).shape(), (Shape{2, 3, 4, 5}));
  nn::Flatten flat;
  EXPECT_EQ(flat(x).shape(), (Shape{2, 108}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).shape(), (Shape{6, 6, 6}));
  EXPECT_TRUE(mp->parameters().empty());
  nn::Sequential net(nn::MaxPool2d(2), nn::Flatten());
  EXPECT_EQ(net(x).shape(), (Shape{2, 27}));
}

}  // namespace
}  // namespace kiln

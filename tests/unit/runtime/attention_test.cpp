// The attention library calls (runtime/attention.h) against a float64 loop
// over the whole score matrix: shapes that are not multiples of the 64 × 64
// blocks, heads read through strides (the [B, L, H, E] layout viewed as
// [B, H, L, E]), additive masks broadcast over the batch, bool masks, the
// causal option, dropout on the weights (the reference draws its mask from
// Philox by the index rule of Note [Dropout draws]), rows whose every key is
// excluded (NaN, as the unfused softmax), and the gradients of q, k and v.
//
// Tolerance (docs/ops.md, "attention"): f32 results within 2e-5 · (1 + the
// largest |value| of the compared tensor) of the f64 reference, f64 within
// 1e-12 of it.
#include "runtime/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "runtime/philox.h"

namespace kiln::runtime {
namespace {

struct Case {
  int64_t batch = 2, heads = 3, lq = 70, lk = 130, e = 13, ev = 9;
  AttentionCall::Mask mask = AttentionCall::Mask::none;
  bool causal = false;
  double p = 0.0;
  bool headsInterleaved = true;  // q, k, v stored [B, L, H, E]
  bool emptyRow = false;         // query row 3 sees no key
};

constexpr uint64_t kSeed = 0x1234567890abcdefull, kOffset = 77;

std::vector<double> randomValues(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (double& x : v) x = u(gen);
  return v;
}

/// An operand [B, H, rows, cols] as stored: interleaved [B, rows, H, cols] or contiguous.
AttentionOperand layout(const Case& c, int64_t rows, int64_t cols) {
  if (c.headsInterleaved) return {{rows * c.heads * cols, cols}, c.heads * cols, 1};
  return {{c.heads * rows * cols, rows * cols}, cols, 1};
}

double at(const std::vector<double>& x, const AttentionOperand& o, int64_t b, int64_t h, int64_t i, int64_t j) {
  return x[static_cast<size_t>(b * o.batchStrides[0] + h * o.batchStrides[1] + i * o.rowStride + j * o.colStride)];
}

struct Inputs {
  std::vector<double> q, k, v, dout, additive;
  std::vector<uint8_t> keep;
  AttentionOperand lq, lk, lv, ldout, lmask;
};

Inputs makeInputs(const Case& c) {
  Inputs in;
  const int64_t bh = c.batch * c.heads;
  in.q = randomValues(static_cast<size_t>(bh * c.lq * c.e), 1, 2.0);
  in.k = randomValues(static_cast<size_t>(bh * c.lk * c.e), 2, 2.0);
  in.v = randomValues(static_cast<size_t>(bh * c.lk * c.ev), 3);
  in.dout = randomValues(static_cast<size_t>(bh * c.lq * c.ev), 4);
  in.lq = layout(c, c.lq, c.e), in.lk = layout(c, c.lk, c.e), in.lv = layout(c, c.lk, c.ev);
  in.ldout = {{c.heads * c.lq * c.ev, c.lq * c.ev}, c.ev, 1};
  // The mask is [Lq, Lk], broadcast over batch and heads.
  in.lmask = {{0, 0}, c.lk, 1};
  in.additive = randomValues(static_cast<size_t>(c.lq * c.lk), 5, 3.0);
  std::mt19937 gen(6);
  in.keep.resize(static_cast<size_t>(c.lq * c.lk));
  for (auto& k : in.keep) k = gen() % 4 != 0;
  // Query row 3 sees no key at all: its output is NaN, as the unfused softmax's.
  for (int64_t j = 0; j < c.lk && c.lq > 3 && c.emptyRow; ++j) {
    in.keep[static_cast<size_t>(3 * c.lk + j)] = 0;
    in.additive[static_cast<size_t>(3 * c.lk + j)] = -std::numeric_limits<double>::infinity();
  }
  return in;
}

/// dropout's factor for weight element `index` (Note [Dropout draws]).
double dropFactor(const Case& c, uint64_t index) {
  const uint64_t g = index / 4;
  const PhiloxCounter r = philox4x32_10(
      {uint32_t(g), uint32_t(g >> 32), uint32_t(kOffset), uint32_t(kOffset >> 32)}, {uint32_t(kSeed), uint32_t(kSeed >> 32)});
  const auto threshold = static_cast<int64_t>(std::floor(c.p * 16777216.0));
  return static_cast<int64_t>(r[index % 4] >> 8) >= threshold ? 1.0 / (1.0 - c.p) : 0.0;
}

struct Reference {
  std::vector<double> out, dq, dk, dv;  // contiguous [B, H, L, E]
};

Reference reference(const Case& c, const Inputs& in) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.e));
  Reference r;
  r.out.assign(static_cast<size_t>(c.batch * c.heads * c.lq * c.ev), 0.0);
  r.dq.assign(static_cast<size_t>(c.batch * c.heads * c.lq * c.e), 0.0);
  r.dk.assign(static_cast<size_t>(c.batch * c.heads * c.lk * c.e), 0.0);
  r.dv.assign(static_cast<size_t>(c.batch * c.heads * c.lk * c.ev), 0.0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t bh = b * c.heads + h;
      for (int64_t i = 0; i < c.lq; ++i) {
        std::vector<double> s(static_cast<size_t>(c.lk)), w(s.size()), z(s.size(), 1.0), dw(s.size());
        double top = -INFINITY;
        for (int64_t j = 0; j < c.lk; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.e; ++e) dot += at(in.q, in.lq, b, h, i, e) * at(in.k, in.lk, b, h, j, e);
          double x = dot * scale;
          if (c.mask == AttentionCall::Mask::additive) x += in.additive[static_cast<size_t>(i * c.lk + j)];
          if (c.mask == AttentionCall::Mask::boolean && !in.keep[static_cast<size_t>(i * c.lk + j)]) x = -INFINITY;
          if (c.causal && j > i) x = -INFINITY;
          s[j] = x;
          top = std::max(top, x);
        }
        double sum = 0;
        for (int64_t j = 0; j < c.lk; ++j) sum += (w[j] = std::exp(s[j] - top));
        for (int64_t j = 0; j < c.lk; ++j) {
          w[j] /= sum;
          if (c.p > 0) z[j] = dropFactor(c, static_cast<uint64_t>((bh * c.lq + i) * c.lk + j));
        }
        double* out = &r.out[static_cast<size_t>((bh * c.lq + i) * c.ev)];
        const double* dout = &in.dout[static_cast<size_t>((bh * c.lq + i) * c.ev)];
        for (int64_t j = 0; j < c.lk; ++j)
          for (int64_t e = 0; e < c.ev; ++e) out[e] += w[j] * z[j] * at(in.v, in.lv, b, h, j, e);
        double dsum = 0;
        for (int64_t j = 0; j < c.lk; ++j) {
          double d = 0;
          for (int64_t e = 0; e < c.ev; ++e) d += dout[e] * at(in.v, in.lv, b, h, j, e);
          dw[j] = d * z[j];
          dsum += w[j] * dw[j];
        }
        for (int64_t j = 0; j < c.lk; ++j) {
          const double ds = w[j] * (dw[j] - dsum) * scale;
          for (int64_t e = 0; e < c.e; ++e) {
            r.dq[static_cast<size_t>((bh * c.lq + i) * c.e + e)] += ds * at(in.k, in.lk, b, h, j, e);
            r.dk[static_cast<size_t>((bh * c.lk + j) * c.e + e)] += ds * at(in.q, in.lq, b, h, i, e);
          }
          for (int64_t e = 0; e < c.ev; ++e) r.dv[static_cast<size_t>((bh * c.lk + j) * c.ev + e)] += w[j] * z[j] * dout[e];
        }
      }
    }
  return r;
}

template <typename T>
std::vector<T> as(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}

template <typename T>
void expectNear(const std::vector<T>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 0;
  for (double w : want)
    if (std::isfinite(w)) largest = std::max(largest, std::abs(w));
  const double bound = tol * (1 + largest);
  int bad = 0;
  for (size_t n = 0; n < got.size() && bad < 5; ++n) {
    if (std::isnan(want[n])) {
      if (!std::isnan(static_cast<double>(got[n]))) ++bad, ADD_FAILURE() << what << "[" << n << "] = " << got[n] << ", want NaN";
      continue;
    }
    if (!(std::abs(static_cast<double>(got[n]) - want[n]) <= bound))
      ++bad, ADD_FAILURE() << what << "[" << n << "] = " << got[n] << ", want " << want[n] << " within " << bound;
  }
}

template <typename T>
void check(const Case& c) {
  const Inputs in = makeInputs(c);
  const Reference want = reference(c, in);
  AttentionCall call;
  call.dtype = sizeof(T) == 4 ? DType::f32 : DType::f64;
  call.batch = {c.batch, c.heads};
  call.lq = c.lq, call.lk = c.lk, call.e = c.e, call.ev = c.ev;
  call.mask = c.mask;
  call.causal = c.causal;
  call.scale = 1.0 / std::sqrt(static_cast<double>(c.e));
  call.dropout = c.p > 0;
  call.dropThreshold = static_cast<int64_t>(std::floor(c.p * 16777216.0));
  call.dropScale = 1.0 / (1.0 - c.p);
  std::vector<T> q = as<T>(in.q), k = as<T>(in.k), v = as<T>(in.v), dout = as<T>(in.dout), add = as<T>(in.additive);
  std::vector<uint8_t> keep = in.keep;
  int64_t seed = static_cast<int64_t>(kSeed), offset = static_cast<int64_t>(kOffset);
  std::vector<T> out(want.out.size());
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;

  call.operands = {in.lq, in.lk, in.lv};
  std::vector<void*> buffers = {q.data(), k.data(), v.data()};
  auto withMaskAndDraw = [&](std::vector<void*>& bufs) {
    if (c.mask != AttentionCall::Mask::none) {
      call.operands.push_back(in.lmask);
      bufs.push_back(c.mask == AttentionCall::Mask::additive ? static_cast<void*>(add.data()) : keep.data());
    }
    if (c.p > 0) bufs.insert(bufs.end(), {&seed, &offset});
  };
  withMaskAndDraw(buffers);
  buffers.push_back(out.data());
  attention(buffers, call.encode());
  expectNear(out, want.out, tol, "out");

  // The backward reads the forward's out (contiguous) and its gradient.
  call.operands = {in.lq, in.lk, in.lv, in.ldout, in.ldout};
  std::vector<void*> back = {q.data(), k.data(), v.data(), out.data(), dout.data()};
  withMaskAndDraw(back);
  std::vector<T> grads(want.dq.size() + want.dk.size() + want.dv.size());
  back.push_back(grads.data());
  attentionBackward(back, call.encode());
  const auto split = [&](size_t from, size_t n) { return std::vector<T>(grads.begin() + from, grads.begin() + from + n); };
  expectNear(split(0, want.dq.size()), want.dq, tol, "dq");
  expectNear(split(want.dq.size(), want.dk.size()), want.dk, tol, "dk");
  expectNear(split(want.dq.size() + want.dk.size(), want.dv.size()), want.dv, tol, "dv");
}

TEST(Attention, EqualsTheF64ReferenceAtShapesOffTheBlockGrid) {
  check<float>({});
  check<double>({});
  check<float>({.batch = 1, .heads = 2, .lq = 1, .lk = 1, .e = 1, .ev = 1});
  check<float>({.batch = 1, .heads = 1, .lq = 200, .lk = 65, .e = 64, .ev = 40, .headsInterleaved = false});
}

TEST(Attention, Causal) {
  check<float>({.causal = true});
  check<double>({.lq = 130, .lk = 130, .causal = true});
  // More keys than queries: query i sees keys 0..i (the upper-left triangle).
  check<float>({.lq = 40, .lk = 150, .causal = true});
}

TEST(Attention, AdditiveAndBoolMasksBroadcastOverBatchAndHeads) {
  check<float>({.mask = AttentionCall::Mask::additive});
  check<double>({.mask = AttentionCall::Mask::additive, .causal = true});
  check<float>({.mask = AttentionCall::Mask::boolean});
  check<double>({.mask = AttentionCall::Mask::boolean, .causal = true, .p = 0.1});
}

TEST(Attention, ARowThatSeesNoKeyIsNaNAsInTheUnfusedSoftmax) {
  check<float>({.mask = AttentionCall::Mask::additive, .emptyRow = true});
  check<float>({.mask = AttentionCall::Mask::boolean, .emptyRow = true});
}

TEST(Attention, DropoutDrawsTheWeightsOfTheUnfusedGraph) {
  check<float>({.p = 0.25});
  check<double>({.causal = true, .p = 0.5});
}
}  // namespace
}  // namespace kiln::runtime

// The attention library calls of runtime/attention.h: argument encoding,
// the split over threads, and the blocks of the forward and the backward.
//
// Note [Flash attention on the CPU]
// softmax(q·kᵀ·scale + mask)·v as separate ops writes the [Lq, Lk] scores of
// every head to memory and reads them back three times (the softmax's max,
// its exp and sum, its division; then the second matmul): for the
// transformer block's 8 heads of 512 queries, 8 MiB per pass, more than the
// L2 cache. Here a block of 64 queries meets a block of 64 keys at a time,
// and only those 64 × 64 scores exist (in L1), as in flash attention (Dao et
// al., 2022): each query row keeps its running maximum m, the running sum l
// of exp(s - m) and the running output acc = Σ exp(s - m)·v; a new block with
// a larger maximum m' rescales l and acc by exp(m - m') first (the online
// softmax of Milakov and Gimelshein, 2018). The output is acc / l once every
// key has been seen. Keys that the causal option excludes are never
// visited: a query block stops at its last row's diagonal.
//
// Dropout multiplies exp(s - m) by the mask and the scale after l has taken
// it (the weights are normalized before dropout, as in the unfused graph).
// Its draws are those of `dropout` on the weights [batch..., Lq, Lk]
// (runtime/attention.h), computed for the block's elements only.
//
// The backward (FlashAttention-2's) keeps nothing from the forward: it
// recomputes each row's log-sum-exp L (a pass over the keys, scores only),
// D_i = dO_i · O_i, then for each key block and each query block the
// weights P = exp(s - L), and from them dV += P̃ᵀ·dO, dP̃ = dO·vᵀ,
// dS = P ∘ (dP̃ ∘ Z - D), dQ += dS·k·scale and dK += dSᵀ·q·scale, with P̃ =
// P ∘ Z the dropped weights. One thread does all of one batch index (one
// head), so dQ's sums over key blocks need no atomics and the result is the
// same at any thread count; a single head therefore runs on one thread.
//
// The products of these blocks are the one GEMM loop kiln writes
// (runtime/attention_tiles.h; DESIGN.md §2): a BLAS call per 64 × 64 block
// costs more in call and packing overhead than the block's 0.5 MFLOP, and a
// BLAS cannot interleave the softmax between its two products. The tiles are
// compiled for AVX-512, AVX2 and the baseline (GCC's target_clones, chosen
// when the library loads), with contraction into FMA allowed in this file
// only (CMakeLists.txt).
//
// So the result differs from the unfused graph's by rounding: the sums run
// in another order, the exp is the tiles' own (within 2 ulp of the true
// value in f32), and the normalization divides once at the end. The
// tolerance is in docs/ops.md ("attention"); tests/unit/runtime/
// attention_test.cpp checks it against a float64 reference.
#include "runtime/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/attention_tiles.h"
#include "runtime/error.h"
#include "runtime/philox.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

namespace {
using attention_tiles::gemmTile;
using attention_tiles::kRowStep;
using attention_tiles::padded;

constexpr int64_t kBlockRows = 64;  ///< queries per block
constexpr int64_t kBlockCols = 64;  ///< keys per block
static_assert(kBlockCols % attention_tiles::kPad == 0 && kBlockRows % attention_tiles::kPad == 0);
}  // namespace

std::vector<int64_t> AttentionCall::encode() const {
  std::vector<int64_t> args = {static_cast<int64_t>(dtype), static_cast<int64_t>(batch.size())};
  args.insert(args.end(), batch.begin(), batch.end());
  args.insert(args.end(), {lq, lk, e, ev, static_cast<int64_t>(mask), causal ? 1 : 0, std::bit_cast<int64_t>(scale),
                           dropout ? 1 : 0, dropThreshold, std::bit_cast<int64_t>(dropScale),
                           static_cast<int64_t>(operands.size())});
  for (const AttentionOperand& o : operands) {
    KILN_ASSERT(o.batchStrides.size() == batch.size(), "attention operand with {} batch strides for {} batch dims",
                o.batchStrides.size(), batch.size());
    args.insert(args.end(), o.batchStrides.begin(), o.batchStrides.end());
    args.insert(args.end(), {o.rowStride, o.colStride});
  }
  return args;
}

AttentionCall AttentionCall::decode(std::span<const int64_t> args) {
  KILN_ASSERT(args.size() >= 2, "attention call with {} arguments", args.size());
  AttentionCall c;
  size_t at = 0;
  c.dtype = static_cast<DType>(args[at++]);
  const auto nb = static_cast<size_t>(args[at++]);
  KILN_ASSERT(args.size() >= 2 + nb + 11, "attention call with {} arguments for {} batch dims", args.size(), nb);
  c.batch.assign(args.begin() + 2, args.begin() + 2 + static_cast<std::ptrdiff_t>(nb));
  at += nb;
  c.lq = args[at++], c.lk = args[at++], c.e = args[at++], c.ev = args[at++];
  c.mask = static_cast<Mask>(args[at++]);
  c.causal = args[at++] != 0;
  c.scale = std::bit_cast<double>(args[at++]);
  c.dropout = args[at++] != 0;
  c.dropThreshold = args[at++];
  c.dropScale = std::bit_cast<double>(args[at++]);
  const auto numOperands = static_cast<size_t>(args[at++]);
  KILN_ASSERT(args.size() == at + numOperands * (nb + 2), "attention call with {} arguments", args.size());
  for (size_t o = 0; o < numOperands; ++o) {
    AttentionOperand op;
    op.batchStrides.assign(args.begin() + static_cast<std::ptrdiff_t>(at),
                           args.begin() + static_cast<std::ptrdiff_t>(at + nb));
    at += nb;
    op.rowStride = args[at++], op.colStride = args[at++];
    c.operands.push_back(std::move(op));
  }
  return c;
}

namespace {

/// One operand as the blocks read it: its data and where each batch index
/// starts.
template <typename T>
struct View {
  const T* data = nullptr;
  std::vector<int64_t> start;  ///< per flat batch index
  int64_t row = 0, col = 0;
  T at(int64_t b, int64_t i, int64_t j) const { return data[start[b] + i * row + j * col]; }
};

template <typename T>
View<T> view(const void* data, const AttentionOperand& o, std::span<const int64_t> batch, int64_t batches) {
  View<T> v{static_cast<const T*>(data), std::vector<int64_t>(static_cast<size_t>(batches)), o.rowStride, o.colStride};
  for (int64_t b = 0; b < batches; ++b) {
    int64_t rest = b, offset = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      offset += rest % batch[d] * o.batchStrides[d];
      rest /= batch[d];
    }
    v.start[static_cast<size_t>(b)] = offset;
  }
  return v;
}

/// Everything a block reads: the call, its operands, the mask and the draw.
template <typename T>
struct Problem {
  const AttentionCall* call = nullptr;
  int64_t batches = 0;
  View<T> q, k, v, out, dout;
  View<T> additive;
  View<uint8_t> keep;  ///< a bool mask
  bool dropout = false;
  uint64_t seed = 0, offset = 0;
  int64_t threshold = 0;
  T dropScale = 1;

  /// dropout's factor for weight (b, i, j0 + j), j < n, into z: 0 or the
  /// scale (Note [Dropout draws]: element index (b·Lq + i)·Lk + j).
  void dropFactors(int64_t b, int64_t i, int64_t j0, int64_t n, T* z) const {
    const uint64_t first = static_cast<uint64_t>((b * call->lq + i) * call->lk + j0);
    uint64_t group = ~uint64_t{0};
    PhiloxCounter r{};
    for (int64_t j = 0; j < n; ++j) {
      const uint64_t index = first + static_cast<uint64_t>(j);
      if (index >> 2 != group) {
        group = index >> 2;
        r = philox4x32_10({static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32),
                           static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                          {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
      }
      const bool kept = static_cast<int64_t>(r[index & 3] >> 8) >= threshold;
      z[j] = kept ? dropScale : T(0);
    }
  }
};

template <typename T>
Problem<T> problem(const AttentionCall& c, std::span<void* const> buffers, bool backward) {
  Problem<T> pr;
  pr.call = &c;
  pr.batches = 1;
  for (int64_t s : c.batch) pr.batches *= s;
  const bool masked = c.mask != AttentionCall::Mask::none;
  const size_t want = (backward ? 5u : 3u) + (masked ? 1u : 0u);
  KILN_ASSERT(c.operands.size() == want, "attention call with {} operands, expected {}", c.operands.size(), want);
  KILN_ASSERT(buffers.size() == want + (c.dropout ? 2u : 0u) + 1u, "attention call with {} buffers", buffers.size());
  pr.q = view<T>(buffers[0], c.operands[0], c.batch, pr.batches);
  pr.k = view<T>(buffers[1], c.operands[1], c.batch, pr.batches);
  pr.v = view<T>(buffers[2], c.operands[2], c.batch, pr.batches);
  size_t next = 3;
  if (backward) {
    pr.out = view<T>(buffers[3], c.operands[3], c.batch, pr.batches);
    pr.dout = view<T>(buffers[4], c.operands[4], c.batch, pr.batches);
    next = 5;
  }
  if (c.mask == AttentionCall::Mask::additive) pr.additive = view<T>(buffers[next], c.operands[next], c.batch, pr.batches);
  if (c.mask == AttentionCall::Mask::boolean) pr.keep = view<uint8_t>(buffers[next], c.operands[next], c.batch, pr.batches);
  if (masked) ++next;
  if (c.dropout) {
    pr.dropout = true;
    pr.seed = static_cast<uint64_t>(*static_cast<const int64_t*>(buffers[next]));
    pr.offset = static_cast<uint64_t>(*static_cast<const int64_t*>(buffers[next + 1]));
    pr.threshold = c.dropThreshold;
    pr.dropScale = static_cast<T>(c.dropScale);
  }
  return pr;
}

/// The keys query rows [i0, i0 + rows) see: [0, end).
int64_t keyEnd(const AttentionCall& c, int64_t i0, int64_t rows) {
  return c.causal ? std::min(c.lk, i0 + rows) : c.lk;
}

/// Rows [r0, r0 + rows) of view x at batch b, columns [0, cols), into dst
/// [rows][ld] (dst is zeroed past them by the caller).
template <typename T>
KILN_TILE_INLINE void packRows(const View<T>& x, int64_t b, int64_t r0, int64_t rows, int64_t cols, T* dst,
                               int64_t ld) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * ld + j] = x.at(b, r0 + i, j);
}

/// The same rows transposed: dst[j][i] = x[r0 + i][j], dst [cols][ld].
template <typename T>
KILN_TILE_INLINE void packColumns(const View<T>& x, int64_t b, int64_t r0, int64_t rows, int64_t cols, T* dst,
                                  int64_t ld) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * ld + i] = x.at(b, r0 + i, j);
}

/// The scores of query block [i0, i0 + rows) and key block [j0, j0 + cols)
/// as the softmax sees them, into s [kBlockRows][kBlockCols], from packed q
/// rows (ld qld) and packed kᵀ [E][colsPad]: q·k·scale, plus the additive
/// mask; -inf where the causal option or a bool mask excludes the key, and
/// past cols.
template <typename T, int VB>
KILN_TILE_INLINE void scores(const Problem<T>& pr, int64_t b, const T* q, int64_t qld, const T* kt, int64_t ktld,
                             int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* s) {
  const AttentionCall& c = *pr.call;
  const int64_t colsPad = padded(cols), rows4 = padded(rows, kRowStep);
  const T inf = std::numeric_limits<T>::infinity(), scale = static_cast<T>(c.scale);
  std::fill(s, s + rows4 * kBlockCols, T(0));
  gemmTile<T, VB>(q, qld, kt, ktld, s, kBlockCols, rows4, colsPad, c.e);
  for (int64_t i = 0; i < rows; ++i) {
    T* row = s + i * kBlockCols;
    for (int64_t j = 0; j < cols; ++j) row[j] *= scale;
    if (c.mask == AttentionCall::Mask::additive) {
      const T* mask = pr.additive.data + pr.additive.start[b] + (i0 + i) * pr.additive.row + j0 * pr.additive.col;
      for (int64_t j = 0; j < cols; ++j) row[j] += mask[j * pr.additive.col];
    } else if (c.mask == AttentionCall::Mask::boolean) {
      const uint8_t* keep = pr.keep.data + pr.keep.start[b] + (i0 + i) * pr.keep.row + j0 * pr.keep.col;
      for (int64_t j = 0; j < cols; ++j) row[j] = keep[j * pr.keep.col] ? row[j] : -inf;
    }
    // Causal: key j0 + j is excluded when j0 + j > i0 + i.
    const int64_t firstExcluded = c.causal ? std::clamp<int64_t>(i0 + i - j0 + 1, 0, cols) : cols;
    std::fill(row + firstExcluded, row + colsPad, -inf);
  }
}

/// Keys and values of one batch index packed for the forward's blocks:
/// kᵀ [E][lkPad] and v [lkPad][evPad], zero past Lk and Ev.
template <typename T>
struct PackedKeys {
  std::vector<T> kt, v;
};

template <typename T>
void packKeys(const Problem<T>& pr, int64_t b, PackedKeys<T>& p) {
  const AttentionCall& c = *pr.call;
  const int64_t lkPad = padded(c.lk, kBlockCols), evPad = padded(c.ev);
  p.kt.assign(static_cast<size_t>(c.e * lkPad), T(0));
  p.v.assign(static_cast<size_t>(lkPad * evPad), T(0));
  packColumns(pr.k, b, 0, c.lk, c.e, p.kt.data(), lkPad);
  packRows(pr.v, b, 0, c.lk, c.ev, p.v.data(), evPad);
}

/// The forward of query block `block` of batch index b: Note [Flash
/// attention on the CPU].
template <typename T, int VB>
KILN_TILE_INLINE void forwardBlock(const Problem<T>& pr, const PackedKeys<T>& keys, T* out, int64_t b, int64_t block) {
  const AttentionCall& c = *pr.call;
  const int64_t i0 = block * kBlockRows, rows = std::min(kBlockRows, c.lq - i0), rows4 = padded(rows, kRowStep);
  const int64_t evPad = padded(c.ev), lkPad = padded(c.lk, kBlockCols);
  const T inf = std::numeric_limits<T>::infinity();
  attention_tiles::Scratch<T>& scratch = attention_tiles::Scratch<T>::local();
  scratch.reset(rows4 * c.e + kBlockRows * kBlockCols + rows4 * evPad + kBlockCols + rows);
  T* qb = scratch.take(rows4 * c.e, T(0));
  T* s = scratch.take(kBlockRows * kBlockCols, T(0));
  T* acc = scratch.take(rows4 * evPad, T(0));
  T* z = scratch.take(kBlockCols, T(1));
  T* m = scratch.take(rows, -inf);
  attention_tiles::Scratch<double, 1>& sums = attention_tiles::Scratch<double, 1>::local();
  sums.reset(rows);
  double* l = sums.take(rows, 0.0);
  packRows(pr.q, b, i0, rows, c.e, qb, c.e);
  const int64_t end = keyEnd(c, i0, rows);
  for (int64_t j0 = 0; j0 < end; j0 += kBlockCols) {
    const int64_t cols = std::min(kBlockCols, end - j0), colsPad = padded(cols);
    scores<T, VB>(pr, b, qb, c.e, keys.kt.data() + j0, lkPad, i0, rows, j0, cols, s);
    for (int64_t i = 0; i < rows; ++i) {
      T* row = s + i * kBlockCols;
      const T mNew = std::max(m[i], attention_tiles::rowMax<T, VB>(row, colsPad));
      if (mNew == -inf) {  // every key so far excluded: nothing to add yet
        std::fill(row, row + colsPad, T(0));
        continue;
      }
      for (int64_t j = 0; j < colsPad; ++j) row[j] -= mNew;
      attention_tiles::expRow<T, VB>(row, colsPad);
      const double sum = attention_tiles::rowSum<T, VB>(row, colsPad);
      if (mNew != m[i]) {
        const T correction = std::exp(m[i] - mNew);
        l[i] *= static_cast<double>(correction);
        T* a = acc + i * evPad;
        for (int64_t e = 0; e < evPad; ++e) a[e] *= correction;
        m[i] = mNew;
      }
      l[i] += sum;
      if (pr.dropout) {
        pr.dropFactors(b, i0 + i, j0, cols, z);
        for (int64_t j = 0; j < cols; ++j) row[j] *= z[j];
      }
    }
    gemmTile<T, VB>(s, kBlockCols, keys.v.data() + j0 * evPad, evPad, acc, evPad, rows4, evPad, cols);
  }
  for (int64_t i = 0; i < rows; ++i) {
    // A row with every key excluded has l = 0: NaN, as the unfused softmax's 0/0.
    const T inverse = static_cast<T>(1.0 / l[i]);
    for (int64_t e = 0; e < c.ev; ++e) {
      const T a = acc[static_cast<size_t>(i * evPad + e)];
      out[(b * c.lq + i0 + i) * c.ev + e] = l[i] == 0.0 ? std::numeric_limits<T>::quiet_NaN() : a * inverse;
    }
  }
}

/// Query blocks [begin, end) of the flat (batch index, block) order.
template <typename T, int VB>
KILN_TILE_INLINE void forwardRange(const Problem<T>& pr, const std::vector<PackedKeys<T>>& keys, T* out,
                                   int64_t begin, int64_t end) {
  const int64_t blocks = (pr.call->lq + kBlockRows - 1) / kBlockRows;
  for (int64_t t = begin; t < end; ++t) forwardBlock<T, VB>(pr, keys[static_cast<size_t>(t / blocks)], out, t / blocks, t % blocks);
}

/// The backward of batch index b: Note [Flash attention on the CPU].
template <typename T, int VB>
KILN_TILE_INLINE void backwardBatch(const Problem<T>& pr, T* dq, T* dk, T* dv, int64_t b) {
  const AttentionCall& c = *pr.call;
  const T inf = std::numeric_limits<T>::infinity();
  const int64_t lqPad = padded(c.lq, kBlockRows), ePad = padded(c.e), evPad = padded(c.ev);
  const T scale = static_cast<T>(c.scale);
  // The whole head's q, dO and dQ, packed; then the key block's k, kᵀ, vᵀ,
  // dK and dV, and the block products.
  const int64_t block = kBlockRows * kBlockCols;
  attention_tiles::Scratch<T>& scratch = attention_tiles::Scratch<T>::local();
  scratch.reset(lqPad * (2 * ePad + evPad) + kBlockCols * (2 * ePad + evPad) + (c.e + c.ev) * kBlockCols +
                4 * block + 2 * c.lq);
  T* q = scratch.take(lqPad * ePad, T(0));
  T* dO = scratch.take(lqPad * evPad, T(0));
  T* dQ = scratch.take(lqPad * ePad, T(0));
  T* kb = scratch.take(kBlockCols * ePad, T(0));
  T* kt = scratch.take(c.e * kBlockCols, T(0));
  T* vt = scratch.take(c.ev * kBlockCols, T(0));
  T* dK = scratch.take(kBlockCols * ePad, T(0));
  T* dV = scratch.take(kBlockCols * evPad, T(0));
  T* s = scratch.take(block, T(0));   // scores, then P
  T* pd = scratch.take(block, T(0));  // P̃, the dropped weights
  T* dP = scratch.take(block, T(0));  // dP̃, then dS·scale
  T* z = scratch.take(block, T(1));   // dropout's factors
  T* m = scratch.take(c.lq, -inf);
  T* lse = scratch.take(c.lq, T(0));
  attention_tiles::Scratch<double, 1>& sums = attention_tiles::Scratch<double, 1>::local();
  sums.reset(2 * c.lq);
  double* l = sums.take(c.lq, 0.0);
  double* d = sums.take(c.lq, 0.0);
  packRows(pr.q, b, 0, c.lq, c.e, q, ePad);
  packRows(pr.dout, b, 0, c.lq, c.ev, dO, evPad);
  for (int64_t i = 0; i < c.lq; ++i)
    for (int64_t e = 0; e < c.ev; ++e)
      d[i] += static_cast<double>(pr.dout.at(b, i, e)) * static_cast<double>(pr.out.at(b, i, e));
  auto packKeyBlock = [&](int64_t j0, int64_t cols) {
    std::fill(kt, kt + c.e * kBlockCols, T(0));
    packColumns(pr.k, b, j0, cols, c.e, kt, padded(cols));
  };
  // 1. Each row's log-sum-exp, key block by key block.
  for (int64_t j0 = 0; j0 < c.lk; j0 += kBlockCols) {
    const int64_t cols = std::min(kBlockCols, c.lk - j0), colsPad = padded(cols);
    packKeyBlock(j0, cols);
    for (int64_t i0 = c.causal ? j0 / kBlockRows * kBlockRows : 0; i0 < c.lq; i0 += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, c.lq - i0);
      scores<T, VB>(pr, b, q + i0 * ePad, ePad, kt, colsPad, i0, rows, j0, cols, s);
      for (int64_t i = 0; i < rows; ++i) {
        T* row = s + i * kBlockCols;
        const T mNew = std::max(m[i0 + i], attention_tiles::rowMax<T, VB>(row, colsPad));
        if (mNew == -inf) continue;
        for (int64_t j = 0; j < colsPad; ++j) row[j] -= mNew;
        attention_tiles::expRow<T, VB>(row, colsPad);
        l[i0 + i] = l[i0 + i] * std::exp(static_cast<double>(m[i0 + i] - mNew)) +
                    attention_tiles::rowSum<T, VB>(row, colsPad);
        m[i0 + i] = mNew;
      }
    }
  }
  for (int64_t i = 0; i < c.lq; ++i) lse[i] = static_cast<T>(static_cast<double>(m[i]) + std::log(l[i]));
  // 2. Each key block's dK and dV, and its part of dQ.
  for (int64_t j0 = 0; j0 < c.lk; j0 += kBlockCols) {
    const int64_t cols = std::min(kBlockCols, c.lk - j0), colsPad = padded(cols);
    packKeyBlock(j0, cols);
    std::fill(kb, kb + kBlockCols * ePad, T(0));
    packRows(pr.k, b, j0, cols, c.e, kb, ePad);
    std::fill(vt, vt + c.ev * kBlockCols, T(0));
    packColumns(pr.v, b, j0, cols, c.ev, vt, colsPad);
    std::fill(dK, dK + kBlockCols * ePad, T(0));
    std::fill(dV, dV + kBlockCols * evPad, T(0));
    for (int64_t i0 = c.causal ? j0 / kBlockRows * kBlockRows : 0; i0 < c.lq; i0 += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, c.lq - i0), rows4 = padded(rows, kRowStep);
      scores<T, VB>(pr, b, q + i0 * ePad, ePad, kt, colsPad, i0, rows, j0, cols, s);
      // s becomes P, pd the dropped weights P̃ (P itself without dropout).
      T* dropped = pr.dropout ? pd : s;
      for (int64_t i = 0; i < rows4; ++i) {
        T* row = s + i * kBlockCols;
        if (i >= rows) {
          std::fill(row, row + colsPad, T(0));
          std::fill(dropped + i * kBlockCols, dropped + i * kBlockCols + colsPad, T(0));
          continue;
        }
        const T rowLse = lse[i0 + i];
        for (int64_t j = 0; j < colsPad; ++j) row[j] -= rowLse;
        attention_tiles::expRow<T, VB>(row, colsPad);
        if (pr.dropout) {
          T* zi = z + i * kBlockCols;
          pr.dropFactors(b, i0 + i, j0, cols, zi);
          for (int64_t j = 0; j < colsPad; ++j) pd[i * kBlockCols + j] = row[j] * zi[j];
        }
      }
      // dV += P̃ᵀ·dO, dP̃ = dO·vᵀ.
      gemmTile<T, VB, true>(dropped, kBlockCols, dO + i0 * evPad, evPad, dV, evPad, colsPad, evPad, rows);
      std::fill(dP, dP + rows4 * kBlockCols, T(0));
      gemmTile<T, VB>(dO + i0 * evPad, evPad, vt, colsPad, dP, kBlockCols, rows4, colsPad, c.ev);
      // dP becomes dS·scale = P ∘ (dP̃ ∘ Z - D)·scale.
      for (int64_t i = 0; i < rows4; ++i) {
        const T di = i < rows ? static_cast<T>(d[i0 + i]) : T(0);
        const T* p = s + i * kBlockCols;
        T* ds = dP + i * kBlockCols;
        if (pr.dropout) {
          const T* zi = z + i * kBlockCols;
          for (int64_t j = 0; j < colsPad; ++j) ds[j] = p[j] == T(0) ? T(0) : p[j] * (ds[j] * zi[j] - di) * scale;
        } else {
          for (int64_t j = 0; j < colsPad; ++j) ds[j] = p[j] == T(0) ? T(0) : p[j] * (ds[j] - di) * scale;
        }
      }
      // dQ += dS·k·scale, dK += dSᵀ·q·scale.
      gemmTile<T, VB>(dP, kBlockCols, kb, ePad, dQ + i0 * ePad, ePad, rows4, ePad, cols);
      gemmTile<T, VB, true>(dP, kBlockCols, q + i0 * ePad, ePad, dK, ePad, colsPad, ePad, rows);
    }
    for (int64_t j = 0; j < cols; ++j) {
      for (int64_t e = 0; e < c.e; ++e) dk[(b * c.lk + j0 + j) * c.e + e] = dK[j * ePad + e];
      for (int64_t e = 0; e < c.ev; ++e) dv[(b * c.lk + j0 + j) * c.ev + e] = dV[j * evPad + e];
    }
  }
  for (int64_t i = 0; i < c.lq; ++i)
    for (int64_t e = 0; e < c.e; ++e) dq[(b * c.lq + i) * c.e + e] = dQ[i * ePad + e];
}

template <typename T, int VB>
KILN_TILE_INLINE void backwardRange(const Problem<T>& pr, T* grads, int64_t begin, int64_t end) {
  const AttentionCall& c = *pr.call;
  T* dq = grads;
  T* dk = dq + pr.batches * c.lq * c.e;
  T* dv = dk + pr.batches * c.lk * c.e;
  for (int64_t b = begin; b < end; ++b) backwardBatch<T, VB>(pr, dq, dk, dv, b);
}

// The block functions once per x86 level, each with the vector width of its
// level (Note [Flash attention on the CPU]); `isa` picks one at run time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define KILN_X86_LEVELS 1
#define KILN_TARGET(level) __attribute__((target("arch=" level)))
#else
#define KILN_TARGET(level)
#endif

template <typename T>
using ForwardFn = void (*)(const Problem<T>&, const std::vector<PackedKeys<T>>&, T*, int64_t, int64_t);
template <typename T>
using BackwardFn = void (*)(const Problem<T>&, T*, int64_t, int64_t);

#define KILN_ATTENTION_LEVEL(suffix, level, VB)                                                                     \
  template <typename T>                                                                                            \
  KILN_TARGET(level)                                                                                               \
  void forward##suffix(const Problem<T>& pr, const std::vector<PackedKeys<T>>& keys, T* out, int64_t begin,        \
                       int64_t end) {                                                                              \
    forwardRange<T, VB>(pr, keys, out, begin, end);                                                                \
  }                                                                                                                \
  template <typename T>                                                                                            \
  KILN_TARGET(level) void backward##suffix(const Problem<T>& pr, T* grads, int64_t begin, int64_t end) {           \
    backwardRange<T, VB>(pr, grads, begin, end);                                                                   \
  }
KILN_ATTENTION_LEVEL(V4, "x86-64-v4", 64)
KILN_ATTENTION_LEVEL(V3, "x86-64-v3", 32)
KILN_ATTENTION_LEVEL(Base, "x86-64", 16)
#undef KILN_ATTENTION_LEVEL

/// The x86 level the block functions run at: 4 (AVX-512), 3 (AVX2) or the baseline.
int isaLevel() {
#ifdef KILN_X86_LEVELS
  static const int level = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v4") ? 4 : __builtin_cpu_supports("x86-64-v3") ? 3 : 1;
  }();
  return level;
#else
  return 1;
#endif
}

template <typename T>
ForwardFn<T> forwardFn() {
  const int level = isaLevel();
  return level == 4 ? &forwardV4<T> : level == 3 ? &forwardV3<T> : &forwardBase<T>;
}
template <typename T>
BackwardFn<T> backwardFn() {
  const int level = isaLevel();
  return level == 4 ? &backwardV4<T> : level == 3 ? &backwardV3<T> : &backwardBase<T>;
}

template <typename T>
void runForward(const AttentionCall& c, std::span<void* const> buffers) {
  const Problem<T> pr = problem<T>(c, buffers, false);
  T* out = static_cast<T*>(buffers.back());
  if (pr.batches == 0 || c.lq == 0 || c.ev == 0) return;
  ThreadPool& pool = ThreadPool::instance();
  // Kept by the calling thread from call to call (Scratch's reason); the
  // workers reach it through `keys` (a thread_local named in the lambdas
  // would be each worker's own).
  thread_local std::vector<PackedKeys<T>> kept;
  if (static_cast<int64_t>(kept.size()) < pr.batches) kept.resize(static_cast<size_t>(pr.batches));
  std::vector<PackedKeys<T>>& keys = kept;
  pool.parallelFor(pr.batches, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) packKeys(pr, b, keys[static_cast<size_t>(b)]);
  });
  const int64_t blocks = (c.lq + kBlockRows - 1) / kBlockRows;
  const ForwardFn<T> fn = forwardFn<T>();
  pool.parallelFor(pr.batches * blocks, 1, [&](int64_t begin, int64_t end) { fn(pr, keys, out, begin, end); });
}

template <typename T>
void runBackward(const AttentionCall& c, std::span<void* const> buffers) {
  const Problem<T> pr = problem<T>(c, buffers, true);
  T* grads = static_cast<T*>(buffers.back());
  if (pr.batches == 0) return;
  if (c.lq == 0 || c.lk == 0) {  // no weights: every gradient is 0
    std::fill(grads, grads + pr.batches * (c.lq * c.e + c.lk * (c.e + c.ev)), T(0));
    return;
  }
  const BackwardFn<T> fn = backwardFn<T>();
  ThreadPool::instance().parallelFor(pr.batches, 1, [&](int64_t begin, int64_t end) { fn(pr, grads, begin, end); });
}
}  // namespace

void attention(std::span<void* const> buffers, std::span<const int64_t> args) {
  const AttentionCall c = AttentionCall::decode(args);
  if (c.dtype == DType::f32) return runForward<float>(c, buffers);
  KILN_ASSERT(c.dtype == DType::f64, "attention of {}", dtypeName(c.dtype));
  runForward<double>(c, buffers);
}

void attentionBackward(std::span<void* const> buffers, std::span<const int64_t> args) {
  const AttentionCall c = AttentionCall::decode(args);
  if (c.dtype == DType::f32) return runBackward<float>(c, buffers);
  KILN_ASSERT(c.dtype == DType::f64, "attention_backward of {}", dtypeName(c.dtype));
  runBackward<double>(c, buffers);
}

}  // namespace kiln::runtime

// The scalar formulas of random ops (dropout, rand, randn), written once for
// every builder of ir/scalar_formulas.h: Philox4x32-10 spelled in the
// builder's integer operations, so that the LLVM renderer, the CUDA renderer
// and the C++ evaluator draw the same bits as runtime::philox4x32_10
// (DESIGN.md §8), and randn's Box-Muller from kiln's own log, sqrt and cos
// (ir/scalar_formulas_f64.h), never the host's libm.
//
// Note [Philox words in i64]
// The builders have no unsigned 32-bit type and no 32x32->64 multiply, so a
// 32-bit Philox word is held in an i64 value, zero-extended (in [0, 2^32)).
// The product of two such words is below 2^64, so the wrapping i64 multiply
// gives its exact bits; `lshr 32` is its high word and `band 0xffffffff` its
// low word; xor of two zero-extended words stays zero-extended. The X86
// backend sees that the upper halves are zero and multiplies with vpmuludq,
// so the loop still vectorizes (checked with `irdump --emit=llvm-opt`).
//
// Note [Dropout draws]
// Element i (the row-major index in dropout's result) of a dropout with
// 64-bit seed s and offset o draws one 32-bit word of a Philox block that
// it shares with the three other elements of its group of four, i / 4:
//
//   r = philox4x32_10(counter = {lo(i / 4), hi(i / 4), lo(o), hi(o)}, key = {lo(s), hi(s)})
//   bits = r[i % 4]
//
// as PyTorch's CUDA dropout uses the four words of one curand_uniform4 call
// for four elements. So a kernel that draws for four consecutive elements
// (i % 4 = 0, 1, 2, 3) runs Philox once for them, not four times (the CPU
// renderers draw a whole run of a row by groups before its elements, Note
// [Draws by groups of four] in codegen/llvm_draws.h); an element alone
// (a strided index space, a head or tail of a run) computes its group's
// block and picks its word, which gives the same bits. A draw of n
// elements uses the counters {0 .. ceil(n / 4) - 1} x {o} and advances the
// generator's offset by one, whatever n is, so draws never share a counter
// (rand and randn draw one block per element from counters {i, o} instead,
// Note [Random fills]). The element is kept when uniformFromBits(bits) > p,
// i.e. ((bits >> 8) + 1) / 2^24 > p, exactly: (bits >> 8) >=
// floor(p * 2^24). So an element is kept with probability
// 1 - floor(p * 2^24) / 2^24 (1 - p up to 2^-24): p = 0 keeps every element
// and p = 1 none. A kept element is x * (1 / (1 - p)), the scale rounded
// once to x's compute dtype (as PyTorch multiplies by a precomputed scale);
// a dropped one is +0, whatever x is (NaN included). Backward is the same
// dropout of the gradient: the mask is recomputed from (seed, offset, p),
// never stored.
//
// Note [Random fills]
// Element i (row-major) of rand or randn with seed s and offset o takes the
// Philox block of its own counter,
//
//   r = philox4x32_10(counter = {lo(i), hi(i), lo(o), hi(o)}, key = {lo(s), hi(s)})
//
// (one generator advance per fill, as dropout), and as many of its words'
// top bits as its dtype holds, so that every value is exact in the dtype:
// - rand: f32 (r[0] >> 8) 2^-24, f16 (r[0] >> 21) 2^-11, bf16 (r[0] >> 24)
//   2^-8, all in [0, 1) (f16 and bf16 are f32's value truncated, never
//   rounded up to 1); f64 m 2^-53 with m the top 53 bits of r[0]:r[1].
// - randn: Box-Muller, sqrt(-2 log(u1)) cos(2 pi u2), in f64 for every
//   dtype with kiln's log64, sqrt and the cos of sinCos64, then rounded
//   once to the dtype (f16 and bf16 through f32). u1 and u2 are in (0, 1],
//   so log(u1) is finite: for f32, f16 and bf16 u1 = ((r[0] >> 8) + 1)
//   2^-24 and u2 likewise from r[1] (what runtime::uniformFromBits gives;
//   the samples reach 5.77 sigma); for f64 u1 = (top 53 bits of r[0]:r[1] +
//   1) 2^-53 and u2 from r[2]:r[3] (8.57 sigma). So randn in f32 is, but for
//   a last-bit rounding where log64 or cos differs from the exact value,
//   the f32 rounding of the exact Box-Muller of those u1, u2.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "ir/scalar_formulas_f64.h"
#include "runtime/dtype.h"

namespace kiln::ir::formulas {

/// floor(p * 2^24): dropout keeps an element when the top 24 bits of its
/// draw are at least this (Note [Dropout draws]). p in [0, 1].
inline int64_t dropoutThreshold(double p) { return static_cast<int64_t>(std::floor(p * 16777216.0)); }

/// The factor kept elements are multiplied by, 1 / (1 - p) in f64 (inf when
/// p = 1, when no element is kept), before rounding to the compute dtype.
inline double dropoutScale(double p) { return 1.0 / (1.0 - p); }

/// Philox4x32-10 of `c` under `k`, every word an i64 value holding a 32-bit
/// word zero-extended (Note [Philox words in i64]): the same rounds and
/// constants as runtime::philox4x32_10. Only the first `words` (1 to 4)
/// words of the result are computed, and only what they depend on: the
/// others are default values that must not be read. A renderer then emits
/// no value its kernel never uses (a C compiler warns about each).
template <class B>
std::array<typename B::V, 4> philox4x32_10(B& b, std::array<typename B::V, 4> c, std::array<typename B::V, 2> k,
                                           int words = 4) {
  using V = typename B::V;
  // What each round must compute, found backwards from the words asked
  // for: a round's words 0 and 1 read p1 (its word 2), word 0 also its word
  // 1 and key 0; words 2 and 3 read p0 (its word 0), word 2 also its word 3
  // and key 1. Keys advance up to the last round that reads them.
  std::array<std::array<bool, 4>, 11> live{};
  for (int w = 0; w < words; ++w) live[10][w] = true;
  std::array<int, 2> lastKeyRound = {-1, -1};
  for (int round = 9; round >= 0; --round) {
    const std::array<bool, 4>& out = live[round + 1];
    std::array<bool, 4>& in = live[round];
    in[2] = out[0] || out[1];
    in[1] = out[0];
    in[0] = out[2] || out[3];
    in[3] = out[2];
    if (out[0]) lastKeyRound[0] = std::max(lastKeyRound[0], round);
    if (out[2]) lastKeyRound[1] = std::max(lastKeyRound[1], round);
  }
  const V mask = b.constant(4294967295.0, DType::i64);
  const V mul0 = b.constant(static_cast<double>(0xD2511F53u), DType::i64);
  const V mul1 = b.constant(static_cast<double>(0xCD9E8D57u), DType::i64);
  const V weyl0 = b.constant(static_cast<double>(0x9E3779B9u), DType::i64);
  const V weyl1 = b.constant(static_cast<double>(0xBB67AE85u), DType::i64);
  for (int round = 0; round < 10; ++round) {
    const std::array<bool, 4>& out = live[round + 1];
    const V p0 = out[2] || out[3] ? b.mul(mul0, c[0]) : V{};
    const V p1 = out[0] || out[1] ? b.mul(mul1, c[2]) : V{};
    c = {out[0] ? b.bxor(b.bxor(b.lshr(p1, 32), c[1]), k[0]) : V{}, out[1] ? b.band(p1, mask) : V{},
         out[2] ? b.bxor(b.bxor(b.lshr(p0, 32), c[3]), k[1]) : V{}, out[3] ? b.band(p0, mask) : V{}};
    k = {round < lastKeyRound[0] ? b.band(b.add(k[0], weyl0), mask) : V{},
         round < lastKeyRound[1] ? b.band(b.add(k[1], weyl1), mask) : V{}};
  }
  return c;
}

/// The Philox block of counter {lo(n), hi(n), lo(offset), hi(offset)}
/// under key {lo(seed), hi(seed)}: its first `words` words (philox4x32_10),
/// each an i64 value holding 32 bits; all three operands are i64.
template <class B>
std::array<typename B::V, 4> philoxBlock(B& b, typename B::V seed, typename B::V offset, typename B::V n,
                                         int words = 4) {
  const typename B::V mask = b.constant(4294967295.0, DType::i64);
  auto lo = [&](typename B::V v) { return b.band(v, mask); };
  auto hi = [&](typename B::V v) { return b.lshr(v, 32); };
  return philox4x32_10(b, {lo(n), hi(n), lo(offset), hi(offset)}, {lo(seed), hi(seed)}, words);
}

/// The Philox block of group `group` (elements 4 * group .. 4 * group + 3)
/// of the draw named by (`seed`, `offset`) (Note [Dropout draws]).
template <class B>
std::array<typename B::V, 4> dropoutBlock(B& b, typename B::V seed, typename B::V offset, typename B::V group) {
  return philoxBlock(b, seed, offset, group);
}

/// The bits element `index` draws (Note [Dropout draws]): word index % 4 of
/// its group's block; all three operands are i64 values.
template <class B>
typename B::V dropoutBits(B& b, typename B::V seed, typename B::V offset, typename B::V index) {
  const std::array<typename B::V, 4> r = dropoutBlock(b, seed, offset, b.lshr(index, 2));
  const typename B::V lane = b.band(index, b.constant(3.0, DType::i64));
  auto is = [&](double w) { return b.eq(lane, b.constant(w, DType::i64)); };
  return b.select(is(0.0), r[0], b.select(is(1.0), r[1], b.select(is(2.0), r[2], r[3])));
}

/// dropout of `x` (a value of compute dtype b.dtype) whose element drew
/// `bits` (an i64 holding 32 bits), with attribute `p`; not yet rounded to
/// x's dtype.
template <class B>
typename B::V dropoutOfBits(B& b, typename B::V x, typename B::V bits, double p) {
  const auto keep = b.ge(b.lshr(bits, 8), b.constant(static_cast<double>(dropoutThreshold(p)), DType::i64));
  return b.select(keep, b.mul(x, b.c(dropoutScale(p))), b.c(0.0));
}

/// dropout of `x` (a value of compute dtype b.dtype) at element `index`,
/// with attribute `p` (Note [Dropout draws]); not yet rounded to x's dtype.
template <class B>
typename B::V dropout(B& b, typename B::V x, typename B::V seed, typename B::V offset, typename B::V index, double p) {
  return dropoutOfBits(b, x, dropoutBits(b, seed, offset, index), p);
}

/// The top 53 bits of the 64-bit word hi:lo (two zero-extended 32-bit
/// words in i64 values), as an i64 value.
template <class B>
typename B::V top53(B& b, typename B::V hi, typename B::V lo) {
  return b.bor(b.shl(hi, 21), b.lshr(lo, 11));
}

/// Element `index` of rand with `seed` and `offset` (i64 values) in
/// `dtype` (Note [Random fills]): a value of compute dtype
/// computeDType(dtype), exact in `dtype`.
template <class B>
typename B::V randElement(B& b, typename B::V seed, typename B::V offset, typename B::V index, DType dtype) {
  const std::array<typename B::V, 4> r = philoxBlock(b, seed, offset, index, dtype == DType::f64 ? 2 : 1);
  if (dtype == DType::f64) return b.mul(b.convert(top53(b, r[0], r[1]), DType::f64), b.constant(0x1p-53, DType::f64));
  const int digits = dtype == DType::f16 ? 11 : dtype == DType::bf16 ? 8 : 24;
  return b.mul(b.convert(b.lshr(r[0], 32 - digits), DType::f32), b.constant(std::ldexp(1.0, -digits), DType::f32));
}

/// Element `index` of randn with `seed` and `offset` (i64 values) in
/// `dtype` (Note [Random fills]): sqrt(-2 log(u1)) cos(2 pi u2) in f64, as
/// a value of compute dtype computeDType(dtype), not yet rounded to f16/bf16.
template <class B>
typename B::V randnElement(B& b, typename B::V seed, typename B::V offset, typename B::V index, DType dtype) {
  using V = typename B::V;
  const bool f64 = dtype == DType::f64;
  const std::array<V, 4> r = philoxBlock(b, seed, offset, index, f64 ? 4 : 2);
  const V one = b.constant(1.0, DType::i64);
  // (bits + 1) 2^-bits in (0, 1]: bits + 1 <= 2^53 converts exactly.
  auto uniform = [&](V bits, double scale) {
    return b.mul(b.convert(b.add(bits, one), DType::f64), b.constant(scale, DType::f64));
  };
  const V u1 = f64 ? uniform(top53(b, r[0], r[1]), 0x1p-53) : uniform(b.lshr(r[0], 8), 0x1p-24);
  const V u2 = f64 ? uniform(top53(b, r[2], r[3]), 0x1p-53) : uniform(b.lshr(r[1], 8), 0x1p-24);
  const DType saved = b.dtype;
  b.dtype = DType::f64;  // b.c makes f64 constants in the formulas below
  const V radius = b.sqrt(b.mul(b.c(-2.0), log64(b, u1)));
  const V z = b.mul(radius, sinCos64(b, b.mul(b.c(6.283185307179586), u2), true));
  b.dtype = saved;
  return f64 ? z : b.convert(z, DType::f32);
}

}  // namespace kiln::ir::formulas

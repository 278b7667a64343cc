// The scalar formulas of random ops (dropout), written once for every
// builder of ir/scalar_formulas.h: Philox4x32-10 spelled in the builder's
// integer operations, so that the LLVM renderer, the CUDA renderer and the
// C++ evaluator draw the same bits as runtime::philox4x32_10 (DESIGN.md §8).
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
// (randn draws one block per element from counters {i, o} instead,
// frontend/tensor.h). The element is kept when uniformFromBits(bits) > p,
// i.e. ((bits >> 8) + 1) / 2^24 > p, exactly: (bits >> 8) >=
// floor(p * 2^24). So an element is kept with probability
// 1 - floor(p * 2^24) / 2^24 (1 - p up to 2^-24): p = 0 keeps every element
// and p = 1 none. A kept element is x * (1 / (1 - p)), the scale rounded
// once to x's compute dtype (as PyTorch multiplies by a precomputed scale);
// a dropped one is +0, whatever x is (NaN included). Backward is the same
// dropout of the gradient: the mask is recomputed from (seed, offset, p),
// never stored.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

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
/// constants as runtime::philox4x32_10.
template <class B>
std::array<typename B::V, 4> philox4x32_10(B& b, std::array<typename B::V, 4> c, std::array<typename B::V, 2> k) {
  using V = typename B::V;
  const V mask = b.constant(4294967295.0, DType::i64);
  const V mul0 = b.constant(static_cast<double>(0xD2511F53u), DType::i64);
  const V mul1 = b.constant(static_cast<double>(0xCD9E8D57u), DType::i64);
  const V weyl0 = b.constant(static_cast<double>(0x9E3779B9u), DType::i64);
  const V weyl1 = b.constant(static_cast<double>(0xBB67AE85u), DType::i64);
  for (int round = 0; round < 10; ++round) {
    const V p0 = b.mul(mul0, c[0]);
    const V p1 = b.mul(mul1, c[2]);
    c = {b.bxor(b.bxor(b.lshr(p1, 32), c[1]), k[0]), b.band(p1, mask), b.bxor(b.bxor(b.lshr(p0, 32), c[3]), k[1]),
         b.band(p0, mask)};
    if (round == 9) break;  // the last keys are never used
    k = {b.band(b.add(k[0], weyl0), mask), b.band(b.add(k[1], weyl1), mask)};
  }
  return c;
}

/// The Philox block of group `group` (elements 4 * group .. 4 * group + 3)
/// of the draw named by (`seed`, `offset`): four words, each an i64 value
/// holding 32 bits (Note [Dropout draws]); all three operands are i64.
template <class B>
std::array<typename B::V, 4> dropoutBlock(B& b, typename B::V seed, typename B::V offset, typename B::V group) {
  const typename B::V mask = b.constant(4294967295.0, DType::i64);
  auto lo = [&](typename B::V v) { return b.band(v, mask); };
  auto hi = [&](typename B::V v) { return b.lshr(v, 32); };
  return philox4x32_10(b, {lo(group), hi(group), lo(offset), hi(offset)}, {lo(seed), hi(seed)});
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

}  // namespace kiln::ir::formulas

// The small tiles inside fused attention (runtime/attention.cpp): the one
// place kiln writes a GEMM loop (DESIGN.md §2; Note [Flash attention on the
// CPU] says why), and the row operations of the online softmax (exp, max,
// sum). Header-only and always inlined, written with GCC vector types of VB
// bytes, so that the block functions compiled for each x86 level (64 bytes:
// AVX-512, 32: AVX2, 16: the SSE2 baseline) keep their tiles in that
// level's registers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/error.h"

#if defined(__GNUC__)
#define KILN_TILE_INLINE inline __attribute__((always_inline))
#else
#define KILN_TILE_INLINE inline
#endif

namespace kiln::runtime::attention_tiles {

/// Column counts of the tiles' right-hand sides are padded to this.
constexpr int64_t kPad = 64;
/// Row counts of the tiles' left-hand sides are padded to this.
constexpr int64_t kRowStep = 8;

inline int64_t padded(int64_t n, int64_t to = kPad) { return (n + to - 1) / to * to; }

/// A vector of VB bytes of T, and of as many int32 or int64 lanes (GCC's
/// vector_size cannot take a template parameter, hence one line each).
template <typename T, int VB>
struct Simd;
#define KILN_SIMD(T, I, VB)                                          \
  template <>                                                        \
  struct Simd<T, VB> {                                               \
    typedef T V __attribute__((vector_size(VB)));                    \
    typedef I Int __attribute__((vector_size(VB)));                  \
    static constexpr int64_t kLanes = VB / static_cast<int>(sizeof(T)); \
  };
KILN_SIMD(float, int32_t, 16)
KILN_SIMD(float, int32_t, 32)
KILN_SIMD(float, int32_t, 64)
KILN_SIMD(double, int64_t, 16)
KILN_SIMD(double, int64_t, 32)
KILN_SIMD(double, int64_t, 64)
#undef KILN_SIMD

// Unaligned loads and stores; vectors go by reference, never by value
// (which would make the function's ABI depend on the ISA: -Wpsabi).
template <typename V>
KILN_TILE_INLINE void load(V& v, const void* p) {
  std::memcpy(&v, p, sizeof(V));
}
template <typename V>
KILN_TILE_INLINE void store(void* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

/// c[m × n] += a[m × k] · b[k × n], all row-major with leading dims lda, ldb,
/// ldc (elements); m a multiple of kRowStep, n of kPad. With kTransA, a is
/// stored transposed: element (i, p) at a[p·lda + i]. Each step keeps an
/// R × 4-vector block of c in registers and adds k rank-1 products into it:
/// four vectors of a row of b loaded, R elements of a broadcast. R = 4 with
/// AVX-512's 32 registers (16 accumulators: 16 FMAs for 8 loads, so the FMA
/// units, not the loads, set the pace), 2 with 16 registers.
template <typename T, int VB, bool kTransA = false>
KILN_TILE_INLINE void gemmTile(const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, int64_t m,
                               int64_t n, int64_t k) {
  using V = typename Simd<T, VB>::V;
  constexpr int64_t kLanes = Simd<T, VB>::kLanes, kVectors = 4, kStep = kVectors * kLanes;
  constexpr int64_t R = VB == 64 ? 4 : 2;
  static_assert(kRowStep % R == 0 && kPad % kStep == 0);
  for (int64_t i = 0; i < m; i += R) {
    for (int64_t j = 0; j < n; j += kStep) {
      V acc[R][kVectors];
#pragma GCC unroll 8
      for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int64_t u = 0; u < kVectors; ++u) load(acc[r][u], c + (i + r) * ldc + j + u * kLanes);
      for (int64_t p = 0; p < k; ++p) {
        V bv[kVectors];
#pragma GCC unroll 8
        for (int64_t u = 0; u < kVectors; ++u) load(bv[u], b + p * ldb + j + u * kLanes);
#pragma GCC unroll 8
        for (int64_t r = 0; r < R; ++r) {
          const T av = kTransA ? a[p * lda + i + r] : a[(i + r) * lda + p];
#pragma GCC unroll 8
          for (int64_t u = 0; u < kVectors; ++u) acc[r][u] += av * bv[u];
        }
      }
#pragma GCC unroll 8
      for (int64_t r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int64_t u = 0; u < kVectors; ++u) store(c + (i + r) * ldc + j + u * kLanes, acc[r][u]);
    }
  }
}

/// Per-thread scratch memory, kept from call to call so that the blocks
/// neither allocate nor fault pages in each time: reset() to a size, then
/// take() hands out filled pieces of it. Tag tells two scratches of one T
/// apart (the f64 row sums of an f64 attention).
template <typename T, int Tag = 0>
class Scratch {
 public:
  static Scratch& local() {
    thread_local Scratch scratch;
    return scratch;
  }
  void reset(int64_t total) {
    if (static_cast<int64_t>(data_.size()) < total) data_.resize(static_cast<size_t>(total));
    used_ = 0;
  }
  T* take(int64_t n, T fill) {
    KILN_ASSERT(used_ + n <= static_cast<int64_t>(data_.size()), "attention scratch: {} + {} of {}", used_, n,
                data_.size());
    T* p = data_.data() + used_;
    used_ += n;
    std::fill(p, p + n, fill);
    return p;
  }

 private:
  std::vector<T> data_;
  int64_t used_ = 0;
};

/// x[j] = exp(x[j]) for j < n (a multiple of kPad): -inf (an excluded key)
/// gives +0 exactly, NaN stays NaN. f32: Cephes' expf polynomial (within 2
/// ulp), lane by lane; f64: the C library's exp.
template <typename T, int VB>
KILN_TILE_INLINE void expRow(T* x, int64_t n) {
  if constexpr (sizeof(T) == 8) {
    for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j]);
  } else {
    using S = Simd<float, VB>;
    using V = typename S::V;
    using I = typename S::Int;
    for (int64_t j = 0; j < n; j += S::kLanes) {
      V v;
      load(v, x + j);
      V c = v < -87.0f ? V{} - 87.0f : v;
      c = c > 88.0f ? V{} + 88.0f : c;
      const V t = c * 1.44269504088896341f;
      const I k = __builtin_convertvector(t + (t >= 0.0f ? V{} + 0.5f : V{} - 0.5f), I);  // round to nearest
      const V fk = __builtin_convertvector(k, V);
      const V r = (c - fk * 0.693359375f) - fk * -2.12194440e-4f;
      V y = V{} + 1.9875691500e-4f;
      y = y * r + 1.3981999507e-3f;
      y = y * r + 8.3334519073e-3f;
      y = y * r + 4.1665795894e-2f;
      y = y * r + 1.6666665459e-1f;
      y = y * r + 5.0000001201e-1f;
      y = y * r * r + r + 1.0f;
      const V scaled = y * (V)((k + 127) << 23);  // 2^k: a vector cast reinterprets the bits
      V out = v > 88.0f ? V{} + std::numeric_limits<float>::infinity() : scaled;
      out = v < -87.0f ? V{} : out;
      out = v != v ? v : out;
      store(x + j, out);
    }
  }
}

/// max(x[j]) for j < n (a multiple of kPad), NaN ignored; -inf when empty.
template <typename T, int VB>
KILN_TILE_INLINE T rowMax(const T* x, int64_t n) {
  using S = Simd<T, VB>;
  using V = typename S::V;
  V m = V{} - std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; j += S::kLanes) {
    V v;
    load(v, x + j);
    m = v > m ? v : m;
  }
  T top = -std::numeric_limits<T>::infinity();
  for (int64_t u = 0; u < S::kLanes; ++u) top = m[u] > top ? m[u] : top;
  return top;
}

/// Σ x[j] for j < n (a multiple of kPad), by lanes, then the lanes in double.
template <typename T, int VB>
KILN_TILE_INLINE double rowSum(const T* x, int64_t n) {
  using S = Simd<T, VB>;
  using V = typename S::V;
  V lanes{};
  for (int64_t j = 0; j < n; j += S::kLanes) {
    V v;
    load(v, x + j);
    lanes += v;
  }
  double sum = 0;
  for (int64_t u = 0; u < S::kLanes; ++u) sum += static_cast<double>(lanes[u]);
  return sum;
}

}  // namespace kiln::runtime::attention_tiles

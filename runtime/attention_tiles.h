// The small tiles inside fused attention (runtime/attention.cpp): the one
// place kiln writes a GEMM loop (DESIGN.md §2; Note [Flash attention on the
// CPU] says why), and an exp over a row of scores. Header-only and always
// inlined, so that each ISA clone of attention.cpp's block functions
// (target_clones) compiles them for its own vector width.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__)
#define KILN_TILE_INLINE inline __attribute__((always_inline))
#else
#define KILN_TILE_INLINE inline
#endif

namespace kiln::runtime::attention_tiles {

/// Column counts of the tiles' right-hand sides are padded to this.
constexpr int64_t kPad = 32;
/// Rows of the left-hand side are taken this many at a time.
constexpr int64_t kRowStep = 4;

inline int64_t padded(int64_t n, int64_t to = kPad) { return (n + to - 1) / to * to; }

/// kPad elements of T as one GCC vector (split into the ISA's registers).
template <typename T>
struct Lanes;
template <>
struct Lanes<float> {
  typedef float type __attribute__((vector_size(kPad * sizeof(float))));
};
template <>
struct Lanes<double> {
  typedef double type __attribute__((vector_size(kPad * sizeof(double))));
};

/// c[m × n] += a[m × k] · b[k × n], all row-major with leading dims lda, ldb,
/// ldc (elements); m a multiple of kRowStep, n of kPad. Each step keeps a
/// 4 × 32 block of c in registers (8 AVX-512 registers for f32) and adds k
/// rank-1 products into it: one row of b loaded, four elements of a broadcast.
template <typename T>
KILN_TILE_INLINE void gemmTile(const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, int64_t m,
                               int64_t n, int64_t k) {
  using V = typename Lanes<T>::type;
  for (int64_t i = 0; i < m; i += kRowStep) {
    for (int64_t j = 0; j < n; j += kPad) {
      V acc[kRowStep];
      for (int64_t r = 0; r < kRowStep; ++r) std::memcpy(&acc[r], c + (i + r) * ldc + j, sizeof(V));
      for (int64_t p = 0; p < k; ++p) {
        V bv;
        std::memcpy(&bv, b + p * ldb + j, sizeof(V));
        for (int64_t r = 0; r < kRowStep; ++r) acc[r] += a[(i + r) * lda + p] * bv;
      }
      for (int64_t r = 0; r < kRowStep; ++r) std::memcpy(c + (i + r) * ldc + j, &acc[r], sizeof(V));
    }
  }
}

/// x[j] = exp(x[j]) for j < n: -inf (an excluded key) gives +0 exactly, NaN
/// stays NaN. f32: Cephes' expf polynomial (within 2 ulp), written without
/// branches so that it vectorizes; f64: the C library's exp.
template <typename T>
KILN_TILE_INLINE void expRow(T* x, int64_t n) {
  if constexpr (sizeof(T) == 8) {
    for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const float v = x[j];
      const float c = v < -87.0f ? -87.0f : (v > 88.0f ? 88.0f : v);
      const float t = c * 1.44269504088896341f;
      const auto k = static_cast<int32_t>(t + (t >= 0.0f ? 0.5f : -0.5f));  // round to nearest
      const float fk = static_cast<float>(k);
      const float r = (c - fk * 0.693359375f) - fk * -2.12194440e-4f;
      float y = 1.9875691500e-4f;
      y = y * r + 1.3981999507e-3f;
      y = y * r + 8.3334519073e-3f;
      y = y * r + 4.1665795894e-2f;
      y = y * r + 1.6666665459e-1f;
      y = y * r + 5.0000001201e-1f;
      y = y * r * r + r + 1.0f;
      const float scaled = y * std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
      x[j] = v != v ? v : (v < -87.0f ? 0.0f : (v > 88.0f ? v * 2.0f * scaled : scaled));
    }
  }
}

}  // namespace kiln::runtime::attention_tiles

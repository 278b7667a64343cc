// bf16 matrix products on oneDNN's matmul primitive (runtime/blas.cpp's
// native path for bf16; Note [Native bf16 products] in onednn_matmul.cpp).
// Internal to the runtime: blas.cpp calls it for each block it splits a
// product into.
#pragma once

#include <cstdint>

namespace kiln::runtime::detail {

/// Sets the calling thread's OpenMP team (oneDNN's threads) to `threads`.
/// kiln's pool already is the parallelism: each pool thread that calls
/// oneDNN asks for a team of one.
void ompThreadsForThisThread(int threads);

/// One bf16 product c[m, n] (rows ldc apart, contiguous rows) = a[m, k] ·
/// b[k, n], the operands read through their strides (in elements), with
/// f32 accumulation and one rounding per result. Returns false, having
/// written nothing, when the build has no oneDNN or oneDNN has only its
/// reference implementation for this layout on this CPU (the caller then
/// converts to f32). m, n, k > 0. `threads`: the OpenMP team oneDNN may use.
bool oneDnnBf16Matmul(const void* a, int64_t ars, int64_t acs, const void* b, int64_t brs, int64_t bcs, void* c,
                      int64_t ldc, int64_t m, int64_t n, int64_t k, int threads);

/// The implementation oneDNN picks for a bf16 product of this shape with
/// contiguous operands ("brg:avx512_core_bf16", "ref:any", ...), or "" in
/// a build without oneDNN: for kiln-env and the tests.
const char* oneDnnBf16Implementation(int64_t m, int64_t n, int64_t k);

}  // namespace kiln::runtime::detail

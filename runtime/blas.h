// Matrix products on the CPU through a BLAS (OpenBLAS's cblas_sgemm and
// cblas_dgemm; DESIGN.md §2: no hand-written GEMM for floats): the `matmul`
// library call of runtime/executable.h.
//
// One call computes out[b..., i, j] = Σ_k a[b..., i, k] · b[b..., k, j] for
// every batch index b... of the result; `out` is contiguous [batch..., M, N].
// The operands are read through their strides (in elements): a batch stride
// of 0 repeats an operand over that batch dim (broadcasting), and a matrix
// that is a transposed contiguous view (row stride 1) goes to BLAS with the
// transposed flag instead of being copied; any other matrix layout (a
// stride-0 or doubly strided matrix) is copied to a contiguous scratch first.
// When b is the same matrix for every batch and a's batch dims run on from
// its rows, the batch folds into one GEMM of M·batch rows (x·Wᵀ on a
// [B, T, D] input is one call).
//
// - f32 and f64 call sgemm and dgemm.
// - f16 and bf16 convert both operands to f32, call sgemm (f32
//   accumulation) and round each result once to f16/bf16, which is roughly
//   what PyTorch's CPU kernels do (they accumulate in f32 too); bf16 runs
//   on oneDNN's bf16 matmul instead where that is faster (HalfMatmul below).
// - i32 and i64 are a plain loop that wraps (two's complement), as PyTorch
//   computes integer matmuls on the CPU. bool is not a matmul dtype (the IR
//   rejects it).
//
// Threads (Note [BLAS threads]): by default OpenBLAS runs single-threaded
// and kiln's ThreadPool splits the work (batches, or row or column blocks of
// one product), so that the two never compete for cores;
// KILN_BLAS_THREADING=blas gives the cores to OpenBLAS's own threads instead
// (the pool then only splits the integer loops). kiln-bench's `matmul`
// workloads measured both (docs/benchmarks.md).
//
// Results are deterministic for given shapes, layouts and thread count, but
// a BLAS may round differently when the same product is asked with other
// flags or split otherwise (OpenBLAS picks special kernels for small
// products), so eager and compiled code agree bit for bit because they make
// the same call (Note [Eager equals compiled], docs/ops.md "Library calls").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace kiln::runtime {

/// The arguments of one matmul call. a is [batch..., M, K] and b is
/// [batch..., K, N] as seen through their strides; `batch` are the sizes of
/// the result's batch dims, each with a's and b's stride over it (0 where
/// that operand is broadcast).
struct MatmulCall {
  DType dtype = DType::f32;
  int64_t m = 0, n = 0, k = 0;
  std::vector<int64_t> batch;
  std::vector<int64_t> aBatchStrides, bBatchStrides;
  int64_t aRowStride = 0, aColStride = 0;  ///< of a's [M, K] matrices
  int64_t bRowStride = 0, bColStride = 0;  ///< of b's [K, N] matrices

  /// As the step's integer arguments, and back.
  std::vector<int64_t> encode() const;
  static MatmulCall decode(std::span<const int64_t> args);

  /// Drops batch dims of size 1, and folds the batch into the rows when b
  /// is one matrix for every batch and a's batch dims continue its rows
  /// (x·Wᵀ on a [B, T, D] input becomes one product of B·T rows). Every
  /// backend's matmul starts with it (CPU, OpenCL, CUDA).
  void simplifyBatch();
};

/// How a [rows, cols] matrix with these strides is passed to a row-major
/// BLAS without copying, if it can be: rows apart by ld >= cols with unit
/// columns (not transposed), or a transposed contiguous view (transposed).
/// Strides of size-1 dims do not matter.
struct BlasLayout {
  bool transposed = false;
  int64_t ld = 1;
};
std::optional<BlasLayout> blasLayout(int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride);

/// The library call (LibraryFn): buffers a, b, out; args MatmulCall::encode().
void matmul(std::span<void* const> buffers, std::span<const int64_t> args);

/// An elementwise CPU kernel (the CPU kernel ABI, runtime/device_interface.h)
/// over the elements of matmul's result: Note [Matmul epilogues].
struct HostEpilogue {
  void (*fn)(void* const* buffers, const int64_t* args, int64_t begin, int64_t end) = nullptr;
  std::span<void* const> buffers;
  std::span<const int64_t> args;
};

/// matmul, then `epilogue` over each block of the result as soon as the
/// block is computed, on the thread that computed it.
void matmulThen(std::span<void* const> buffers, std::span<const int64_t> args, const HostEpilogue& epilogue);

/// The LibraryFn of a CPU matmul step with an epilogue (call.epilogue):
/// buffers a, b, out, then the epilogue kernel's.
struct LibraryCall;
void matmulWithEpilogue(const LibraryCall& call);

/// Who runs a matmul's threads (Note [BLAS threads]).
enum class BlasThreading : uint8_t {
  pool,  ///< kiln's ThreadPool splits the work; OpenBLAS runs single-threaded
  blas,  ///< OpenBLAS's own threads, one per pool thread
};
/// The current choice: KILN_BLAS_THREADING (pool or blas) at start, pool by
/// default; setBlasThreading() changes it (kiln-bench and tests compare both).
BlasThreading blasThreading();
void setBlasThreading(BlasThreading threading);

/// The library behind f32 products (and f16/bf16 ones, which multiply in
/// f32): OpenBLAS's cblas_sgemm or oneDNN's dnnl_sgemm (Note [Choosing the
/// BLAS]). f64 products always call OpenBLAS's dgemm (oneDNN has none).
enum class BlasLibrary : uint8_t { openblas, onednn };
/// Whether this build has oneDNN (Debian libdnnl-dev at configure time).
bool haveOneDnn();
/// The current library: OpenBLAS until setBlasLibrary() (codegen's CPU
/// target sets the machine's choice before its first matmul:
/// codegen::cpuBlasChoice()).
BlasLibrary blasLibrary();
/// kiln::Error for oneDNN in a build without it. Not for the middle of a
/// computation: eager and compiled code agree because they call one library.
void setBlasLibrary(BlasLibrary library);
/// Milliseconds `library` takes for a fixed set of f32 products (the
/// shapes of kiln-bench's MLP and transformer block, one thread, the
/// median of 3 calls each after one, summed): the measurement behind the
/// choice. kiln::Error when the build lacks it.
double timeBlasLibrary(BlasLibrary library);

/// How bf16 products multiply: converted to f32 for the f32 library (one
/// rounding per result), or on oneDNN's bf16 matmul primitive (f32
/// accumulation, one rounding per result) where oneDNN has a kernel of its
/// own for the layout on this CPU (Note [Native bf16 products] in
/// runtime/onednn_matmul.cpp). Chosen by measurement per machine with the
/// f32 library (codegen::cpuBlasChoice()); viaF32 until then. f16 products
/// always convert (oneDNN 2.6 multiplies f16 natively only on AVX512-FP16).
enum class HalfMatmul : uint8_t { viaF32, onednn };
HalfMatmul halfMatmul();
/// kiln::Error for onednn in a build without oneDNN. As setBlasLibrary, not
/// for the middle of a computation.
void setHalfMatmul(HalfMatmul how);
/// Milliseconds bf16 products take `how`, on the shapes and terms of
/// timeBlasLibrary (with the current f32 library for viaF32).
double timeHalfMatmul(HalfMatmul how);

/// oneDNN's version ("2.6.3"), or "" in a build without it.
std::string oneDnnVersion();

/// The BLAS in use and its build ("OpenBLAS 0.3.21 DYNAMIC_ARCH ...", then
/// "; f32 products: oneDNN 2.6.3" when oneDNN multiplies f32 and "; bf16
/// products: oneDNN 2.6.3 brg:avx512_core_bf16" when it multiplies bf16),
/// for the tools' reports.
std::string blasInfo();

}  // namespace kiln::runtime

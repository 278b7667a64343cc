// cuBLAS on CUDA devices, loaded at run time (Note [cuBLAS is loaded at
// run time] in runtime/cuda_blas.cpp): the GEMMs behind matmul on cuda:N
// (codegen/cuda_library.cpp decides which GEMM a MatmulCall is). Same
// buffers as everywhere (DevicePtr), on the call's stream; no CUDA header.
//
// Numerics: f32 and f64 run sgemm and dgemm in their own precision (no TF32:
// the handle's math mode is CUBLAS_DEFAULT_MATH); f16 and bf16 run
// cublasGemmStridedBatchedEx with f32 accumulation (CUBLAS_COMPUTE_32F) and
// one rounding of each result, as the CPU's matmul (runtime/blas.h) does.
// cuBLAS's kernels differ from OpenBLAS's, so results are close to the
// CPU's, not equal (matmul is compared with a tolerance: docs/ops.md,
// "Library calls"); the same call on the same GPU gives the same bits.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/device_interface.h"
#include "runtime/dtype.h"

namespace kiln::runtime::cuda {

/// One (batched) GEMM in cuBLAS's column-major convention:
/// C_i = op(A_i) · op(B_i) for i < batch, op(A) m×k, op(B) k×n, C m×n,
/// matrix i of each operand `stride*` elements after matrix i-1 (0: the same
/// matrix for every i).
struct Gemm {
  DType dtype = DType::f32;  ///< f32, f64, f16 or bf16
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  DevicePtr a, b, c;
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  int64_t batch = 1;
};

/// Whether cuBLAS loads with every entry point kiln calls, from the
/// candidates of runtime/cuda_libraries.h (libraryCandidates(Library::cublas):
/// $KILN_CUBLAS_LIBRARY alone when set, else libcublas.so.13, .12, then the
/// toolkit folders); `why` says why not (what was tried, what to install).
bool blasAvailable(std::string* why = nullptr);

/// "cuBLAS 13.0.2 (libcublas.so.13)", or "cuBLAS unavailable".
std::string blasVersion();

/// Enqueues `gemm` on `stream` of `device` (a cuda:N) with the calling
/// thread's cuBLAS handle for that device. kiln::Error when cuBLAS is
/// unavailable or fails, or when a size does not fit cuBLAS's 32-bit ints.
void gemm(Device device, StreamHandle stream, const Gemm& gemm);

namespace detail {
/// What loading cuBLAS from `candidates` gives: the candidate that loaded,
/// its version ("cuBLAS 13.0.2"), the entry points resolved, or why it is
/// not usable. A fresh attempt each call, for tests; kiln loads once.
struct CublasLoad {
  std::string library;
  std::string version;
  std::vector<std::string> entryPoints;
  std::string error;
};
CublasLoad loadCublas(std::span<const std::string> candidates);
}  // namespace detail

}  // namespace kiln::runtime::cuda

// cuBLAS behind runtime/cuda_blas.h. Built in every configuration: with
// KILN_HAVE_CUBLAS (the toolkit's cublas_v2.h and cuda.h were found) it
// loads cuBLAS at run time; without it every entry point says that kiln
// was built without the CUDA toolkit.
#include "runtime/cuda_blas.h"

#include <fmt/format.h>

#include "runtime/cuda_libraries.h"
#include "runtime/dynamic_library.h"
#include "runtime/error.h"

#if KILN_HAVE_CUBLAS
#include <cublas_v2.h>

#include <climits>
#include <mutex>
#include <type_traits>
#include <utility>

#include "runtime/cuda_api.h"
#endif

namespace kiln::runtime::cuda {

#if KILN_HAVE_CUBLAS

// Note [cuBLAS is loaded at run time]
// As NVRTC and the driver (Note [The CUDA driver is loaded at run time] in
// runtime/cuda_device.cpp), cuBLAS is opened with dlopen on first use, so
// it is not a needed library of libkiln.so and kiln runs without it. The
// candidates are kiln-env's (runtime/cuda_libraries.h): $KILN_CUBLAS_LIBRARY
// alone, else libcublas.so.13 then .12 (the entry points below kept their
// ABI across both), by the loader's search then in the toolkit folders
// (libcublas's RUNPATH, $ORIGIN, finds libcublasLt next to it). Its entry
// points are resolved by their exported
// names, which are versioned in the name itself (cublasCreate_v2,
// cublasSgemm_v2: what cublas_v2.h maps the plain names to), with the
// signatures of the toolkit's cublas_api.h. A handle is made per (device,
// thread), on first use, in the device's primary context, with the math
// mode CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
// (no TF32, no reduced-precision split-K sums); a thread's handles go back to
// a pool when it ends, for the next thread (they are never destroyed:
// cublasDestroy at exit may run after the driver is gone). cuBLAS allocates
// its own workspace; capturing a matmul into a CUDA graph will need a
// workspace set per stream (cublasSetWorkspace), a later step.

namespace {

// cublasGemmStridedBatchedEx is overloaded in C++ (a compatibility overload
// that takes a cudaDataType compute type): the exported one.
using GemmStridedBatchedExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long int,
                                                  const void*, cudaDataType, int, long long int, const void*, void*,
                                                  cudaDataType, int, long long int, int, cublasComputeType_t,
                                                  cublasGemmAlgo_t);

struct CublasApi {
  std::string error;
  std::string library;
  std::string version;
  std::vector<std::string> entryPoints;
  decltype(&::cublasGetProperty) getProperty = nullptr;
  decltype(&::cublasGetStatusName) statusName = nullptr;
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasSetStream_v2) setStream = nullptr;
  decltype(&::cublasSetMathMode) setMathMode = nullptr;
  decltype(&::cublasSgemm_v2) sgemm = nullptr;
  decltype(&::cublasDgemm_v2) dgemm = nullptr;
  decltype(&::cublasSgemmStridedBatched) sgemmStridedBatched = nullptr;
  decltype(&::cublasDgemmStridedBatched) dgemmStridedBatched = nullptr;
  GemmStridedBatchedExFn gemmStridedBatchedEx = nullptr;
};

CublasApi loadApi(std::span<const std::string> candidates) {
  CublasApi api;
  const DynamicLibrary library = DynamicLibrary::open(candidates);
  if (!library.loaded()) {
    api.error = fmt::format(
        "cuBLAS could not be loaded ({}); install the CUDA toolkit's cuBLAS (libcublas.so.13) "
        "or set KILN_CUBLAS_LIBRARY to its path",
        library.error());
    return api;
  }
  api.library = library.name();
  SymbolResolver resolve(library, api.entryPoints, api.error);
  resolve("cublasGetProperty", api.getProperty);
  resolve("cublasGetStatusName", api.statusName);
  resolve("cublasCreate_v2", api.create);
  resolve("cublasSetStream_v2", api.setStream);
  resolve("cublasSetMathMode", api.setMathMode);
  resolve("cublasSgemm_v2", api.sgemm);
  resolve("cublasDgemm_v2", api.dgemm);
  resolve("cublasSgemmStridedBatched", api.sgemmStridedBatched);
  resolve("cublasDgemmStridedBatched", api.dgemmStridedBatched);
  resolve("cublasGemmStridedBatchedEx", api.gemmStridedBatchedEx);
  if (!api.error.empty()) {
    api.error = fmt::format("cuBLAS at {} is unusable: {}", library.name(), api.error);
    return api;
  }
  int major = 0, minor = 0, patch = 0;
  if (api.getProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      api.getProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      api.getProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
    api.error = fmt::format("cuBLAS at {}: cublasGetProperty failed", library.name());
  else
    api.version = fmt::format("cuBLAS {}.{}.{}", major, minor, patch);
  return api;
}

const CublasApi& cublas() {
  static const CublasApi* const api =
      new CublasApi(loadApi(libraryCandidates(Library::cublas)));  // leaked, as the handles
  return *api;
}

std::string statusText(cublasStatus_t status) {
  const char* name = cublas().statusName ? cublas().statusName(status) : nullptr;
  return name ? std::string(name) : fmt::format("cublasStatus_t {}", static_cast<int>(status));
}

/// Handles no thread holds, per device.
struct HandlePool {
  std::mutex mutex;
  std::vector<std::pair<int, cublasHandle_t>> idle;
};
HandlePool& handlePool() {
  static auto* pool = new HandlePool();  // leaked: threads return handles during exit
  return *pool;
}

/// The handles of one thread, returned to the pool when it ends.
struct ThreadHandles {
  std::vector<std::pair<int, cublasHandle_t>> held;
  ~ThreadHandles() {
    HandlePool& pool = handlePool();
    std::lock_guard lock(pool.mutex);
    pool.idle.insert(pool.idle.end(), held.begin(), held.end());
  }
};

/// The calling thread's handle for cuda:`index` (whose context is current).
cublasHandle_t handleFor(int index) {
  thread_local ThreadHandles mine;
  for (const auto& [device, handle] : mine.held)
    if (device == index) return handle;
  cublasHandle_t handle = nullptr;
  {
    HandlePool& pool = handlePool();
    std::lock_guard lock(pool.mutex);
    for (auto it = pool.idle.begin(); it != pool.idle.end(); ++it) {
      if (it->first != index) continue;
      handle = it->second;
      pool.idle.erase(it);
      break;
    }
  }
  if (!handle) {
    const cublasStatus_t s = cublas().create(&handle);
    KILN_CHECK(s == CUBLAS_STATUS_SUCCESS, "cuda:{}: cublasCreate failed: {}", index, statusText(s));
    const cublasStatus_t m = cublas().setMathMode(
        handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    KILN_CHECK(m == CUBLAS_STATUS_SUCCESS, "cuda:{}: cublasSetMathMode failed: {}", index, statusText(m));
  }
  mine.held.emplace_back(index, handle);
  return handle;
}

int narrow(int64_t v, const char* what, const Gemm& g) {
  KILN_CHECK(v >= 0 && v <= INT_MAX, "matmul: {} = {} does not fit cuBLAS's 32-bit sizes ({}, m={}, n={}, k={})", what,
             v, dtypeName(g.dtype), g.m, g.n, g.k);
  return static_cast<int>(v);
}

}  // namespace

namespace detail {

CublasLoad loadCublas(std::span<const std::string> candidates) {
  const CublasApi api = loadApi(candidates);
  return {api.library, api.version, api.entryPoints, api.error};
}

}  // namespace detail

bool blasAvailable(std::string* why) {
  if (why) *why = cublas().error;
  return cublas().error.empty();
}

std::string blasVersion() {
  const CublasApi& api = cublas();
  return api.error.empty() ? fmt::format("{} ({})", api.version, api.library) : "cuBLAS unavailable";
}

void gemm(Device device, StreamHandle stream, const Gemm& g) {
  const CublasApi& api = cublas();
  KILN_CHECK(api.error.empty(), "matmul: cannot run on {}: {}", device.str(), api.error);
  KILN_ASSERT(device.isCuda(), "cuBLAS gemm on {}", device.str());
  const int m = narrow(g.m, "m", g), n = narrow(g.n, "n", g), k = narrow(g.k, "k", g);
  const int lda = narrow(g.lda, "lda", g), ldb = narrow(g.ldb, "ldb", g), ldc = narrow(g.ldc, "ldc", g);
  const int batch = narrow(g.batch, "the batch", g);
  if (m == 0 || n == 0 || batch == 0) return;
  makeCurrent(device.index());
  cublasHandle_t handle = handleFor(device.index());
  cublasStatus_t s = api.setStream(handle, streamOf(device.index(), stream));
  KILN_CHECK(s == CUBLAS_STATUS_SUCCESS, "matmul on {}: cublasSetStream failed: {}", device.str(), statusText(s));
  const cublasOperation_t ta = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto* a = reinterpret_cast<void*>(pointerOf(g.a));
  auto* b = reinterpret_cast<void*>(pointerOf(g.b));
  auto* c = reinterpret_cast<void*>(pointerOf(g.c));
  const char* call = "";
  switch (g.dtype) {
    case DType::f32: {
      const float one = 1, zero = 0;
      auto* A = static_cast<const float*>(a);
      auto* B = static_cast<const float*>(b);
      auto* C = static_cast<float*>(c);
      if (batch == 1) {
        call = "cublasSgemm";
        s = api.sgemm(handle, ta, tb, m, n, k, &one, A, lda, B, ldb, &zero, C, ldc);
      } else {
        call = "cublasSgemmStridedBatched";
        s = api.sgemmStridedBatched(handle, ta, tb, m, n, k, &one, A, lda, g.strideA, B, ldb, g.strideB, &zero, C, ldc,
                                    g.strideC, batch);
      }
      break;
    }
    case DType::f64: {
      const double one = 1, zero = 0;
      auto* A = static_cast<const double*>(a);
      auto* B = static_cast<const double*>(b);
      auto* C = static_cast<double*>(c);
      if (batch == 1) {
        call = "cublasDgemm";
        s = api.dgemm(handle, ta, tb, m, n, k, &one, A, lda, B, ldb, &zero, C, ldc);
      } else {
        call = "cublasDgemmStridedBatched";
        s = api.dgemmStridedBatched(handle, ta, tb, m, n, k, &one, A, lda, g.strideA, B, ldb, g.strideB, &zero, C, ldc,
                                    g.strideC, batch);
      }
      break;
    }
    case DType::f16:
    case DType::bf16: {
      // f32 accumulation, alpha and beta in f32 (CUBLAS_COMPUTE_32F).
      const float one = 1, zero = 0;
      const cudaDataType t = g.dtype == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
      call = "cublasGemmStridedBatchedEx";
      s = api.gemmStridedBatchedEx(handle, ta, tb, m, n, k, &one, a, t, lda, g.strideA, b, t, ldb, g.strideB, &zero, c,
                                   t, ldc, g.strideC, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      break;
    }
    case DType::i32:
    case DType::i64:
    case DType::boolean: KILN_ASSERT(false, "cuBLAS gemm of {}", dtypeName(g.dtype));
  }
  KILN_CHECK(s == CUBLAS_STATUS_SUCCESS, "matmul on {}: {} failed: {} ({}, m={}, n={}, k={}, batch {})", device.str(),
             call, statusText(s), dtypeName(g.dtype), m, n, k, batch);
}

#else  // !KILN_HAVE_CUBLAS

namespace {
constexpr const char* kNoToolkit = "kiln was built without the CUDA toolkit (no cublas_v2.h)";
}

namespace detail {
CublasLoad loadCublas(std::span<const std::string>) { return {{}, {}, {}, kNoToolkit}; }
}  // namespace detail

bool blasAvailable(std::string* why) {
  if (why) *why = kNoToolkit;
  return false;
}

std::string blasVersion() { return "cuBLAS unavailable"; }

void gemm(Device device, StreamHandle, const Gemm&) { fail("matmul: cannot run on {}: {}", device.str(), kNoToolkit); }

#endif

}  // namespace kiln::runtime::cuda

// The matmul library call of runtime/blas.h: argument encoding, batch
// folding, the split over threads, and one block of one product per dtype
// (BLAS for f32/f64, f32 BLAS for f16/bf16, a loop for integers).
//
// Note [BLAS threads]: OpenBLAS (the pthreads build Debian ships) keeps a
// thread per core that spins for a while after each call, and kiln's
// ThreadPool does the same between kernels. Running both at full width makes
// them take cores from each other at every switch between a matmul and a
// kernel. So by default OpenBLAS is told to use one thread
// (openblas_set_num_threads(1)), and matmul splits its work over kiln's pool
// itself: whole products when there are enough batches, else row blocks
// (column blocks when N > M) of each product, each block one single-threaded
// GEMM. KILN_BLAS_THREADING=blas sets OpenBLAS to the pool's width and calls
// it from the calling thread instead. kiln-bench's matmul workloads compare
// the two (docs/benchmarks.md has the figures).
// Note [Matmul epilogues]
// A linear layer's bias, its activation and a residual add are an
// elementwise kernel over the matmul's result: run after the matmul, it
// reads the whole result back from memory. On the CPU, compileGraph gives
// such a kernel to the matmul's step instead (codegen/compile_graph.cpp,
// Note [Matmul epilogues in compiled programs]), and matmulThen runs it
// over each block of the result right after the thread that computed the
// block, while the block is in its cache: a row block, a product of a
// batch, or the block's columns of each row. The kernel is kiln's own, the
// one the graph asked for, over any range of its elements, and the matmul
// is split exactly as without it, so the results are the same bits as the
// matmul and the kernel run one after the other (eager's). Chosen over
// oneDNN's matmul post-ops (measured on this machine, docs/benchmarks.md):
// their GELU and SiLU are oneDNN's formulas, not kiln's, so compiled
// results would no longer equal eager ones.
#include "runtime/blas.h"

#include <cblas.h>
#ifdef KILN_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/executable.h"
#include "runtime/numeric.h"
#include "runtime/onednn_matmul.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

std::vector<int64_t> MatmulCall::encode() const {
  KILN_ASSERT(aBatchStrides.size() == batch.size() && bBatchStrides.size() == batch.size(),
              "matmul call with {} batch dims but {} and {} batch strides", batch.size(), aBatchStrides.size(),
              bBatchStrides.size());
  std::vector<int64_t> args = {
      static_cast<int64_t>(dtype),       m, n, k, aRowStride, aColStride, bRowStride, bColStride,
      static_cast<int64_t>(batch.size())};
  for (size_t d = 0; d < batch.size(); ++d) args.insert(args.end(), {batch[d], aBatchStrides[d], bBatchStrides[d]});
  return args;
}

std::optional<BlasLayout> blasLayout(int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride) {
  if ((cols == 1 || colStride == 1) && (rows == 1 || rowStride >= cols))
    return BlasLayout{false, rows == 1 ? std::max<int64_t>(cols, 1) : std::max<int64_t>(rowStride, 1)};
  if ((rows == 1 || rowStride == 1) && (cols == 1 || colStride >= rows))
    return BlasLayout{true, cols == 1 ? std::max<int64_t>(rows, 1) : std::max<int64_t>(colStride, 1)};
  return std::nullopt;
}

void MatmulCall::simplifyBatch() {
  MatmulCall& c = *this;
  MatmulCall s = c;
  s.batch.clear(), s.aBatchStrides.clear(), s.bBatchStrides.clear();
  for (size_t d = 0; d < c.batch.size(); ++d) {
    if (c.batch[d] == 1) continue;
    s.batch.push_back(c.batch[d]);
    s.aBatchStrides.push_back(c.aBatchStrides[d]);
    s.bBatchStrides.push_back(c.bBatchStrides[d]);
  }
  c = std::move(s);
  if (c.batch.empty()) return;
  for (int64_t stride : c.bBatchStrides)
    if (stride != 0) return;
  // Rows of the folded a are rowStride apart: the batch dims must step by
  // whole [M, K] blocks of such rows, innermost first.
  const int64_t rowStride = c.m == 1 ? c.aBatchStrides.back() : c.aRowStride;
  int64_t expected = c.m * rowStride;
  for (size_t d = c.batch.size(); d-- > 0;) {
    if (c.aBatchStrides[d] != expected) return;
    expected *= c.batch[d];
  }
  int64_t rows = c.m;
  for (int64_t size : c.batch) rows *= size;
  c.m = rows;
  c.aRowStride = rowStride;
  c.batch.clear(), c.aBatchStrides.clear(), c.bBatchStrides.clear();
}

MatmulCall MatmulCall::decode(std::span<const int64_t> args) {
  KILN_ASSERT(args.size() >= 9 && args.size() == 9 + 3 * static_cast<size_t>(args[8]), "matmul call with {} arguments",
              args.size());
  MatmulCall c;
  c.dtype = static_cast<DType>(args[0]);
  c.m = args[1], c.n = args[2], c.k = args[3];
  c.aRowStride = args[4], c.aColStride = args[5], c.bRowStride = args[6], c.bColStride = args[7];
  for (size_t i = 9; i < args.size(); i += 3) {
    c.batch.push_back(args[i]);
    c.aBatchStrides.push_back(args[i + 1]);
    c.bBatchStrides.push_back(args[i + 2]);
  }
  return c;
}

namespace {

// --- threading ---

BlasThreading initialThreading() {
  const char* env = std::getenv("KILN_BLAS_THREADING");
  return env && std::string_view(env) == "blas" ? BlasThreading::blas : BlasThreading::pool;
}

std::atomic<BlasThreading> gThreading{initialThreading()};
std::mutex gApplyMutex;
int gAppliedThreads = 0;  // what OpenBLAS was last told; 0: nothing yet

/// Tells OpenBLAS how many threads the current choice gives it, once per change.
void applyThreading(BlasThreading threading) {
  const int want = threading == BlasThreading::pool ? 1 : ThreadPool::instance().numThreads();
  std::lock_guard lock(gApplyMutex);
  if (gAppliedThreads == want) return;
  openblas_set_num_threads(want);
  gAppliedThreads = want;
}

// An epilogue run on its own (after a multi-threaded BLAS call, or after an
// empty sum) splits over the pool in ranges of at least this many elements.
constexpr int64_t kEpilogueGrain = 32768;

// Work below this many flops (multiply-adds count two) is not worth a thread.
constexpr double kMinTaskFlops = 1 << 21;

// --- one block of one product ---

/// A strided [rows, cols] matrix gathered to a contiguous one, converted to T.
template <typename T, typename S>
void gatherMatrix(const S* src, int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride, std::vector<T>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      dst[static_cast<size_t>(i * cols + j)] = static_cast<T>(src[i * rowStride + j * colStride]);
}

/// c[m, n] (rows ldc apart) = a[m, k] · b[k, n], each operand strided.
struct Block {
  const void* a;
  int64_t ars, acs;
  const void* b;
  int64_t brs, bcs;
  void* c;
  int64_t ldc;
  int64_t m, n, k;
};

CBLAS_TRANSPOSE flag(BlasLayout l) { return l.transposed ? CblasTrans : CblasNoTrans; }

std::atomic<BlasLibrary> gLibrary{BlasLibrary::openblas};
std::atomic<HalfMatmul> gHalf{HalfMatmul::viaF32};

/// The OpenMP team a oneDNN call may use: one thread, as kiln's pool splits
/// the work, unless BLAS threading gives the cores to the library.
int oneDnnThreads() { return blasThreading() == BlasThreading::blas ? ThreadPool::instance().numThreads() : 1; }

#ifdef KILN_HAVE_ONEDNN
void oneDnnSgemm(const Block& x, const float* a, BlasLayout la, const float* b, BlasLayout lb, float* c) {
  detail::ompThreadsForThisThread(oneDnnThreads());
  const dnnl_status_t status = dnnl_sgemm(la.transposed ? 'T' : 'N', lb.transposed ? 'T' : 'N', x.m, x.n, x.k, 1.0f, a,
                                          la.ld, b, lb.ld, 0.0f, c, x.ldc);
  KILN_CHECK(status == dnnl_success, "matmul: oneDNN's sgemm failed with status {} for [{}, {}] · [{}, {}]",
             static_cast<int>(status), x.m, x.k, x.k, x.n);
}
#endif

void gemm(const Block& x, const float* a, BlasLayout la, const float* b, BlasLayout lb, float* c) {
#ifdef KILN_HAVE_ONEDNN
  if (gLibrary.load(std::memory_order_relaxed) == BlasLibrary::onednn) return oneDnnSgemm(x, a, la, b, lb, c);
#endif
  cblas_sgemm(CblasRowMajor, flag(la), flag(lb), static_cast<blasint>(x.m), static_cast<blasint>(x.n),
              static_cast<blasint>(x.k), 1.0f, a, static_cast<blasint>(la.ld), b, static_cast<blasint>(lb.ld), 0.0f, c,
              static_cast<blasint>(x.ldc));
}
void gemm(const Block& x, const double* a, BlasLayout la, const double* b, BlasLayout lb, double* c) {
  cblas_dgemm(CblasRowMajor, flag(la), flag(lb), static_cast<blasint>(x.m), static_cast<blasint>(x.n),
              static_cast<blasint>(x.k), 1.0, a, static_cast<blasint>(la.ld), b, static_cast<blasint>(lb.ld), 0.0, c,
              static_cast<blasint>(x.ldc));
}

/// f32 and f64: BLAS on the operands as they are, or on a contiguous copy.
template <typename T>
void blasBlock(const Block& x) {
  const T* a = static_cast<const T*>(x.a);
  const T* b = static_cast<const T*>(x.b);
  std::vector<T> aCopy, bCopy;
  std::optional<BlasLayout> la = blasLayout(x.m, x.k, x.ars, x.acs);
  if (!la) {
    gatherMatrix(a, x.m, x.k, x.ars, x.acs, aCopy);
    a = aCopy.data();
    la = BlasLayout{false, std::max<int64_t>(x.k, 1)};
  }
  std::optional<BlasLayout> lb = blasLayout(x.k, x.n, x.brs, x.bcs);
  if (!lb) {
    gatherMatrix(b, x.k, x.n, x.brs, x.bcs, bCopy);
    b = bCopy.data();
    lb = BlasLayout{false, std::max<int64_t>(x.n, 1)};
  }
  gemm(x, a, *la, b, *lb, static_cast<T*>(x.c));
}

/// f16/bf16 to and from f32, one element. bf16's are runtime/numeric.cpp's
/// f32ToBf16Bits and bf16BitsToF32 (the same bits, tested by the matmul
/// tests against eager casts), repeated here so that they inline: called
/// out of line for each element, they cost more than the product for issue
/// 14's MLP under bf16 autocast.
template <typename H>
inline float toF32(H h) {
  if constexpr (std::is_same_v<H, BFloat16>) return std::bit_cast<float>(static_cast<uint32_t>(h.bits) << 16);
  return static_cast<float>(h);
}
template <typename H>
inline H fromF32(float x) {
  if constexpr (std::is_same_v<H, BFloat16>) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16::fromBits(static_cast<uint16_t>((u >> 16) | 0x40u));
    return BFloat16::fromBits(static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
  }
  return H(x);
}

/// A strided f16/bf16 matrix [rows, cols] as f32 in `dst`, and the layout
/// sgemm reads it with. A transposed operand (a linear layer's weight.t())
/// stays transposed: converting it into row-major order would read it a
/// column at a time, which cost more than the product for issue 14's MLP.
template <typename H>
BlasLayout halfToF32(const H* src, int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride,
                     std::vector<float>& dst) {
  const std::optional<BlasLayout> l = blasLayout(rows, cols, rowStride, colStride);
  dst.resize(static_cast<size_t>(rows * cols));
  if (!l || !l->transposed || rows == 1 || cols == 1) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        dst[static_cast<size_t>(i * cols + j)] = toF32(src[i * rowStride + j * colStride]);
    return BlasLayout{false, std::max<int64_t>(cols, 1)};
  }
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) dst[static_cast<size_t>(j * rows + i)] = toF32(src[j * colStride + i]);
  return BlasLayout{true, std::max<int64_t>(rows, 1)};
}

/// f16 and bf16: both operands to f32, sgemm, one rounding per result; bf16
/// on oneDNN's bf16 matmul instead when chosen and oneDNN has a kernel for
/// the layout (Note [Native bf16 products] in runtime/onednn_matmul.cpp).
template <typename H>
void halfBlock(const Block& x) {
  if constexpr (std::is_same_v<H, BFloat16>)
    if (gHalf.load(std::memory_order_relaxed) == HalfMatmul::onednn &&
        detail::oneDnnBf16Matmul(x.a, x.ars, x.acs, x.b, x.brs, x.bcs, x.c, x.ldc, x.m, x.n, x.k, oneDnnThreads()))
      return;
  // Per-thread scratch, kept between calls: fresh vectors of a few MiB
  // each call were mapped and page-faulted again every time.
  thread_local std::vector<float> a, b, c;
  c.resize(static_cast<size_t>(x.m * x.n));
  const BlasLayout la = halfToF32(static_cast<const H*>(x.a), x.m, x.k, x.ars, x.acs, a);
  const BlasLayout lb = halfToF32(static_cast<const H*>(x.b), x.k, x.n, x.brs, x.bcs, b);
  Block f = x;
  f.ldc = x.n;
  gemm(f, a.data(), la, b.data(), lb, c.data());
  H* out = static_cast<H*>(x.c);
  for (int64_t i = 0; i < x.m; ++i)
    for (int64_t j = 0; j < x.n; ++j) out[i * x.ldc + j] = fromF32<H>(c[static_cast<size_t>(i * x.n + j)]);
}

/// i32 and i64: a loop in the unsigned type, so that overflow wraps.
template <typename I>
void intBlock(const Block& x) {
  using U = std::make_unsigned_t<I>;
  const I* a = static_cast<const I*>(x.a);
  const I* b = static_cast<const I*>(x.b);
  I* out = static_cast<I*>(x.c);
  std::vector<U> row(static_cast<size_t>(x.n));
  for (int64_t i = 0; i < x.m; ++i) {
    std::fill(row.begin(), row.end(), U{0});
    for (int64_t kk = 0; kk < x.k; ++kk) {
      const U av = static_cast<U>(a[i * x.ars + kk * x.acs]);
      const I* br = b + kk * x.brs;
      for (int64_t j = 0; j < x.n; ++j) row[static_cast<size_t>(j)] += av * static_cast<U>(br[j * x.bcs]);
    }
    for (int64_t j = 0; j < x.n; ++j) out[i * x.ldc + j] = static_cast<I>(row[static_cast<size_t>(j)]);
  }
}

using BlockFn = void (*)(const Block&);

BlockFn blockFn(DType dtype) {
  switch (dtype) {
    case DType::f32: return blasBlock<float>;
    case DType::f64: return blasBlock<double>;
    case DType::f16: return halfBlock<Half>;
    case DType::bf16: return halfBlock<BFloat16>;
    case DType::i32: return intBlock<int32_t>;
    case DType::i64: return intBlock<int64_t>;
    case DType::boolean: break;
  }
  KILN_ASSERT(false, "matmul of {} reached the runtime", dtypeName(dtype));
  return nullptr;
}

}  // namespace

BlasThreading blasThreading() { return gThreading.load(std::memory_order_relaxed); }
void setBlasThreading(BlasThreading threading) { gThreading.store(threading, std::memory_order_relaxed); }

bool haveOneDnn() {
#ifdef KILN_HAVE_ONEDNN
  return true;
#else
  return false;
#endif
}

BlasLibrary blasLibrary() { return gLibrary.load(std::memory_order_relaxed); }

void setBlasLibrary(BlasLibrary library) {
  KILN_CHECK(library == BlasLibrary::openblas || haveOneDnn(),
             "matmul: oneDNN was not found when kiln was built (Debian libdnnl-dev): only OpenBLAS can multiply");
  gLibrary.store(library, std::memory_order_relaxed);
}

namespace {
/// Milliseconds `product` takes for each [M, N, K] of x·wᵀ below (the
/// median of 3 calls after one), summed: the MLP's first layer, the
/// transformer block's QKV projection and MLP, and a small square product.
/// `product` gets the block and the operands' element size.
double timeProducts(size_t elementSize, const std::function<void(const Block&)>& product) {
  constexpr int64_t kShapes[][3] = {{256, 1024, 784}, {512, 1536, 512}, {512, 2048, 512}, {128, 128, 128}};
  double total = 0;
  for (const auto& [m, n, k] : kShapes) {
    // Bytes of 0x3e80: 0.25 as f32's high half and as bf16.
    std::vector<uint16_t> a(static_cast<size_t>(m * k) * elementSize / 2, 0x3e80);
    std::vector<uint16_t> w(static_cast<size_t>(n * k) * elementSize / 2, 0x3e80);
    std::vector<uint16_t> c(static_cast<size_t>(m * n) * elementSize / 2);
    const Block x{a.data(), k, 1, w.data(), 1, k, c.data(), n, m, n, k};
    std::vector<double> ms;
    for (int run = 0; run < 4; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      product(x);
      const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - t0;
      if (run > 0) ms.push_back(took.count());
    }
    std::sort(ms.begin(), ms.end());
    total += ms[ms.size() / 2];
  }
  return total;
}
}  // namespace

double timeBlasLibrary(BlasLibrary library) {
  KILN_CHECK(library == BlasLibrary::openblas || haveOneDnn(),
             "matmul: oneDNN was not found when kiln was built (Debian libdnnl-dev)");
  const BlasLibrary before = gLibrary.exchange(library);
  const double ms = timeProducts(sizeof(float), [](const Block& x) {
    gemm(x, static_cast<const float*>(x.a), BlasLayout{false, x.k}, static_cast<const float*>(x.b),
         BlasLayout{true, x.k}, static_cast<float*>(x.c));
  });
  gLibrary.store(before);
  return ms;
}

HalfMatmul halfMatmul() { return gHalf.load(std::memory_order_relaxed); }

void setHalfMatmul(HalfMatmul how) {
  KILN_CHECK(how == HalfMatmul::viaF32 || haveOneDnn(),
             "matmul: oneDNN was not found when kiln was built (Debian libdnnl-dev): bf16 products convert to f32");
  gHalf.store(how, std::memory_order_relaxed);
}

double timeHalfMatmul(HalfMatmul how) {
  KILN_CHECK(how == HalfMatmul::viaF32 || haveOneDnn(),
             "matmul: oneDNN was not found when kiln was built (Debian libdnnl-dev)");
  const HalfMatmul before = gHalf.exchange(how);
  const double ms = timeProducts(sizeof(uint16_t), [](const Block& x) { halfBlock<BFloat16>(x); });
  gHalf.store(before);
  return ms;
}

std::string oneDnnVersion() {
#ifdef KILN_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
#else
  return "";
#endif
}

std::string blasInfo() {
  std::string config = openblas_get_config();
  while (!config.empty() && config.back() == ' ') config.pop_back();
#ifdef KILN_HAVE_ONEDNN
  if (blasLibrary() == BlasLibrary::onednn) config += "; f32 products: oneDNN " + oneDnnVersion();
  if (halfMatmul() == HalfMatmul::onednn)
    config +=
        fmt::format("; bf16 products: oneDNN {} {}", oneDnnVersion(), detail::oneDnnBf16Implementation(256, 1024, 784));
#endif
  return config;
}

void matmul(std::span<void* const> buffers, std::span<const int64_t> args) {
  KILN_ASSERT(buffers.size() == 3, "matmul call with {} buffers", buffers.size());
  matmulThen(buffers, args, HostEpilogue{});
}

void matmulWithEpilogue(const LibraryCall& call) {
  KILN_ASSERT(call.epilogue && call.epilogue->kernel && call.epilogue->firstBuffer == 3,
              "matmul with an epilogue called without one");
  std::vector<void*> host(call.buffers.size());
  for (size_t i = 0; i < host.size(); ++i) host[i] = hostAddress(call.buffers[i]);
  const std::span<void* const> all(host);
  matmulThen(all.first(3), call.args,
             HostEpilogue{hostKernelFn(*call.epilogue->kernel), all.subspan(3), call.epilogue->args});
}

void matmulThen(std::span<void* const> buffers, std::span<const int64_t> args, const HostEpilogue& epilogue) {
  KILN_ASSERT(buffers.size() == 3, "matmul call with {} buffers", buffers.size());
  MatmulCall c = MatmulCall::decode(args);
  const BlockFn block = blockFn(c.dtype);
  const int64_t item = itemSize(c.dtype);
  char* out = static_cast<char*>(buffers[2]);
  int64_t batches = 1;
  for (int64_t size : c.batch) batches *= size;
  if (batches == 0 || c.m == 0 || c.n == 0) return;
  // The epilogue over result elements [begin, end) (flat, the result being
  // contiguous), on this thread.
  auto finish = [&](int64_t begin, int64_t end) {
    if (epilogue.fn && begin < end) epilogue.fn(epilogue.buffers.data(), epilogue.args.data(), begin, end);
  };
  auto finishInParallel = [&](int64_t begin, int64_t end) {
    if (epilogue.fn)
      ThreadPool::instance().parallelFor(end - begin, kEpilogueGrain,
                                         [&](int64_t b, int64_t e) { finish(begin + b, begin + e); });
  };
  if (c.k == 0) {  // sums of no terms
    std::memset(out, 0, static_cast<size_t>(batches * c.m * c.n * item));
    finishInParallel(0, batches * c.m * c.n);
    return;
  }
  c.simplifyBatch();
  for (int64_t v : {c.m, c.n, c.k, c.aRowStride, c.aColStride, c.bRowStride, c.bColStride})
    KILN_CHECK(v <= INT32_MAX, "matmul: a size or stride of {} is beyond what the BLAS takes (2^31 - 1)", v);
  batches = 1;
  for (int64_t size : c.batch) batches *= size;
  const BlasThreading threading = blasThreading();
  applyThreading(threading);

  const char* a = static_cast<const char*>(buffers[0]);
  const char* b = static_cast<const char*>(buffers[1]);
  // Product `index` of the batch, rows [r0, r1) and columns [c0, c1).
  auto run = [&](int64_t index, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    int64_t aOffset = 0, bOffset = 0;
    for (size_t d = c.batch.size(), rest = static_cast<size_t>(index); d-- > 0;) {
      const int64_t i = static_cast<int64_t>(rest % static_cast<size_t>(c.batch[d]));
      rest /= static_cast<size_t>(c.batch[d]);
      aOffset += i * c.aBatchStrides[d];
      bOffset += i * c.bBatchStrides[d];
    }
    Block x;
    x.a = a + (aOffset + r0 * c.aRowStride) * item;
    x.ars = c.aRowStride, x.acs = c.aColStride;
    x.b = b + (bOffset + c0 * c.bColStride) * item;
    x.brs = c.bRowStride, x.bcs = c.bColStride;
    x.c = out + ((index * c.m + r0) * c.n + c0) * item;
    x.ldc = c.n;
    x.m = r1 - r0, x.n = c1 - c0, x.k = c.k;
    block(x);
  };
  // run, then the epilogue over what it computed while it is in cache: the
  // block's rows, each whole or the block's columns of each.
  auto runThenFinish = [&](int64_t index, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    run(index, r0, r1, c0, c1);
    if (!epilogue.fn) return;
    if (c0 == 0 && c1 == c.n) {
      finish((index * c.m + r0) * c.n, (index * c.m + r1) * c.n);
      return;
    }
    for (int64_t r = r0; r < r1; ++r) finish((index * c.m + r) * c.n + c0, (index * c.m + r) * c.n + c1);
  };

  const bool blasBacked = c.dtype != DType::i32 && c.dtype != DType::i64;
  if (threading == BlasThreading::blas && blasBacked) {
    for (int64_t i = 0; i < batches; ++i) {
      run(i, 0, c.m, 0, c.n);
      finishInParallel(i * c.m * c.n, (i + 1) * c.m * c.n);
    }
    return;
  }
  ThreadPool& pool = ThreadPool::instance();
  const double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
  if (batches >= pool.numThreads()) {
    const auto grain = static_cast<int64_t>(std::max(1.0, kMinTaskFlops / flops));
    pool.parallelFor(batches, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) runThenFinish(i, 0, c.m, 0, c.n);
    });
    return;
  }
  // Few products: split each one into row blocks (column blocks when it is
  // wider than tall), multiples of 16 so that BLAS keeps whole micro-tiles.
  const bool byRows = c.m >= c.n;
  const int64_t along = byRows ? c.m : c.n;
  const double flopsPerLine = flops / static_cast<double>(along);
  int64_t grain = static_cast<int64_t>(std::max(1.0, kMinTaskFlops / flopsPerLine));
  grain = (grain + 15) / 16 * 16;
  for (int64_t i = 0; i < batches; ++i)
    pool.parallelFor(along, grain, [&](int64_t begin, int64_t end) {
      if (byRows)
        runThenFinish(i, begin, end, 0, c.n);
      else
        runThenFinish(i, 0, c.m, begin, end);
    });
}

}  // namespace kiln::runtime

// Library calls on CUDA devices (codegen/cuda_library.h): cuBLAS for float
// matmuls, kiln's own NVRTC-built kernels for the rest, launched through the
// device interface with the GPU launch ABI (Note [The GPU launch ABI]). It
// lives in codegen because it compiles CUDA C; it reaches the device only
// through the driver and runtime/cuda_blas.h.
#include "codegen/cuda_library.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "codegen/cuda_target.h"
#include "codegen/disk_cache.h"
#include "codegen/gpu_target.h"
#include "codegen/nvrtc_compiler.h"
#include "runtime/blas.h"
#include "runtime/cuda_blas.h"
#include "runtime/error.h"
#include "runtime/indexing.h"

namespace kiln::codegen {

namespace {

using runtime::DevicePtr;
using runtime::LibraryCall;

// The args structs' array bounds; the source below spells them too.
constexpr size_t kMaxRank = 8;
constexpr size_t kMaxBatch = 6;
constexpr int64_t kBlock = 256;

const char* const kSource = R"(// kiln's CUDA kernels for library calls (codegen/cuda_library.cpp). Compiled
// with --fmad=false -prec-div=true -prec-sqrt=true -ftz=false; no header.
typedef long long i64;
typedef unsigned long long u64;
#define KILN_MAX_RANK 8
#define KILN_MAX_BATCH 6
#define KILN_GRID_STRIDE(e, n) \
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < (n); e += (i64)gridDim.x * blockDim.x)

// Each args struct ends with numel (Note [The GPU launch ABI]).
struct KilnCopyArgs { i64 rank; i64 sizes[KILN_MAX_RANK]; i64 strides[KILN_MAX_RANK]; i64 numel; };
struct KilnSelectArgs {
  i64 rank, dim; i64 sizes[KILN_MAX_RANK]; i64 strides[KILN_MAX_RANK]; i64 indexStride, indexIsI32, numel;
};
struct KilnAddArgs {
  i64 rank, dim; i64 sizes[KILN_MAX_RANK]; i64 sourceStrides[KILN_MAX_RANK]; i64 numIndices, indexStride, indexIsI32;
  i64 numel;
};
struct KilnMatmulArgs {
  i64 m, n, k, aRow, aCol, bRow, bCol, batchRank;
  i64 batch[KILN_MAX_BATCH]; i64 aBatch[KILN_MAX_BATCH]; i64 bBatch[KILN_MAX_BATCH];
  i64 numel;
};

// f16 and bf16 as runtime/numeric.cpp converts them (round to nearest even,
// NaN made quiet, denormals kept).
__device__ __forceinline__ float kilnF16ToF32(unsigned short h) {
  const unsigned sign = ((unsigned)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  if (e == 0u) return __uint_as_float(sign | __float_as_uint((float)m * 5.9604644775390625e-8f));
  return __uint_as_float(sign | ((((unsigned)h & 0x7fffu) << 13) + 0x38000000u));
}
__device__ __forceinline__ unsigned short kilnF32ToF16(float x) {
  const unsigned u = __float_as_uint(x), sign = (u >> 16) & 0x8000u;
  unsigned a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (a >= 0x38800000u) {
    a += 0xfffu + ((a >> 13) & 1u);
    return (unsigned short)(sign | ((a - 0x38000000u) >> 13));
  }
  const float r = (__uint_as_float(a) + 0.5f) - 0.5f;
  return (unsigned short)(sign | (unsigned)(r * 16777216.0f));
}
__device__ __forceinline__ float kilnBf16ToF32(unsigned short b) { return __uint_as_float((unsigned)b << 16); }
__device__ __forceinline__ unsigned short kilnF32ToBf16(float x) {
  const unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

struct KilnAddF32 { __device__ float operator()(float a, float b) const { return a + b; } };
struct KilnAddF64 { __device__ double operator()(double a, double b) const { return a + b; } };
struct KilnAddF16 {
  __device__ unsigned short operator()(unsigned short a, unsigned short b) const {
    return kilnF32ToF16(kilnF16ToF32(a) + kilnF16ToF32(b));
  }
};
struct KilnAddBf16 {
  __device__ unsigned short operator()(unsigned short a, unsigned short b) const {
    return kilnF32ToBf16(kilnBf16ToF32(a) + kilnBf16ToF32(b));
  }
};
struct KilnAddI32 { __device__ int operator()(int a, int b) const { return (int)((unsigned)a + (unsigned)b); } };
struct KilnAddI64 { __device__ i64 operator()(i64 a, i64 b) const { return (i64)((u64)a + (u64)b); } };

__device__ __forceinline__ i64 kilnIndex(const void* index, i64 j, i64 stride, i64 isI32) {
  return isI32 ? (i64)((const int*)index)[j * stride] : ((const i64*)index)[j * stride];
}

// out[e] = x[the e-th element of x's strided shape], out contiguous.
template <typename T>
__device__ void kilnCopy(const T* __restrict__ x, T* __restrict__ out, const KilnCopyArgs& a) {
  KILN_GRID_STRIDE(e, a.numel) {
    i64 rest = e, at = 0;
    for (int d = (int)a.rank - 1; d >= 0; --d) {
      at += rest % a.sizes[d] * a.strides[d];
      rest /= a.sizes[d];
    }
    out[e] = x[at];
  }
}

// out (contiguous, `sizes`) = x (strided) with dim `dim` read through the index.
template <typename T>
__device__ void kilnSelect(const T* __restrict__ x, const void* __restrict__ index, T* __restrict__ out,
                           const KilnSelectArgs& a) {
  KILN_GRID_STRIDE(e, a.numel) {
    i64 rest = e, at = 0;
    for (int d = (int)a.rank - 1; d >= 0; --d) {
      i64 i = rest % a.sizes[d];
      rest /= a.sizes[d];
      if (d == a.dim) i = kilnIndex(index, i, a.indexStride, a.indexIsI32);
      at += i * a.strides[d];
    }
    out[e] = x[at];
  }
}

// out (contiguous, `sizes`; already x) += source (strided) along dim through
// the index: one thread per column (outer position, element after dim)
// walks the index in order.
template <typename T, typename Add>
__device__ void kilnIndexAdd(const void* __restrict__ index, const T* __restrict__ source, T* __restrict__ out,
                             const KilnAddArgs& a, Add add) {
  i64 inner = 1;
  for (int d = (int)a.dim + 1; d < (int)a.rank; ++d) inner *= a.sizes[d];
  const i64 size = a.sizes[a.dim];
  KILN_GRID_STRIDE(col, a.numel) {
    const i64 outer = col / inner, e = col % inner;
    i64 at = 0, rest = e;
    for (int d = (int)a.rank - 1; d > (int)a.dim; --d) {
      at += rest % a.sizes[d] * a.sourceStrides[d];
      rest /= a.sizes[d];
    }
    rest = outer;
    for (int d = (int)a.dim - 1; d >= 0; --d) {
      at += rest % a.sizes[d] * a.sourceStrides[d];
      rest /= a.sizes[d];
    }
    for (i64 j = 0; j < a.numIndices; ++j) {
      T* dst = out + (outer * size + kilnIndex(index, j, a.indexStride, a.indexIsI32)) * inner + e;
      *dst = add(*dst, source[at + j * a.sourceStrides[a.dim]]);
    }
  }
}

// out[b, i, j] = sum over k, in order, of a[b, i, k] * b[b, k, j] in the
// unsigned type U (wrapping), one thread per result.
template <typename T, typename U>
__device__ void kilnMatmulInt(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                              const KilnMatmulArgs& g) {
  KILN_GRID_STRIDE(e, g.numel) {
    const i64 j = e % g.n, i = e / g.n % g.m;
    i64 rest = e / g.n / g.m, aAt = i * g.aRow, bAt = j * g.bCol;
    for (int d = (int)g.batchRank - 1; d >= 0; --d) {
      const i64 q = rest % g.batch[d];
      rest /= g.batch[d];
      aAt += q * g.aBatch[d];
      bAt += q * g.bBatch[d];
    }
    U acc = 0;
    for (i64 kk = 0; kk < g.k; ++kk) acc += (U)a[aAt + kk * g.aCol] * (U)b[bAt + kk * g.bRow];
    out[e] = (T)acc;
  }
}

#define KILN_BY_SIZE(N, T)                                                                                     \
  extern "C" __global__ void kiln_copy_##N(const T* x, T* out, KilnCopyArgs a) { kilnCopy(x, out, a); }      \
  extern "C" __global__ void kiln_index_select_##N(const T* x, const void* index, T* out, KilnSelectArgs a) { \
    kilnSelect(x, index, out, a);                                                                              \
  }
KILN_BY_SIZE(1, unsigned char)
KILN_BY_SIZE(2, unsigned short)
KILN_BY_SIZE(4, unsigned)
KILN_BY_SIZE(8, u64)

#define KILN_INDEX_ADD(NAME, T, ADD)                                                                           \
  extern "C" __global__ void kiln_index_add_##NAME(const void* index, const T* source, T* out, KilnAddArgs a) { \
    kilnIndexAdd(index, source, out, a, ADD());                                                                \
  }
KILN_INDEX_ADD(f32, float, KilnAddF32)
KILN_INDEX_ADD(f64, double, KilnAddF64)
KILN_INDEX_ADD(f16, unsigned short, KilnAddF16)
KILN_INDEX_ADD(bf16, unsigned short, KilnAddBf16)
KILN_INDEX_ADD(i32, int, KilnAddI32)
KILN_INDEX_ADD(i64, i64, KilnAddI64)

extern "C" __global__ void kiln_matmul_i32(const int* a, const int* b, int* out, KilnMatmulArgs g) {
  kilnMatmulInt<int, unsigned>(a, b, out, g);
}
extern "C" __global__ void kiln_matmul_i64(const i64* a, const i64* b, i64* out, KilnMatmulArgs g) {
  kilnMatmulInt<i64, u64>(a, b, out, g);
}
)";

// --- the program, compiled once per architecture and loaded per kernel ---

struct LoadedKernels {
  std::mutex mutex;
  /// The program's cubin, by sm_XY.
  std::map<int, std::vector<uint8_t>> cubins;
  /// Each kernel loaded, by (device index, kernel name).
  std::map<std::pair<int, std::string>, std::shared_ptr<const runtime::KernelModule>> modules;
};

LoadedKernels& loaded() {
  static auto* l = new LoadedKernels();  // leaked, as the kernel cache: modules may be released during exit
  return *l;
}

/// Kernel `name` of the library program, loaded on `device`.
const runtime::KernelModule& libraryKernel(Device device, const std::string& name) {
  LoadedKernels& l = loaded();
  std::lock_guard lock(l.mutex);
  const auto key = std::make_pair(device.index(), name);
  if (auto it = l.modules.find(key); it != l.modules.end()) return *it->second;
  runtime::DeviceInterface& driver = runtime::deviceInterface(device);
  const std::string& arch = driver.properties().arch;
  const int sm = smArchOf(arch);
  std::vector<uint8_t>& cubin = l.cubins[sm];
  if (cubin.empty()) {
    const std::string cacheKey = fmt::format("cuda-library\n{}\n{}\n{}", arch, cudaCompilerDescription(), kSource);
    DiskCache& disk = DiskCache::instance();
    if (std::optional<std::string> object = disk.load(cacheKey)) {
      cubin.assign(object->begin(), object->end());
    } else {
      const CudaBinary binary = compileCudaToCubin(kSource, "kiln_cuda_library", sm);
      cubin.assign(binary.cubin.begin(), binary.cubin.end());
      disk.store(cacheKey, std::string_view(binary.cubin.data(), binary.cubin.size()));
    }
  }
  runtime::KernelImage image;
  image.format = runtime::KernelImage::Format::cubin;
  image.name = name;
  image.bytes = cubin;
  auto module = driver.loadModule(image);
  return *l.modules.emplace(key, std::move(module)).first->second;
}

/// Launches library kernel `name` over `numel` work items (grid-stride
/// loops: blocks of kBlock threads, at most kMaxGpuGroups of them).
/// `words` are the args struct's words before numel.
void launchKernel(const LibraryCall& call, const std::string& name, std::span<const DevicePtr> buffers,
                  const std::vector<int64_t>& words, int64_t numel) {
  if (numel <= 0) return;
  const runtime::KernelModule& kernel = libraryKernel(call.device, name);
  runtime::LaunchShape shape;
  shape.numel = numel;
  shape.grid = {std::min<int64_t>((numel + kBlock - 1) / kBlock, kMaxGpuGroups), 1, 1};
  shape.block = {kBlock, 1, 1};
  runtime::deviceInterface(call.device).launch(kernel, buffers, words, shape, call.stream);
}

/// Appends `values` as an array of `bound` words (zeros after them).
void appendArray(std::vector<int64_t>& words, const std::vector<int64_t>& values, size_t bound) {
  KILN_ASSERT(values.size() <= bound, "{} values for an array of {}", values.size(), bound);
  words.insert(words.end(), values.begin(), values.end());
  words.insert(words.end(), bound - values.size(), 0);
}

int64_t product(const std::vector<int64_t>& sizes, size_t first, size_t last) {
  int64_t n = 1;
  for (size_t d = first; d < last; ++d) n *= sizes[d];
  return n;
}

/// A shape and the strides of some tensors over it, with dims of size 1
/// dropped and neighbours merged where every tensor steps through them as
/// one dim; `keep` (a dim index, or -1) is kept as it is and never merged,
/// and comes back renumbered.
struct Dims {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;
  int64_t keep = -1;
};
Dims coalesce(const std::vector<int64_t>& sizes, const std::vector<std::vector<int64_t>>& strides, int64_t keep) {
  Dims out;
  out.strides.resize(strides.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    const bool kept = static_cast<int64_t>(d) == keep;
    if (sizes[d] == 1 && !kept) continue;
    const bool previousKept = out.keep >= 0 && static_cast<size_t>(out.keep) == out.sizes.size() - 1;
    bool merge = !out.sizes.empty() && !kept && !previousKept;
    for (size_t t = 0; merge && t < strides.size(); ++t) merge = out.strides[t].back() == strides[t][d] * sizes[d];
    if (merge) {
      out.sizes.back() *= sizes[d];
      for (size_t t = 0; t < strides.size(); ++t) out.strides[t].back() = strides[t][d];
      continue;
    }
    if (kept) out.keep = static_cast<int64_t>(out.sizes.size());
    out.sizes.push_back(sizes[d]);
    for (size_t t = 0; t < strides.size(); ++t) out.strides[t].push_back(strides[t][d]);
  }
  return out;
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= sizes[d];
  }
  return strides;
}

/// out (contiguous) = x read through `strides` over `sizes`, elements of `item` bytes.
void copyStrided(const LibraryCall& call, DevicePtr x, DevicePtr out, const std::vector<int64_t>& sizes,
                 const std::vector<int64_t>& strides, int64_t item, const char* op) {
  const int64_t numel = product(sizes, 0, sizes.size());
  if (numel == 0) return;
  const Dims dims = coalesce(sizes, {strides}, -1);
  if (dims.sizes.empty() || (dims.sizes.size() == 1 && dims.strides[0][0] == 1)) {
    runtime::deviceInterface(call.device).copyDeviceToDevice(out, x, static_cast<size_t>(numel * item), call.stream);
    return;
  }
  KILN_CHECK(dims.sizes.size() <= kMaxRank, "{}: a strided operand of rank {} on {} (at most {} dims once merged)", op,
             dims.sizes.size(), call.device.str(), kMaxRank);
  std::vector<int64_t> words{static_cast<int64_t>(dims.sizes.size())};
  appendArray(words, dims.sizes, kMaxRank);
  appendArray(words, dims.strides[0], kMaxRank);
  const DevicePtr buffers[] = {x, out};
  launchKernel(call, fmt::format("kiln_copy_{}", item), buffers, words, numel);
}

/// The index read back to the host (this synchronizes the call's stream)
/// and checked as the CPU checks it: kiln::Error before anything is written.
void checkIndex(const LibraryCall& call, const char* op, DevicePtr index, const runtime::IndexCall& c) {
  if (c.numIndices == 0) return;
  const int64_t item = itemSize(c.indexDType);
  const int64_t span = (c.numIndices - 1) * c.indexStride + 1;
  std::vector<unsigned char> host(static_cast<size_t>(span * item));
  runtime::deviceInterface(call.device).copyDeviceToHost(host.data(), index, host.size(), call.stream);
  const int64_t size = c.sizes[static_cast<size_t>(c.dim)];
  for (int64_t j = 0; j < c.numIndices; ++j) {
    int64_t i = 0;
    if (c.indexDType == DType::i32) {
      int32_t v = 0;
      std::memcpy(&v, host.data() + j * c.indexStride * item, sizeof v);
      i = v;
    } else {
      std::memcpy(&i, host.data() + j * c.indexStride * item, sizeof i);
    }
    KILN_CHECK(i >= 0 && i < size, "{}: index {} is out of range for dimension {} of size {}", op, i, c.dim, size);
  }
}

// --- matmul ---

/// Memory for the length of a call, allocated for the call's stream and
/// given back after the work enqueued on it (Note [Memory belongs to a
/// stream]: later work on that stream runs after the GEMMs that read it).
class Scratch {
 public:
  Scratch(const LibraryCall& call, size_t bytes)
      : driver_(runtime::deviceInterface(call.device)), ptr_(driver_.allocate(bytes, call.stream)) {}
  ~Scratch() { driver_.free(ptr_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  DevicePtr ptr() const { return ptr_; }

 private:
  runtime::DeviceInterface& driver_;
  DevicePtr ptr_;
};

/// An operand of a matmul as the GEMMs read it.
struct Operand {
  DevicePtr ptr;
  std::vector<int64_t> batchStrides;
  int64_t rowStride = 0, colStride = 0;
};

/// Copies an operand whose matrices cuBLAS cannot read to a contiguous
/// scratch; batch dims it is broadcast over (stride 0) stay broadcast.
std::unique_ptr<Scratch> compact(const LibraryCall& call, Operand& x, const std::vector<int64_t>& batch, int64_t rows,
                                 int64_t cols, int64_t item) {
  std::vector<int64_t> sizes, strides;
  for (size_t d = 0; d < batch.size(); ++d) {
    sizes.push_back(x.batchStrides[d] == 0 ? 1 : batch[d]);
    strides.push_back(x.batchStrides[d]);
  }
  sizes.insert(sizes.end(), {rows, cols});
  strides.insert(strides.end(), {x.rowStride, x.colStride});
  auto scratch = std::make_unique<Scratch>(call, static_cast<size_t>(product(sizes, 0, sizes.size()) * item));
  const DevicePtr to = scratch->ptr();
  copyStrided(call, x.ptr, to, sizes, strides, item, "matmul");
  const std::vector<int64_t> contiguous = contiguousStrides(sizes);
  for (size_t d = 0; d < batch.size(); ++d) x.batchStrides[d] = x.batchStrides[d] == 0 ? 0 : contiguous[d];
  x.ptr = to;
  x.rowStride = cols;
  x.colStride = 1;
  return scratch;
}

void integerMatmul(const LibraryCall& call, const runtime::MatmulCall& c) {
  KILN_CHECK(c.batch.size() <= kMaxBatch, "matmul: {} batch dims of {} on {} (at most {} once size-1 dims are dropped)",
             c.batch.size(), dtypeName(c.dtype), call.device.str(), kMaxBatch);
  std::vector<int64_t> words{c.m,          c.n,          c.k,          c.aRowStride,
                             c.aColStride, c.bRowStride, c.bColStride, static_cast<int64_t>(c.batch.size())};
  appendArray(words, c.batch, kMaxBatch);
  appendArray(words, c.aBatchStrides, kMaxBatch);
  appendArray(words, c.bBatchStrides, kMaxBatch);
  const int64_t numel = product(c.batch, 0, c.batch.size()) * c.m * c.n;  // after the fold: not the call's batch
  launchKernel(call, fmt::format("kiln_matmul_{}", dtypeName(c.dtype)), call.buffers, words, numel);
}

}  // namespace

const std::string& cudaLibrarySource() {
  static const std::string source = kSource;
  return source;
}

void cudaMatmul(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 3, "matmul call with {} buffers", call.buffers.size());
  runtime::MatmulCall c = runtime::MatmulCall::decode(call.args);
  const int64_t item = itemSize(c.dtype);
  int64_t batches = 1;
  for (int64_t size : c.batch) batches *= size;
  if (batches == 0 || c.m == 0 || c.n == 0) return;
  runtime::DeviceInterface& driver = runtime::deviceInterface(call.device);
  if (c.k == 0) {  // sums of no terms
    const uint64_t zero = 0;
    driver.fill(call.buffers[2], static_cast<size_t>(batches * c.m * c.n * item), &zero, static_cast<size_t>(item),
                call.stream);
    return;
  }
  c.simplifyBatch();
  if (c.dtype == DType::i32 || c.dtype == DType::i64) return integerMatmul(call, c);
  KILN_ASSERT(c.dtype == DType::f32 || c.dtype == DType::f64 || c.dtype == DType::f16 || c.dtype == DType::bf16,
              "matmul of {} reached the runtime", dtypeName(c.dtype));

  Operand a{call.buffers[0], c.aBatchStrides, c.aRowStride, c.aColStride};
  Operand b{call.buffers[1], c.bBatchStrides, c.bRowStride, c.bColStride};
  std::unique_ptr<Scratch> aScratch, bScratch;
  std::optional<runtime::BlasLayout> la = runtime::blasLayout(c.m, c.k, a.rowStride, a.colStride);
  if (!la) {
    aScratch = compact(call, a, c.batch, c.m, c.k, item);
    la = runtime::blasLayout(c.m, c.k, a.rowStride, a.colStride);
  }
  std::optional<runtime::BlasLayout> lb = runtime::blasLayout(c.k, c.n, b.rowStride, b.colStride);
  if (!lb) {
    bScratch = compact(call, b, c.batch, c.k, c.n, item);
    lb = runtime::blasLayout(c.k, c.n, b.rowStride, b.colStride);
  }
  KILN_ASSERT(la && lb, "matmul: a contiguous copy is not a GEMM layout");

  // Batch dims that every operand steps through as one merge; the result is
  // contiguous [batch..., M, N].
  std::vector<int64_t> outStrides = contiguousStrides(c.batch);
  for (int64_t& s : outStrides) s *= c.m * c.n;
  const Dims dims = coalesce(c.batch, {a.batchStrides, b.batchStrides, outStrides}, -1);

  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS's A is our b, its
  // B our a; a row-major matrix is its transpose in column-major order.
  runtime::cuda::Gemm g;
  g.dtype = c.dtype;
  g.m = c.n, g.n = c.m, g.k = c.k;
  g.transA = lb->transposed, g.lda = lb->ld;
  g.transB = la->transposed, g.ldb = la->ld;
  g.ldc = c.n;
  // The innermost batch dim is cuBLAS's batch; the others are a host loop.
  const size_t rank = dims.sizes.size();
  if (rank > 0) {
    g.batch = dims.sizes.back();
    g.strideA = dims.strides[1].back(), g.strideB = dims.strides[0].back(), g.strideC = dims.strides[2].back();
  }
  const size_t outerRank = rank > 0 ? rank - 1 : 0;
  const int64_t outer = product(dims.sizes, 0, outerRank);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t aAt = 0, bAt = 0, cAt = 0, rest = o;
    for (size_t d = outerRank; d-- > 0;) {
      const int64_t q = rest % dims.sizes[d];
      rest /= dims.sizes[d];
      aAt += q * dims.strides[0][d], bAt += q * dims.strides[1][d], cAt += q * dims.strides[2][d];
    }
    g.a = {b.ptr.handle, b.ptr.offset + static_cast<size_t>(bAt * item)};
    g.b = {a.ptr.handle, a.ptr.offset + static_cast<size_t>(aAt * item)};
    g.c = {call.buffers[2].handle, call.buffers[2].offset + static_cast<size_t>(cAt * item)};
    runtime::cuda::gemm(call.device, call.stream, g);
  }
  // Scratch copies are freed here; the GEMMs that read them are on the same
  // stream, before any later use of that memory.
}

void cudaIndexSelect(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 3, "index_select call with {} buffers", call.buffers.size());
  const runtime::IndexCall c = runtime::IndexCall::decode(call.args);
  checkIndex(call, "index_select", call.buffers[1], c);
  std::vector<int64_t> outSizes = c.sizes;
  outSizes[static_cast<size_t>(c.dim)] = c.numIndices;
  const int64_t numel = product(outSizes, 0, outSizes.size());
  if (numel == 0) return;
  const Dims dims = coalesce(outSizes, {c.strides, contiguousStrides(outSizes)}, c.dim);
  KILN_CHECK(dims.sizes.size() <= kMaxRank, "index_select: a tensor of rank {} on {} (at most {} dims once merged)",
             dims.sizes.size(), call.device.str(), kMaxRank);
  std::vector<int64_t> words{static_cast<int64_t>(dims.sizes.size()), dims.keep};
  appendArray(words, dims.sizes, kMaxRank);
  appendArray(words, dims.strides[0], kMaxRank);
  words.insert(words.end(), {c.indexStride, c.indexDType == DType::i32 ? 1 : 0});
  launchKernel(call, fmt::format("kiln_index_select_{}", itemSize(c.dtype)), call.buffers, words, numel);
}

void cudaIndexAdd(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 4, "index_add call with {} buffers", call.buffers.size());
  const runtime::IndexCall c = runtime::IndexCall::decode(call.args);
  KILN_ASSERT(!c.sourceStrides.empty(), "index_add call without source strides");
  checkIndex(call, "index_add", call.buffers[1], c);
  const int64_t item = itemSize(c.dtype);
  copyStrided(call, call.buffers[0], call.buffers[3], c.sizes, c.strides, item, "index_add");
  if (c.numIndices == 0) return;
  // Source's sizes are x's with the index count at dim (which is never
  // merged); out is contiguous over x's sizes. Dims merge where source and
  // out both step through them as one.
  const Dims dims = coalesce(c.sizes, {c.sourceStrides, contiguousStrides(c.sizes)}, c.dim);
  KILN_CHECK(dims.sizes.size() <= kMaxRank, "index_add: a tensor of rank {} on {} (at most {} dims once merged)",
             dims.sizes.size(), call.device.str(), kMaxRank);
  const int64_t columns = product(dims.sizes, 0, dims.sizes.size()) / dims.sizes[static_cast<size_t>(dims.keep)];
  std::vector<int64_t> words{static_cast<int64_t>(dims.sizes.size()), dims.keep};
  appendArray(words, dims.sizes, kMaxRank);
  appendArray(words, dims.strides[0], kMaxRank);
  words.insert(words.end(), {c.numIndices, c.indexStride, c.indexDType == DType::i32 ? 1 : 0});
  const DevicePtr buffers[] = {call.buffers[1], call.buffers[2], call.buffers[3]};
  launchKernel(call, fmt::format("kiln_index_add_{}", dtypeName(c.dtype)), buffers, words, columns);
}

}  // namespace kiln::codegen

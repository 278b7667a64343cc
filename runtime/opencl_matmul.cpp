// matmul on OpenCL devices (runtime/opencl_library.h): the CPU's call
// (runtime/blas.h: same buffers and MatmulCall arguments, the same batch
// broadcasting and folding) enqueued on the call's stream without blocking
// the host.
//
// - f32 and f64 go to CLBlast (CLBlastSgemm/Dgemm, and the strided-batched
//   variants over the innermost batch dim, the host looping over the
//   others). A matrix CLBlast can take as it is (rows apart by a leading
//   dim, or a transposed contiguous view) goes as it is; any other (doubly
//   strided, or a stride-0 row or column) is first copied to a contiguous
//   scratch buffer on the device by the gather kernel. CLBlast sums in its
//   own order (and may contract to FMA), so results match the CPU's
//   OpenBLAS within a tolerance, never bit for bit.
// - f16, bf16, i32 and i64 run kiln's own GEMM kernel
//   (runtime/opencl_kernels.cpp): Note [The one hand-written GEMM].
// - Without CLBlast (KILN_HAVE_CLBLAST unset), f32 and f64 run that kernel
//   too, and so does a product whose element indices pass 2^31 - 1 (the
//   int arguments of CLBlast's kernels).
//
// Note [The one hand-written GEMM]
// kiln computes floats through a BLAS, never a GEMM of its own (DESIGN.md
// §2), but on OpenCL there is no BLAS for the other dtypes: CLBlast's Hgemm
// needs cl_khr_fp16, which PoCL lacks, it has no bf16, and no BLAS
// multiplies integers. So this one kernel, one work-item per output element
// summing over k in order: f16 and bf16 widened to f32 with kiln's bit
// formulas, summed in f32 and rounded once (as the CPU's f32 sgemm path
// does, up to the order of the sums), integers in their unsigned type so
// that overflow wraps as on the CPU. It is slow but correct; speed on these
// dtypes is not what the OpenCL backend is for.
#include "runtime/error.h"
#include "runtime/opencl_library.h"

#if KILN_HAVE_OPENCL
#include <algorithm>
#include <climits>
#include <optional>
#include <vector>

#include "runtime/blas.h"
#include "runtime/opencl_kernels.h"
#if KILN_HAVE_CLBLAST
#include <clblast_c.h>
#endif
#endif

namespace kiln::runtime::opencl {

#if KILN_HAVE_OPENCL

namespace {

/// Where an operand or the result lives: a cl_mem and an element offset.
struct Place {
  cl_mem mem = nullptr;
  int64_t offset = 0;
};

int64_t product(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t size : sizes) n *= size;
  return n;
}

/// Merges the batch dims that a, b and the contiguous result all walk as
/// one, then the CPU's batch folding (MatmulCall::simplifyBatch).
void simplifyBatch(MatmulCall& c) {
  std::vector<int64_t> outStrides(c.batch.size());
  for (size_t d = c.batch.size(), stride = static_cast<size_t>(c.m * c.n); d-- > 0;) {
    outStrides[d] = static_cast<int64_t>(stride);
    stride *= static_cast<size_t>(c.batch[d]);
  }
  int64_t none = -1;
  mergeDims(c.batch, {&c.aBatchStrides, &c.bBatchStrides, &outStrides}, none);
  c.simplifyBatch();
}

/// The batch of `c` without its outermost dim.
MatmulCall innerBatch(const MatmulCall& c) {
  MatmulCall inner = c;
  inner.batch.erase(inner.batch.begin());
  inner.aBatchStrides.erase(inner.aBatchStrides.begin());
  inner.bBatchStrides.erase(inner.bBatchStrides.begin());
  return inner;
}

/// kiln's GEMM kernel (Note [The one hand-written GEMM]) over the whole
/// batch; the host loops over batch dims beyond what the kernel walks.
void enqueueGemmKernel(int device, cl_command_queue queue, const MatmulCall& c, Place a, Place b, Place out) {
  if (c.batch.size() > static_cast<size_t>(kMaxDims)) {
    const MatmulCall inner = innerBatch(c);
    const int64_t outStride = product(inner.batch) * c.m * c.n;
    for (int64_t i = 0; i < c.batch[0]; ++i)
      enqueueGemmKernel(device, queue, inner, {a.mem, a.offset + i * c.aBatchStrides[0]},
                        {b.mem, b.offset + i * c.bBatchStrides[0]}, {out.mem, out.offset + i * outStride});
    return;
  }
  GemmArgs g;
  g.total = product(c.batch) * c.m * c.n;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.aOffset = a.offset, g.bOffset = b.offset, g.cOffset = out.offset;
  g.aRowStride = c.aRowStride, g.aColStride = c.aColStride, g.bRowStride = c.bRowStride, g.bColStride = c.bColStride;
  g.rank = static_cast<int64_t>(c.batch.size());
  std::copy(c.batch.begin(), c.batch.end(), g.batch);
  std::copy(c.aBatchStrides.begin(), c.aBatchStrides.end(), g.aBatch);
  std::copy(c.bBatchStrides.begin(), c.bBatchStrides.end(), g.bBatch);
  launchKernel(device, queue, "kiln_gemm_" + kernelSuffix(c.dtype), {a.mem, b.mem, out.mem}, g, g.total);
}

#if KILN_HAVE_CLBLAST

CLBlastTranspose flag(const BlasLayout& l) { return l.transposed ? CLBlastTransposeYes : CLBlastTransposeNo; }

/// Frees the scratch buffers of one call once its work is enqueued: later
/// work on the call's stream cannot overwrite them early (Note [Memory
/// belongs to a stream]), and OpenCL keeps a released buffer until the
/// commands that use it have run.
struct Scratch {
  DeviceInterface& device;
  std::vector<DevicePtr> buffers;
  ~Scratch() {
    for (DevicePtr p : buffers) device.free(p);
  }
};

/// Copies operand `x`, [batch..., rows, cols] through its strides, to a
/// contiguous scratch buffer (its broadcast batch dims once), and makes the
/// strides say so.
Place gatherOperand(const LibraryCall& call, cl_command_queue queue, Scratch& scratch, int64_t item,
                    const std::vector<int64_t>& batch, std::vector<int64_t>& batchStrides, int64_t rows, int64_t cols,
                    int64_t& rowStride, int64_t& colStride, Place x) {
  std::vector<int64_t> sizes, strides;
  for (size_t d = 0; d < batch.size(); ++d)
    if (batchStrides[d] != 0) sizes.push_back(batch[d]), strides.push_back(batchStrides[d]);
  sizes.insert(sizes.end(), {rows, cols});
  strides.insert(strides.end(), {rowStride, colStride});
  const int64_t count = product(sizes);
  const DevicePtr buffer = scratch.device.allocate(static_cast<size_t>(count * item), call.stream);
  scratch.buffers.push_back(buffer);
  const Place to{memOf(buffer), elementOffset("matmul", buffer, item)};
  enqueueGather(call.device.index(), queue, item, x.mem, x.offset, sizes, strides, to.mem, to.offset);
  int64_t stride = rows * cols;
  for (size_t d = batch.size(); d-- > 0;) {
    if (batchStrides[d] == 0) continue;
    batchStrides[d] = stride;
    stride *= batch[d];
  }
  rowStride = cols, colStride = 1;
  return to;
}

/// The largest element index `x` reads: its offset plus each dim's last step.
int64_t lastIndex(const Place& x, const std::vector<int64_t>& batch, const std::vector<int64_t>& batchStrides,
                  int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride) {
  int64_t last = x.offset + (rows - 1) * rowStride + (cols - 1) * colStride;
  for (size_t d = 0; d < batch.size(); ++d) last += (batch[d] - 1) * batchStrides[d];
  return last;
}

const char* clblastName(DType dtype, bool batched) {
  if (dtype == DType::f32) return batched ? "CLBlastSgemmStridedBatched" : "CLBlastSgemm";
  return batched ? "CLBlastDgemmStridedBatched" : "CLBlastDgemm";
}

/// One CLBlast call: the product at (a, b, out), `count` times along the
/// innermost batch dim (0: no batch).
void clblastGemm(const MatmulCall& c, cl_command_queue queue, BlasLayout la, BlasLayout lb, Place a, Place b, Place out,
                 int64_t count, int64_t aStride, int64_t bStride) {
  const auto m = static_cast<size_t>(c.m), n = static_cast<size_t>(c.n), k = static_cast<size_t>(c.k);
  const auto ao = static_cast<size_t>(a.offset), bo = static_cast<size_t>(b.offset);
  const auto co = static_cast<size_t>(out.offset);
  const auto lda = static_cast<size_t>(la.ld), ldb = static_cast<size_t>(lb.ld);
  const auto as = static_cast<size_t>(aStride), bs = static_cast<size_t>(bStride), cs = m * n;
  const auto batches = static_cast<size_t>(count);
  // No event is asked for: the work is ordered by the queue.
  CLBlastStatusCode status = CLBlastSuccess;
  if (c.dtype == DType::f32)
    status = count == 0 ? CLBlastSgemm(CLBlastLayoutRowMajor, flag(la), flag(lb), m, n, k, 1.0f, a.mem, ao, lda, b.mem,
                                       bo, ldb, 0.0f, out.mem, co, n, &queue, nullptr)
                        : CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, flag(la), flag(lb), m, n, k, 1.0f, a.mem,
                                                     ao, lda, as, b.mem, bo, ldb, bs, 0.0f, out.mem, co, n, cs, batches,
                                                     &queue, nullptr);
  else
    status = count == 0 ? CLBlastDgemm(CLBlastLayoutRowMajor, flag(la), flag(lb), m, n, k, 1.0, a.mem, ao, lda, b.mem,
                                       bo, ldb, 0.0, out.mem, co, n, &queue, nullptr)
                        : CLBlastDgemmStridedBatched(CLBlastLayoutRowMajor, flag(la), flag(lb), m, n, k, 1.0, a.mem, ao,
                                                     lda, as, b.mem, bo, ldb, bs, 0.0, out.mem, co, n, cs, batches,
                                                     &queue, nullptr);
  KILN_CHECK(status == CLBlastSuccess,
             "matmul: {} failed with CLBlast status {} ({}x{}x{}, batch {}; CLBlast's codes are in clblast_c.h)",
             clblastName(c.dtype, count != 0), static_cast<int>(status), c.m, c.n, c.k, count);
}

/// CLBlast's products over the batch: strided-batched calls along the
/// innermost batch dim, the host looping over the others.
void enqueueClblast(const MatmulCall& c, cl_command_queue queue, BlasLayout la, BlasLayout lb, Place a, Place b,
                    Place out) {
  if (c.batch.empty()) return clblastGemm(c, queue, la, lb, a, b, out, 0, 0, 0);
  if (c.batch.size() == 1)
    return clblastGemm(c, queue, la, lb, a, b, out, c.batch[0], c.aBatchStrides[0], c.bBatchStrides[0]);
  const MatmulCall inner = innerBatch(c);
  const int64_t outStride = product(inner.batch) * c.m * c.n;
  for (int64_t i = 0; i < c.batch[0]; ++i)
    enqueueClblast(inner, queue, la, lb, {a.mem, a.offset + i * c.aBatchStrides[0]},
                   {b.mem, b.offset + i * c.bBatchStrides[0]}, {out.mem, out.offset + i * outStride});
}

#endif  // KILN_HAVE_CLBLAST

}  // namespace

void matmul(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 3, "matmul call with {} buffers", call.buffers.size());
  MatmulCall c = MatmulCall::decode(call.args);
  KILN_ASSERT(c.dtype != DType::boolean, "matmul of {} reached the runtime", dtypeName(c.dtype));
  const int64_t item = itemSize(c.dtype);
  const int64_t batches = product(c.batch);
  if (batches == 0 || c.m == 0 || c.n == 0) return;
  DeviceInterface& device = deviceInterface(call.device);
  if (c.k == 0) {  // sums of no terms
    const uint64_t zero = 0;
    device.fill(call.buffers[2], static_cast<size_t>(batches * c.m * c.n * item), &zero, static_cast<size_t>(item),
                call.stream);
    return;
  }
  const int index = call.device.index();
  cl_command_queue queue = queueOf(index, call.stream);
  Place a{memOf(call.buffers[0]), elementOffset("matmul", call.buffers[0], item)};
  Place b{memOf(call.buffers[1]), elementOffset("matmul", call.buffers[1], item)};
  const Place out{memOf(call.buffers[2]), elementOffset("matmul", call.buffers[2], item)};
  simplifyBatch(c);
  KILN_CHECK(c.dtype != DType::f64 || devices()[static_cast<size_t>(index)].fp64, "matmul: {} has no f64 (cl_khr_fp64)",
             call.device.str());

#if KILN_HAVE_CLBLAST
  if (c.dtype == DType::f32 || c.dtype == DType::f64) {
    Scratch scratch{device, {}};
    std::optional<BlasLayout> la = blasLayout(c.m, c.k, c.aRowStride, c.aColStride);
    if (!la) {
      a = gatherOperand(call, queue, scratch, item, c.batch, c.aBatchStrides, c.m, c.k, c.aRowStride, c.aColStride, a);
      la = blasLayout(c.m, c.k, c.aRowStride, c.aColStride);
    }
    std::optional<BlasLayout> lb = blasLayout(c.k, c.n, c.bRowStride, c.bColStride);
    if (!lb) {
      b = gatherOperand(call, queue, scratch, item, c.batch, c.bBatchStrides, c.k, c.n, c.bRowStride, c.bColStride, b);
      lb = blasLayout(c.k, c.n, c.bRowStride, c.bColStride);
    }
    // CLBlast's kernels take sizes, offsets and strides as int.
    const int64_t last =
        std::max({lastIndex(a, c.batch, c.aBatchStrides, c.m, c.k, c.aRowStride, c.aColStride),
                  lastIndex(b, c.batch, c.bBatchStrides, c.k, c.n, c.bRowStride, c.bColStride),
                  out.offset + batches * c.m * c.n, la->ld * std::max(c.m, c.k), lb->ld * std::max(c.k, c.n)});
    if (last <= INT_MAX) return enqueueClblast(c, queue, *la, *lb, a, b, out);
    return enqueueGemmKernel(index, queue, c, a, b, out);
  }
#endif
  enqueueGemmKernel(index, queue, c, a, b, out);
}

#else  // !KILN_HAVE_OPENCL

void matmul(const LibraryCall& call) {
  fail("matmul: {}: kiln was built without OpenCL (Debian ocl-icd-opencl-dev)", call.device.str());
}

#endif

}  // namespace kiln::runtime::opencl

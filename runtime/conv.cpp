// The CPU's convolution calls (runtime/conv.h): oneDNN's convolution
// primitives for f32 and bf16, kiln's direct loops for the rest.
//
// Note [Convolutions on the CPU]
// - oneDNN (Debian libdnnl-dev) runs f32 and bf16: a forward, a
//   backward-data (transpose) or a backward-weights primitive over kiln's
//   buffers as they are, described by their strides (plain NCHW, or
//   channels-last, which oneDNN's kernels read natively). Groups are the
//   weight's leading dim split in two ([G, O/G, C/G, KH, KW]); oneDNN's
//   dilation counts the gaps (kiln's dilation - 1).
// - Each distinct call (its encoded arguments and the thread count) gets a
//   primitive, made once and kept (up to kMaxKept, then made per call):
//   making one is where oneDNN JIT-compiles, so a new shape's first call
//   pays for it.
// - A call oneDNN can serve only with its reference implementation
//   ("ref:..."), or cannot describe (a stride of 0, a negative padding it
//   refuses), runs on kiln's direct loops instead, which are parallel over
//   kiln's pool. The choice depends on the call only, so eager and compiled
//   calls of one convolution take the same path.
// - oneDNN's OpenMP team on the calling thread is kiln's thread count: the
//   primitive is the parallelism (kiln's pool is idle during a library
//   call).
// - The direct loops accumulate in double and round once: the reference
//   the tests hold oneDNN and the OpenCL kernels to, and the path for f64
//   and f16.
#include "runtime/conv.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/error.h"
#include "runtime/numeric.h"
#include "runtime/onednn_matmul.h"
#include "runtime/thread_pool.h"

#ifdef KILN_HAVE_ONEDNN
#include "runtime/onednn.h"
#endif

namespace kiln::runtime {

namespace detail {
namespace {

template <typename T>
double at(const void* base, const std::array<int64_t, 4>& s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return static_cast<double>(static_cast<const T*>(base)[a * s[0] + b * s[1] + c * s[2] + d * s[3]]);
}

template <typename T>
void direct(const ConvCall& k, std::span<void* const> buffers) {
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  ThreadPool& pool = ThreadPool::instance();
  if (k.kind == ConvCall::Kind::forward) {  // x, w -> y
    const void *x = buffers[0], *w = buffers[1];
    T* y = static_cast<T*>(buffers[2]);
    pool.parallelFor(k.n * k.o, 1, [&](int64_t begin, int64_t end) {
      for (int64_t no = begin; no < end; ++no) {
        const int64_t n = no / k.o, o = no % k.o, g = o / og;
        for (int64_t i = 0; i < k.ho; ++i)
          for (int64_t j = 0; j < k.wo; ++j) {
            double acc = 0;
            for (int64_t cc = 0; cc < cg; ++cc)
              for (int64_t p = 0; p < k.kh; ++p) {
                const int64_t ih = i * k.strideH + p * k.dilationH - k.padTop;
                if (ih < 0 || ih >= k.h) continue;
                for (int64_t q = 0; q < k.kw; ++q) {
                  const int64_t iw = j * k.strideW + q * k.dilationW - k.padLeft;
                  if (iw < 0 || iw >= k.w) continue;
                  acc += at<T>(x, k.xStrides, n, g * cg + cc, ih, iw) * at<T>(w, k.wStrides, o, cc, p, q);
                }
              }
            y[((n * k.o + o) * k.ho + i) * k.wo + j] = static_cast<T>(acc);
          }
      }
    });
  } else if (k.kind == ConvCall::Kind::transpose) {  // y, w -> x
    const void *y = buffers[0], *w = buffers[1];
    T* x = static_cast<T*>(buffers[2]);
    pool.parallelFor(k.n * k.c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        const int64_t n = nc / k.c, c = nc % k.c, g = c / cg, cc = c % cg;
        for (int64_t ih = 0; ih < k.h; ++ih)
          for (int64_t iw = 0; iw < k.w; ++iw) {
            double acc = 0;
            for (int64_t p = 0; p < k.kh; ++p) {
              const int64_t ti = ih + k.padTop - p * k.dilationH;
              if (ti < 0 || ti % k.strideH != 0 || ti / k.strideH >= k.ho) continue;
              for (int64_t q = 0; q < k.kw; ++q) {
                const int64_t tj = iw + k.padLeft - q * k.dilationW;
                if (tj < 0 || tj % k.strideW != 0 || tj / k.strideW >= k.wo) continue;
                for (int64_t oo = 0; oo < og; ++oo) {
                  const int64_t o = g * og + oo;
                  acc += at<T>(y, k.yStrides, n, o, ti / k.strideH, tj / k.strideW) * at<T>(w, k.wStrides, o, cc, p, q);
                }
              }
            }
            x[((n * k.c + c) * k.h + ih) * k.w + iw] = static_cast<T>(acc);
          }
      }
    });
  } else {  // x, y -> w
    const void *x = buffers[0], *y = buffers[1];
    T* w = static_cast<T*>(buffers[2]);
    pool.parallelFor(k.o * cg, 1, [&](int64_t begin, int64_t end) {
      for (int64_t oc = begin; oc < end; ++oc) {
        const int64_t o = oc / cg, cc = oc % cg, c = (o / og) * cg + cc;
        for (int64_t p = 0; p < k.kh; ++p)
          for (int64_t q = 0; q < k.kw; ++q) {
            double acc = 0;
            for (int64_t n = 0; n < k.n; ++n)
              for (int64_t i = 0; i < k.ho; ++i) {
                const int64_t ih = i * k.strideH + p * k.dilationH - k.padTop;
                if (ih < 0 || ih >= k.h) continue;
                for (int64_t j = 0; j < k.wo; ++j) {
                  const int64_t iw = j * k.strideW + q * k.dilationW - k.padLeft;
                  if (iw < 0 || iw >= k.w) continue;
                  acc += at<T>(x, k.xStrides, n, c, ih, iw) * at<T>(y, k.yStrides, n, o, i, j);
                }
              }
            w[((o * cg + cc) * k.kh + p) * k.kw + q] = static_cast<T>(acc);
          }
      }
    });
  }
}

#ifdef KILN_HAVE_ONEDNN
constexpr size_t kMaxKept = 1024;

/// A oneDNN primitive for one call, or none (the direct loops run it).
struct ConvPrimitive {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t x{}, w{}, y{}, scratch{};
  std::string implementation;
  ConvPrimitive() = default;
  ConvPrimitive(const ConvPrimitive&) = delete;
  ConvPrimitive& operator=(const ConvPrimitive&) = delete;
  ~ConvPrimitive() {
    if (primitive) dnnl_primitive_destroy(primitive);
  }
};

/// Destroys a primitive descriptor at the end of a scope.
struct PdGuard {
  dnnl_primitive_desc_t pd = nullptr;
  ~PdGuard() {
    if (pd) dnnl_primitive_desc_destroy(pd);
  }
};

std::unique_ptr<ConvPrimitive> makeConvPrimitive(const ConvCall& k) {
  auto p = std::make_unique<ConvPrimitive>();
  const dnnl_data_type_t dt = k.dtype == DType::bf16 ? dnnl_bf16 : dnnl_f32;
  // The written operand is contiguous; the read ones as the call says.
  std::array<int64_t, 4> xs = k.xStrides, ws = k.wStrides, ys = k.yStrides;
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  if (k.kind == ConvCall::Kind::forward) ys = contiguousStrides(k.n, k.o, k.ho, k.wo);
  if (k.kind == ConvCall::Kind::transpose) xs = contiguousStrides(k.n, k.c, k.h, k.w);
  if (k.kind == ConvCall::Kind::weightGrad) ws = contiguousStrides(k.o, cg, k.kh, k.kw);
  for (const auto* s : {&xs, &ws, &ys})
    for (int64_t v : *s)
      if (v <= 0) return p;  // a broadcast operand: not a oneDNN layout
  const dnnl_dims_t xd = {k.n, k.c, k.h, k.w}, yd = {k.n, k.o, k.ho, k.wo};
  const dnnl_dims_t xsd = {xs[0], xs[1], xs[2], xs[3]}, ysd = {ys[0], ys[1], ys[2], ys[3]};
  if (dnnl_memory_desc_init_by_strides(&p->x, 4, xd, dt, xsd) != dnnl_success ||
      dnnl_memory_desc_init_by_strides(&p->y, 4, yd, dt, ysd) != dnnl_success)
    return p;
  if (k.groups == 1) {
    const dnnl_dims_t wd = {k.o, k.c, k.kh, k.kw}, wsd = {ws[0], ws[1], ws[2], ws[3]};
    if (dnnl_memory_desc_init_by_strides(&p->w, 4, wd, dt, wsd) != dnnl_success) return p;
  } else {
    const dnnl_dims_t wd = {k.groups, og, cg, k.kh, k.kw}, wsd = {ws[0] * og, ws[0], ws[1], ws[2], ws[3]};
    if (dnnl_memory_desc_init_by_strides(&p->w, 5, wd, dt, wsd) != dnnl_success) return p;
  }
  const dnnl_dims_t strides = {k.strideH, k.strideW}, dilates = {k.dilationH - 1, k.dilationW - 1};
  const dnnl_dims_t padL = {k.padTop, k.padLeft}, padR = {k.padBottom(), k.padRight()};
  if (padR[0] < 0 || padR[1] < 0) return p;
  dnnl_convolution_desc_t forward;
  if (dnnl_dilated_convolution_forward_desc_init(&forward, dnnl_forward_training, dnnl_convolution_direct, &p->x, &p->w,
                                                 nullptr, &p->y, strides, dilates, padL, padR) != dnnl_success)
    return p;
  dnnl_primitive_attr_t attr = nullptr;
  KILN_DNNL("conv2d", dnnl_primitive_attr_create(&attr));
  KILN_DNNL("conv2d", dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  PdGuard forwardPd, pd;
  const bool made = [&] {
    if (dnnl_primitive_desc_create(&forwardPd.pd, &forward, attr, oneDnnEngine(), nullptr) != dnnl_success)
      return false;
    if (k.kind == ConvCall::Kind::forward) {
      std::swap(pd.pd, forwardPd.pd);
      return true;
    }
    dnnl_convolution_desc_t backward;
    const dnnl_status_t init =
        k.kind == ConvCall::Kind::transpose
            ? dnnl_dilated_convolution_backward_data_desc_init(&backward, dnnl_convolution_direct, &p->x, &p->w, &p->y,
                                                               strides, dilates, padL, padR)
            : dnnl_dilated_convolution_backward_weights_desc_init(&backward, dnnl_convolution_direct, &p->x, &p->w,
                                                                  nullptr, &p->y, strides, dilates, padL, padR);
    return init == dnnl_success &&
           dnnl_primitive_desc_create(&pd.pd, &backward, attr, oneDnnEngine(), forwardPd.pd) == dnnl_success;
  }();
  dnnl_primitive_attr_destroy(attr);
  if (!made) return p;
  p->implementation = oneDnnImplementation(pd.pd);
  if (p->implementation.rfind("ref", 0) == 0) return p;
  p->scratch = *dnnl_primitive_desc_query_md(pd.pd, dnnl_query_scratchpad_md, 0);
  KILN_DNNL("conv2d", dnnl_primitive_create(&p->primitive, pd.pd));
  return p;
}

/// The kept primitive of a call (made now if new), or a fresh one in
/// `owned` when kMaxKept are kept already.
const ConvPrimitive& convPrimitiveFor(const ConvCall& k, int threads, std::unique_ptr<ConvPrimitive>& owned) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::unique_ptr<ConvPrimitive>> kept;
  std::vector<int64_t> key = k.encode();
  key.push_back(threads);
  std::lock_guard lock(mutex);
  if (auto it = kept.find(key); it != kept.end()) return *it->second;
  if (kept.size() >= kMaxKept) {
    owned = makeConvPrimitive(k);
    return *owned;
  }
  return *kept.emplace(std::move(key), makeConvPrimitive(k)).first->second;
}

/// Runs the call on oneDNN; false, having written nothing, when oneDNN
/// has no implementation for it other than its reference one.
bool oneDnnConv(const ConvCall& k, std::span<void* const> buffers, int threads) {
  std::unique_ptr<ConvPrimitive> owned;
  const ConvPrimitive& p = convPrimitiveFor(k, threads, owned);
  if (!p.primitive) return false;
  ompThreadsForThisThread(threads);
  // Buffers by role: x, w, y.
  const void *x = nullptr, *w = nullptr, *y = nullptr;
  int xArg = DNNL_ARG_SRC, wArg = DNNL_ARG_WEIGHTS, yArg = DNNL_ARG_DST;
  if (k.kind == ConvCall::Kind::forward) {
    x = buffers[0], w = buffers[1], y = buffers[2];
  } else if (k.kind == ConvCall::Kind::transpose) {
    y = buffers[0], w = buffers[1], x = buffers[2];
    xArg = DNNL_ARG_DIFF_SRC, yArg = DNNL_ARG_DIFF_DST;
  } else {
    x = buffers[0], y = buffers[1], w = buffers[2];
    wArg = DNNL_ARG_DIFF_WEIGHTS, yArg = DNNL_ARG_DIFF_DST;
  }
  const size_t scratchBytes = dnnl_memory_desc_get_size(&p.scratch);
  const OneDnnMemory xm(p.x, x), wm(p.w, w), ym(p.y, y);
  std::optional<OneDnnMemory> sm;
  std::vector<dnnl_exec_arg_t> args = {{xArg, xm.get()}, {wArg, wm.get()}, {yArg, ym.get()}};
  if (scratchBytes > 0) {
    sm.emplace(p.scratch, oneDnnThreadScratch(scratchBytes));
    args.push_back({DNNL_ARG_SCRATCHPAD, sm->get()});
  }
  dnnl_stream_t stream = oneDnnThreadStream();
  KILN_DNNL("conv2d", dnnl_primitive_execute(p.primitive, stream, static_cast<int>(args.size()), args.data()));
  KILN_DNNL("conv2d", dnnl_stream_wait(stream));
  return true;
}
#endif

}  // namespace

void convDirect(const ConvCall& call, std::span<void* const> buffers) {
  switch (call.dtype) {
    case DType::f32: return direct<float>(call, buffers);
    case DType::f64: return direct<double>(call, buffers);
    case DType::f16: return direct<Half>(call, buffers);
    case DType::bf16: return direct<BFloat16>(call, buffers);
    default: KILN_ASSERT(false, "conv of {}", dtypeName(call.dtype));
  }
}

std::string convImplementation(const ConvCall& call) {
#ifdef KILN_HAVE_ONEDNN
  if (call.dtype == DType::f32 || call.dtype == DType::bf16) {
    std::unique_ptr<ConvPrimitive> owned;
    const ConvPrimitive& p = convPrimitiveFor(call, ThreadPool::instance().numThreads(), owned);
    if (p.primitive) return "onednn:" + p.implementation;
  }
#endif
  return "direct";
}

}  // namespace detail

void conv(const LibraryCall& call) {
  const ConvCall k = ConvCall::decode(call.args);
  KILN_ASSERT(call.buffers.size() == 3, "conv with {} buffers", call.buffers.size());
  void* ptrs[3];
  for (size_t i = 0; i < 3; ++i) ptrs[i] = hostAddress(call.buffers[i]);
  const std::span<void* const> buffers(ptrs, 3);
  const bool empty = k.n == 0 || k.c == 0 || k.o == 0 || k.h == 0 || k.w == 0 || k.ho == 0 || k.wo == 0;
#ifdef KILN_HAVE_ONEDNN
  if (!empty && (k.dtype == DType::f32 || k.dtype == DType::bf16) &&
      detail::oneDnnConv(k, buffers, ThreadPool::instance().numThreads()))
    return;
#endif
  (void)empty;
  detail::convDirect(k, buffers);
}

}  // namespace kiln::runtime

// Convolutions on oneDNN's primitives (runtime/conv.h, detail::oneDnnConv):
// the algorithms `onednn` and `onednn_blocked` of the choice (Note
// [Choosing a convolution algorithm] in runtime/conv.cpp).
//
// Note [Convolutions on oneDNN]
// - `onednn` describes kiln's buffers as they are, by their strides (plain
//   NCHW, or channels-last), and lets oneDNN pick a kernel for that layout:
//   for NCHW that is its im2col + GEMM kernel ("gemm:jit").
// - `onednn_blocked` lets oneDNN pick the layouts its direct kernels want
//   (format `any`: nChw16c-style blocks, or NHWC for brgconv) and reorders
//   the operands into thread-local scratch and the result back: two or
//   three passes over memory bought for a faster kernel.
// - Groups split the weight's leading dim in two ([G, O/G, C/G, KH, KW]);
//   oneDNN's dilation counts the gaps (kiln's dilation - 1); the bottom and
//   right padding are what the output size implies, negative where the
//   last rows are never read (oneDNN takes that).
// - A primitive is made once per call (its encoded arguments, the variant
//   and the thread count) and kept (up to kMaxKept, then made per call):
//   making one is where oneDNN JIT-compiles, so a new shape's first call
//   pays for it.
// - A variant oneDNN can serve only with its reference implementation
//   ("ref:...") or cannot describe (a stride of 0) is refused: the caller
//   runs another algorithm.
// - oneDNN's OpenMP team on the calling thread is kiln's thread count: the
//   primitive is the parallelism (kiln's pool idles during a library call).
#include "runtime/conv.h"

#ifdef KILN_HAVE_ONEDNN
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "runtime/onednn.h"
#include "runtime/onednn_matmul.h"
#endif

namespace kiln::runtime::detail {

#ifdef KILN_HAVE_ONEDNN
namespace {

constexpr size_t kMaxKept = 1024;

/// One operand of the primitive: as kiln holds it (`user`), as the kernel
/// reads or writes it (`inner`), and the reorder between them (null when
/// the two are one layout).
struct Operand {
  dnnl_memory_desc_t user{}, inner{};
  dnnl_primitive_t reorder = nullptr;
};

/// A oneDNN primitive for one call and variant, or none (refused).
struct ConvPrimitive {
  dnnl_primitive_t primitive = nullptr;
  Operand x, w, y;  // by role, whichever the call reads or writes
  dnnl_memory_desc_t scratch{};
  std::string implementation;
  ConvPrimitive() = default;
  ConvPrimitive(const ConvPrimitive&) = delete;
  ConvPrimitive& operator=(const ConvPrimitive&) = delete;
  ~ConvPrimitive() {
    if (primitive) dnnl_primitive_destroy(primitive);
    for (Operand* o : {&x, &w, &y})
      if (o->reorder) dnnl_primitive_destroy(o->reorder);
  }
};

/// Destroys a primitive descriptor at the end of a scope.
struct PdGuard {
  dnnl_primitive_desc_t pd = nullptr;
  ~PdGuard() {
    if (pd) dnnl_primitive_desc_destroy(pd);
  }
};

/// The user layouts of x, w and y: the read ones by the call's strides, the
/// written one contiguous. False when oneDNN cannot describe one.
bool userDescs(const ConvCall& k, dnnl_data_type_t dt, ConvPrimitive& p) {
  std::array<int64_t, 4> xs = k.xStrides, ws = k.wStrides, ys = k.yStrides;
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  if (k.kind == ConvCall::Kind::forward) ys = contiguousStrides(k.n, k.o, k.ho, k.wo);
  if (k.kind == ConvCall::Kind::transpose) xs = contiguousStrides(k.n, k.c, k.h, k.w);
  if (k.kind == ConvCall::Kind::weightGrad) ws = contiguousStrides(k.o, cg, k.kh, k.kw);
  for (const auto* s : {&xs, &ws, &ys})
    for (int64_t v : *s)
      if (v <= 0) return false;  // a broadcast operand: not a oneDNN layout
  const dnnl_dims_t xd = {k.n, k.c, k.h, k.w}, yd = {k.n, k.o, k.ho, k.wo};
  const dnnl_dims_t xsd = {xs[0], xs[1], xs[2], xs[3]}, ysd = {ys[0], ys[1], ys[2], ys[3]};
  if (dnnl_memory_desc_init_by_strides(&p.x.user, 4, xd, dt, xsd) != dnnl_success ||
      dnnl_memory_desc_init_by_strides(&p.y.user, 4, yd, dt, ysd) != dnnl_success)
    return false;
  if (k.groups == 1) {
    const dnnl_dims_t wd = {k.o, k.c, k.kh, k.kw}, wsd = {ws[0], ws[1], ws[2], ws[3]};
    return dnnl_memory_desc_init_by_strides(&p.w.user, 4, wd, dt, wsd) == dnnl_success;
  }
  const dnnl_dims_t wd = {k.groups, og, cg, k.kh, k.kw}, wsd = {ws[0] * og, ws[0], ws[1], ws[2], ws[3]};
  return dnnl_memory_desc_init_by_strides(&p.w.user, 5, wd, dt, wsd) == dnnl_success;
}

/// A reorder from `from` to `to`, or null when they are one layout.
dnnl_primitive_t makeReorder(const dnnl_memory_desc_t& from, const dnnl_memory_desc_t& to) {
  if (dnnl_memory_desc_equal(&from, &to)) return nullptr;
  PdGuard pd;
  KILN_DNNL("conv2d", dnnl_reorder_primitive_desc_create(&pd.pd, &from, oneDnnEngine(), &to, oneDnnEngine(), nullptr));
  dnnl_primitive_t r = nullptr;
  KILN_DNNL("conv2d", dnnl_primitive_create(&r, pd.pd));
  return r;
}

std::unique_ptr<ConvPrimitive> makeConvPrimitive(const ConvCall& k, bool blocked) {
  auto p = std::make_unique<ConvPrimitive>();
  const dnnl_data_type_t dt = k.dtype == DType::bf16 ? dnnl_bf16 : dnnl_f32;
  if (!userDescs(k, dt, *p)) return p;
  dnnl_memory_desc_t x = p->x.user, w = p->w.user, y = p->y.user;
  if (blocked) {
    if (dnnl_memory_desc_init_by_tag(&x, p->x.user.ndims, p->x.user.dims, dt, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&w, p->w.user.ndims, p->w.user.dims, dt, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&y, p->y.user.ndims, p->y.user.dims, dt, dnnl_format_tag_any) != dnnl_success)
      return p;
  }
  const dnnl_dims_t strides = {k.strideH, k.strideW}, dilates = {k.dilationH - 1, k.dilationW - 1};
  const dnnl_dims_t padL = {k.padTop, k.padLeft}, padR = {k.padBottom(), k.padRight()};
  dnnl_convolution_desc_t forward;
  if (dnnl_dilated_convolution_forward_desc_init(&forward, dnnl_forward_training, dnnl_convolution_direct, &x, &w,
                                                 nullptr, &y, strides, dilates, padL, padR) != dnnl_success)
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
            ? dnnl_dilated_convolution_backward_data_desc_init(&backward, dnnl_convolution_direct, &x, &w, &y, strides,
                                                               dilates, padL, padR)
            : dnnl_dilated_convolution_backward_weights_desc_init(&backward, dnnl_convolution_direct, &x, &w, nullptr,
                                                                  &y, strides, dilates, padL, padR);
    return init == dnnl_success &&
           dnnl_primitive_desc_create(&pd.pd, &backward, attr, oneDnnEngine(), forwardPd.pd) == dnnl_success;
  }();
  dnnl_primitive_attr_destroy(attr);
  if (!made) return p;
  p->implementation = oneDnnImplementation(pd.pd);
  if (p->implementation.rfind("ref", 0) == 0) return p;
  const bool fwd = k.kind == ConvCall::Kind::forward, data = k.kind == ConvCall::Kind::transpose;
  p->x.inner = *dnnl_primitive_desc_query_md(pd.pd, fwd || !data ? dnnl_query_src_md : dnnl_query_diff_src_md, 0);
  p->w.inner = *dnnl_primitive_desc_query_md(
      pd.pd, k.kind == ConvCall::Kind::weightGrad ? dnnl_query_diff_weights_md : dnnl_query_weights_md, 0);
  p->y.inner = *dnnl_primitive_desc_query_md(pd.pd, fwd ? dnnl_query_dst_md : dnnl_query_diff_dst_md, 0);
  // Reorders: into the kernel's layout for what the call reads, back for
  // what it writes.
  p->x.reorder = data ? makeReorder(p->x.inner, p->x.user) : makeReorder(p->x.user, p->x.inner);
  p->w.reorder =
      k.kind == ConvCall::Kind::weightGrad ? makeReorder(p->w.inner, p->w.user) : makeReorder(p->w.user, p->w.inner);
  p->y.reorder = fwd ? makeReorder(p->y.inner, p->y.user) : makeReorder(p->y.user, p->y.inner);
  p->scratch = *dnnl_primitive_desc_query_md(pd.pd, dnnl_query_scratchpad_md, 0);
  KILN_DNNL("conv2d", dnnl_primitive_create(&p->primitive, pd.pd));
  return p;
}

/// The kept primitive of a call and variant (made now if new), or a fresh
/// one in `owned` when kMaxKept are kept already.
const ConvPrimitive& convPrimitiveFor(const ConvCall& k, bool blocked, int threads,
                                      std::unique_ptr<ConvPrimitive>& owned) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::unique_ptr<ConvPrimitive>> kept;
  std::vector<int64_t> key = k.encode();
  key.push_back(threads);
  key.push_back(blocked ? 1 : 0);
  std::lock_guard lock(mutex);
  if (auto it = kept.find(key); it != kept.end()) return *it->second;
  if (kept.size() >= kMaxKept) {
    owned = makeConvPrimitive(k, blocked);
    return *owned;
  }
  return *kept.emplace(std::move(key), makeConvPrimitive(k, blocked)).first->second;
}

void execute(dnnl_primitive_t primitive, std::vector<dnnl_exec_arg_t> args) {
  dnnl_stream_t stream = oneDnnThreadStream();
  KILN_DNNL("conv2d", dnnl_primitive_execute(primitive, stream, static_cast<int>(args.size()), args.data()));
  KILN_DNNL("conv2d", dnnl_stream_wait(stream));
}

}  // namespace

bool oneDnnConv(const ConvCall& k, bool blocked, std::span<void* const> buffers, int threads) {
  std::unique_ptr<ConvPrimitive> owned;
  const ConvPrimitive& p = convPrimitiveFor(k, blocked, threads, owned);
  if (!p.primitive) return false;
  ompThreadsForThisThread(threads);
  // Buffers by role, and which one the call writes.
  void *x = nullptr, *w = nullptr, *y = nullptr;
  int xArg = DNNL_ARG_SRC, wArg = DNNL_ARG_WEIGHTS, yArg = DNNL_ARG_DST;
  const Operand* written = nullptr;
  if (k.kind == ConvCall::Kind::forward) {
    x = buffers[0], w = buffers[1], y = buffers[2], written = &p.y;
  } else if (k.kind == ConvCall::Kind::transpose) {
    y = buffers[0], w = buffers[1], x = buffers[2], written = &p.x;
    xArg = DNNL_ARG_DIFF_SRC, yArg = DNNL_ARG_DIFF_DST;
  } else {
    x = buffers[0], y = buffers[1], w = buffers[2], written = &p.w;
    wArg = DNNL_ARG_DIFF_WEIGHTS, yArg = DNNL_ARG_DIFF_DST;
  }
  // Each operand's memory as the kernel sees it: the user's buffer, or a
  // scratch slot its reorder fills (or the kernel fills, for the written one).
  std::vector<std::unique_ptr<OneDnnMemory>> keep;
  auto inner = [&](const Operand& o, void* user, int slot) -> dnnl_memory_t {
    keep.push_back(std::make_unique<OneDnnMemory>(o.user, user));
    dnnl_memory_t userMemory = keep.back()->get();
    if (!o.reorder) return userMemory;
    keep.push_back(
        std::make_unique<OneDnnMemory>(o.inner, oneDnnThreadScratch(dnnl_memory_desc_get_size(&o.inner), slot)));
    dnnl_memory_t innerMemory = keep.back()->get();
    if (&o != written) execute(o.reorder, {{DNNL_ARG_FROM, userMemory}, {DNNL_ARG_TO, innerMemory}});
    return innerMemory;
  };
  const dnnl_memory_t xm = inner(p.x, x, 1), wm = inner(p.w, w, 2), ym = inner(p.y, y, 3);
  std::vector<dnnl_exec_arg_t> args = {{xArg, xm}, {wArg, wm}, {yArg, ym}};
  const size_t scratchBytes = dnnl_memory_desc_get_size(&p.scratch);
  if (scratchBytes > 0) {
    keep.push_back(std::make_unique<OneDnnMemory>(p.scratch, oneDnnThreadScratch(scratchBytes, 0)));
    args.push_back({DNNL_ARG_SCRATCHPAD, keep.back()->get()});
  }
  execute(p.primitive, args);
  if (written->reorder) {
    const dnnl_memory_t writtenInner = written == &p.x ? xm : written == &p.w ? wm : ym;
    const OneDnnMemory userMemory(written->user, written == &p.x ? x : written == &p.w ? w : y);
    execute(written->reorder, {{DNNL_ARG_FROM, writtenInner}, {DNNL_ARG_TO, userMemory.get()}});
  }
  return true;
}

std::string oneDnnConvImplementation(const ConvCall& k, bool blocked, int threads) {
  std::unique_ptr<ConvPrimitive> owned;
  const ConvPrimitive& p = convPrimitiveFor(k, blocked, threads, owned);
  return p.primitive ? p.implementation : "";
}

#else

bool oneDnnConv(const ConvCall&, bool, std::span<void* const>, int) { return false; }
std::string oneDnnConvImplementation(const ConvCall&, bool, int) { return ""; }

#endif

}  // namespace kiln::runtime::detail

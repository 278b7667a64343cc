// Note [Native bf16 products]
// Without it a bf16 product converts both operands to f32, calls sgemm and
// rounds each result once (runtime/blas.cpp). On a CPU with AVX512-BF16
// (Zen 4, Cooper Lake and later Xeons) oneDNN's matmul primitive multiplies
// bf16 directly (vdpbf16ps, f32 accumulation, one rounding per result: the
// same contract), at about twice sgemm's rate on this Zen 4 for the MLP's
// shapes, and without the conversions' passes over memory. Whether to use
// it is the machine's choice by measurement, as the f32 BLAS's is (Note
// [Choosing the BLAS] in codegen/blas_choice.cpp): on a CPU without the
// instructions oneDNN falls back to slower kernels and converting wins.
//
// - Each distinct layout (sizes and strides of the block) gets a primitive,
//   made once and kept for the process (up to kMaxKept; past that one is
//   made and dropped per call, so the result never depends on what was
//   kept). oneDNN JIT-compiles its kernels when a primitive is made, so
//   that is the cost of a first call of a new shape.
// - A layout oneDNN can only serve with its reference implementation
//   ("ref:..."), or cannot describe (a stride of 0), is refused, and the
//   caller converts: the answer depends on the layout only, so eager and
//   compiled calls of one product take the same path (Note [Eager equals
//   compiled]).
// - Scratch memory is the caller's (a thread-local buffer), not oneDNN's
//   global one, so that kiln's pool threads may run one primitive at once.
// - Each calling thread's OpenMP team is one thread (kiln's pool splits
//   the product), as for oneDNN's sgemm.
#include "runtime/onednn_matmul.h"

#include <dlfcn.h>
#ifdef KILN_HAVE_ONEDNN
#include "runtime/onednn.h"
#endif

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace kiln::runtime::detail {

void ompThreadsForThisThread(int threads) {
  thread_local int set = 0;
  if (set == threads) return;
  // Found in the process, where libdnnl's libgomp put it, so that kiln
  // does not build with -fopenmp; omp_set_num_threads is per thread.
  using SetFn = void (*)(int);
  static const auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (fn) fn(threads);
  set = threads;
}

#ifdef KILN_HAVE_ONEDNN
namespace {

constexpr size_t kMaxKept = 1024;

/// A primitive for one layout, or none (refused: the caller converts).
struct Primitive {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{}, scratch{};
  std::string implementation;
  Primitive() = default;
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;
  ~Primitive() {
    if (primitive) dnnl_primitive_destroy(primitive);
  }
};

using Layout = std::array<int64_t, 8>;  // m, n, k, ars, acs, brs, bcs, ldc

std::unique_ptr<Primitive> makePrimitive(const Layout& l) {
  auto p = std::make_unique<Primitive>();
  const auto [m, n, k, ars, acs, brs, bcs, ldc] = l;
  if (ars <= 0 || acs <= 0 || brs <= 0 || bcs <= 0) return p;  // broadcast operands: not a oneDNN layout
  const dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n};
  const dnnl_dims_t as = {ars, acs}, bs = {brs, bcs}, cs = {ldc, 1};
  if (dnnl_memory_desc_init_by_strides(&p->a, 2, ad, dnnl_bf16, as) != dnnl_success ||
      dnnl_memory_desc_init_by_strides(&p->b, 2, bd, dnnl_bf16, bs) != dnnl_success ||
      dnnl_memory_desc_init_by_strides(&p->c, 2, cd, dnnl_bf16, cs) != dnnl_success)
    return p;
  dnnl_matmul_desc_t desc;
  if (dnnl_matmul_desc_init(&desc, &p->a, &p->b, nullptr, &p->c) != dnnl_success) return p;
  dnnl_primitive_attr_t attr = nullptr;
  KILN_DNNL("matmul", dnnl_primitive_attr_create(&attr));
  KILN_DNNL("matmul", dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
  dnnl_primitive_desc_t pd = nullptr;
  const dnnl_status_t made = dnnl_primitive_desc_create(&pd, &desc, attr, oneDnnEngine(), nullptr);
  dnnl_primitive_attr_destroy(attr);
  if (made != dnnl_success) return p;
  p->implementation = oneDnnImplementation(pd);
  if (p->implementation.rfind("ref", 0) != 0) {
    p->scratch = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    KILN_DNNL("matmul", dnnl_primitive_create(&p->primitive, pd));
  }
  dnnl_primitive_desc_destroy(pd);
  return p;
}

/// The kept primitive of `l` (made now if new), or a fresh one in `owned`
/// when kMaxKept are kept already.
const Primitive& primitiveFor(const Layout& l, std::unique_ptr<Primitive>& owned) {
  static std::mutex mutex;
  static std::map<Layout, std::unique_ptr<Primitive>> kept;
  std::lock_guard lock(mutex);
  if (auto it = kept.find(l); it != kept.end()) return *it->second;
  if (kept.size() >= kMaxKept) {
    owned = makePrimitive(l);
    return *owned;
  }
  return *kept.emplace(l, makePrimitive(l)).first->second;
}

}  // namespace

bool oneDnnBf16Matmul(const void* a, int64_t ars, int64_t acs, const void* b, int64_t brs, int64_t bcs, void* c,
                      int64_t ldc, int64_t m, int64_t n, int64_t k, int threads) {
  // A size-1 dim's stride is arbitrary; give it a valid one.
  if (m == 1) ars = k * std::max<int64_t>(acs, 1);
  if (k == 1) acs = 1, brs = n * std::max<int64_t>(bcs, 1);
  if (n == 1) bcs = 1;
  if (m == 1) ldc = n;
  std::unique_ptr<Primitive> owned;
  const Primitive& p = primitiveFor({m, n, k, ars, acs, brs, bcs, ldc}, owned);
  if (!p.primitive) return false;
  ompThreadsForThisThread(threads);
  const size_t scratchBytes = dnnl_memory_desc_get_size(&p.scratch);
  const OneDnnMemory am(p.a, a), bm(p.b, b), cm(p.c, c);
  std::optional<OneDnnMemory> sm;
  std::vector<dnnl_exec_arg_t> args = {
      {DNNL_ARG_SRC, am.get()}, {DNNL_ARG_WEIGHTS, bm.get()}, {DNNL_ARG_DST, cm.get()}};
  if (scratchBytes > 0) {
    sm.emplace(p.scratch, oneDnnThreadScratch(scratchBytes));
    args.push_back({DNNL_ARG_SCRATCHPAD, sm->get()});
  }
  dnnl_stream_t stream = oneDnnThreadStream();
  KILN_DNNL("matmul", dnnl_primitive_execute(p.primitive, stream, static_cast<int>(args.size()), args.data()));
  KILN_DNNL("matmul", dnnl_stream_wait(stream));
  return true;
}

const char* oneDnnBf16Implementation(int64_t m, int64_t n, int64_t k) {
  std::unique_ptr<Primitive> owned;
  const Primitive& p = primitiveFor({m, n, k, k, 1, n, 1, n}, owned);
  static thread_local std::string copy;
  copy = p.implementation.empty() ? "none" : p.implementation;
  return copy.c_str();
}

#else

bool oneDnnBf16Matmul(const void*, int64_t, int64_t, const void*, int64_t, int64_t, void*, int64_t, int64_t, int64_t,
                      int64_t, int) {
  return false;
}

const char* oneDnnBf16Implementation(int64_t, int64_t, int64_t) { return ""; }

#endif

}  // namespace kiln::runtime::detail

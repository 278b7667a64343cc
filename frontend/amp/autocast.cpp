// The autocast state (frontend/amp/autocast.h) and the casts it makes
// (frontend/amp/autocast_policy.h): per thread, one optional dtype per
// device type, the nesting depth of scopes and the weight cache.
//
// Note [Autocast weight cache]
// A parameter used by several low-precision ops in a scope (a weight tied
// in two places, every micro-batch of a scope around a loop) would be cast
// again by each. As PyTorch's cached_cast does, the low-precision copy of
// an f32 leaf that requires grad is kept, keyed by the leaf, until the
// outermost scope closes. Two things PyTorch does not check are part of
// the key here: the leaf's version (an optimizer step inside the scope
// changes the weight in place; the stale copy would be wrong) and the trace
// the copy belongs to (a copy made while kiln::compile traces is a value of
// that trace only). Copies are made only with grad mode on, so that a copy
// without a gradient path is never handed to an op that records one.
#include "frontend/amp/autocast.h"

#include <fmt/format.h>

#include <unordered_map>
#include <vector>

#include "frontend/amp/autocast_policy.h"
#include "frontend/autograd/grad_mode.h"
#include "frontend/trace.h"
#include "ir/graph.h"
#include "runtime/error.h"

namespace kiln {

namespace {
struct CacheEntry {
  Tensor leaf;  ///< kept alive, so that its address is not reused while cached
  uint64_t version = 0;
  DType dtype = DType::f32;
  const detail::TraceState* trace = nullptr;
  Tensor copy;
};

struct AutocastState {
  std::array<std::optional<DType>, 3> dtype;  ///< per DeviceType; none: off
  int enabledCount = 0;                       ///< device types with a dtype
  int nesting = 0;                            ///< scopes open, enabled or not
  std::unordered_map<const TensorImpl*, CacheEntry> cache;
  detail::AutocastCacheStats stats;

  void set(DeviceType type, std::optional<DType> d) {
    auto& slot = dtype[static_cast<size_t>(type)];
    enabledCount += (d.has_value() ? 1 : 0) - (slot.has_value() ? 1 : 0);
    slot = d;
  }
};

AutocastState& state() {
  thread_local AutocastState s;
  return s;
}
}  // namespace

AutocastGuard::AutocastGuard(DeviceType type, DType dtype, bool enabled) : type_(type) {
  KILN_CHECK(dtype == DType::f16 || dtype == DType::bf16,
             "autocast: expected dtype f16 or bf16 for device type {}, got {}", deviceTypeName(type), dtypeName(dtype));
  AutocastState& s = state();
  previous_ = s.dtype[static_cast<size_t>(type)];
  s.set(type, enabled ? std::optional(dtype) : std::nullopt);
  s.nesting++;
}

AutocastGuard::~AutocastGuard() {
  AutocastState& s = state();
  s.set(type_, previous_);
  if (--s.nesting == 0) s.cache.clear();
}

bool isAutocastEnabled(DeviceType type) { return state().dtype[static_cast<size_t>(type)].has_value(); }

std::optional<DType> autocastDType(DeviceType type) { return state().dtype[static_cast<size_t>(type)]; }

namespace detail {

AutocastDTypes autocastDTypes() { return state().dtype; }

AutocastStateGuard::AutocastStateGuard(const AutocastDTypes& to) {
  AutocastState& s = state();
  saved_ = s.dtype;
  for (size_t i = 0; i < to.size(); ++i) s.set(static_cast<DeviceType>(i), to[i]);
  s.nesting++;
}

AutocastStateGuard::~AutocastStateGuard() {
  AutocastState& s = state();
  for (size_t i = 0; i < saved_.size(); ++i) s.set(static_cast<DeviceType>(i), saved_[i]);
  if (--s.nesting == 0) s.cache.clear();
}

std::string autocastSignature() {
  std::string out;
  const AutocastState& s = state();
  for (size_t i = 0; i < s.dtype.size(); ++i)
    if (s.dtype[i])
      out += fmt::format("{}{}:{}", out.empty() ? "" : ",", deviceTypeName(static_cast<DeviceType>(i)),
                         dtypeName(*s.dtype[i]));
  return out;
}

AutocastCacheStats autocastCacheStats() { return state().stats; }

namespace {
// Note [Parameter casts come first]
// A traced cast of a parameter (a graph input: the eager leaf as it was
// captured) reads nothing the program computes, so it may run first. It is
// put first: traced where the layer is, between the previous layer's matmul
// and the bias-activation kernel fused after it, it would keep that kernel
// from being the matmul's epilogue (Note [Matmul epilogues in compiled
// programs] in codegen/compile_graph.cpp: an epilogue comes right after
// its matmul), one kernel and one pass over the product more per layer.
void hoistToTheTop(ir::Graph& graph, ir::Node* cast) {
  if (!cast || cast->op() != ir::Op::cast || cast->input(0)->node()) return;  // reads a computed value: stays
  std::vector<ir::Node*> order = graph.nodes();
  std::erase(order, cast);
  order.insert(order.begin(), cast);
  graph.reorder(order);
}
}  // namespace

bool anyAutocast() { return state().enabledCount > 0; }

Tensor autocastArg(const Tensor& t, CastPolicy policy) {
  AutocastState& s = state();
  if (policy == CastPolicy::none || s.enabledCount == 0 || !t.defined()) return t;
  const std::optional<DType> low = s.dtype[static_cast<size_t>(t.device().type())];
  if (!low || !isFloatingPoint(t.dtype()) || t.dtype() == DType::f64) return t;  // PyTorch's is_eligible
  const DType want = policy == CastPolicy::f32 ? DType::f32 : *low;
  if (t.dtype() == want) return t;
  // Note [Autocast weight cache]
  const bool cacheable = policy == CastPolicy::lowerPrecision && t.dtype() == DType::f32 && t.requiresGrad() &&
                         t.isLeaf() && !t.isTraced();
  if (!cacheable) return t.to(want);
  const TraceState* trace = TraceState::current();
  auto it = s.cache.find(t.impl());
  if (it != s.cache.end() && it->second.version == t.version() && it->second.dtype == want &&
      it->second.trace == trace) {
    s.stats.hits++;
    return it->second.copy;
  }
  Tensor copy = t.to(want);
  if (trace && copy.isTraced()) hoistToTheTop(*trace->graph, copy.impl()->traced->node());
  if (isGradEnabled()) {
    s.cache[t.impl()] = CacheEntry{t, t.version(), want, trace, copy};
    s.stats.casts++;
  }
  return copy;
}

}  // namespace detail
}  // namespace kiln

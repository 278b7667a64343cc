// nn::DistributedDataParallel (frontend/nn/ddp.h) and its Reducer, after
// PyTorch's torch/csrc/distributed/c10d/reducer.cpp.
//
// Buckets: the parameters, in reverse registration order (backward produces
// the last layers' gradients first), go into the open bucket of their dtype
// and device; a bucket closes once it reaches its cap (it can overshoot).
// Each bucket is one flat tensor; a parameter owns a slice of it.
//
// An iteration: forward (outside noSync) resets the per-iteration state
// and, with findUnusedParameters, walks the autograd graph from the output
// to mark the parameters it cannot reach as ready with zero gradients and
// starts the all-reduce of the bitmap of used parameters. The post-
// accumulate-grad hook of each parameter copies grad / worldSize into its
// slice; a bucket whose parameters are all ready is launched, but only
// after every bucket before it, so the all-reduces are issued in the same
// order on every rank. The first hook queues finalize() at the end of the
// backward: it checks that every parameter was ready (else an error naming
// those that were not), waits for the buckets in order and writes each
// slice into its parameter's .grad (a new tensor).
//
// Note [DDP inside kiln::compile]
// Traced (a training step under kiln::compile), the same hooks run while
// the backward pass is traced, and build the same computation out of graph
// ops instead: a ready bucket is the cat of its gradients, flattened, times
// 1/worldSize (the values the eager copy and scale give, bit for bit), and
// its all-reduce is ProcessGroup::allReduced, an `all_reduce` node; each
// .grad becomes a slice of that node's result. The program then starts
// each bucket's all-reduce as soon as its cat is computed and waits for it
// just before the optimizer first reads it (Note [Scheduling collectives]
// in codegen/lowering_collective.cpp), so communication overlaps the rest
// of the backward kernels. The buckets are the eager ones, in the same
// order. The program is guarded on whether gradients are synchronized
// (noSync), so a step traced with sync does not run without it.
// findUnusedParameters is refused inside kiln::compile: its bitmap is read
// on the host during backward.
#include "frontend/nn/ddp.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <unordered_set>

#include "frontend/autograd/grad_mode.h"
#include "frontend/autograd/hooks.h"
#include "frontend/autograd/node.h"
#include "frontend/ops.h"
#include "frontend/per_call.h"
#include "frontend/trace.h"
#include "runtime/error.h"

namespace kiln::nn {

namespace detail {

struct Bucket {
  Tensor flat;                   ///< the parameters' gradients, one after the other
  std::vector<size_t> params;    ///< indices into Reducer::params
  std::vector<int64_t> offsets;  ///< where each one starts in `flat`
  size_t pending = 0;            ///< parameters not yet ready this iteration
  dist::Work work;               ///< the all-reduce, once launched
  bool launched = false;
  Tensor traced;                 ///< traced: the all-reduce's result (Note [DDP inside kiln::compile])
};

struct Reducer {
  dist::ProcessGroup group;
  DistributedDataParallelOptions options;
  std::vector<Tensor> params;
  std::vector<std::string> names;
  std::vector<std::pair<size_t, int64_t>> slot;  ///< param -> (bucket, offset)
  std::vector<Bucket> buckets;
  std::vector<uint64_t> hookIds;

  // Per iteration.
  bool syncEnabled = true;
  bool prepared = false;  ///< forward (or the first hook) reset the state
  bool callbackQueued = false;
  std::vector<bool> ready;
  size_t nextLaunch = 0;
  int64_t iteration = 0;
  Tensor usedBitmap;  ///< findUnusedParameters: 1 where used, all-reduced
  dist::Work bitmapWork;
  std::vector<Tensor> tracedGrads;  ///< traced: each parameter's gradient, flattened

  static bool tracing() { return ::kiln::detail::TraceState::current() != nullptr; }

  Tensor slice(size_t p) const {
    const auto [b, offset] = slot[p];
    return buckets[b].flat.narrow(0, offset, params[p].numel());
  }

  void prepare() {
    // An iteration whose backward failed may have left all-reduces running
    // into the buckets: they finish before the buckets are reused.
    for (Bucket& b : buckets)
      if (b.launched && b.work.impl() && !b.work.isCompleted()) b.work.wait();
    callbackQueued = false;
    for (Bucket& b : buckets) {
      b.pending = b.params.size();
      b.launched = false;
      b.work = dist::Work();
      b.traced = Tensor();
    }
    tracedGrads.assign(params.size(), Tensor());
    ready.assign(params.size(), false);
    nextLaunch = 0;
    usedBitmap = Tensor();
    bitmapWork = dist::Work();
    prepared = true;
  }

  void markReady(size_t p, const Tensor* grad) {
    KILN_CHECK(
        !ready[p],
        "DistributedDataParallel: parameter '{}' got a second gradient in iteration {} (forward found it unused, "
        "or backward accumulated into it twice)",
        names[p], iteration);
    ready[p] = true;
    if (tracing()) {
      KILN_ASSERT(grad != nullptr, "DistributedDataParallel: a traced parameter without a gradient");
      tracedGrads[p] = grad->reshape({params[p].numel()});
      --buckets[slot[p].first].pending;
      return;
    }
    Tensor s = slice(p);
    if (grad) {
      s.copy_(grad->reshape({params[p].numel()}));
      s.mul_(1.0 / group.size());
    } else {
      s.zero_();
    }
    --buckets[slot[p].first].pending;
  }

  /// Launches the ready buckets that every bucket before has been launched.
  void launchReady() {
    while (nextLaunch < buckets.size() && buckets[nextLaunch].pending == 0) {
      Bucket& b = buckets[nextLaunch++];
      b.launched = true;
      if (tracing()) {
        std::vector<Tensor> parts;
        for (size_t p : b.params) parts.push_back(tracedGrads[p]);
        b.traced = group.allReduced(mul(cat(parts, 0), 1.0 / group.size()), dist::ReduceOp::sum);
        continue;
      }
      b.work = group.allReduce(b.flat, dist::ReduceOp::sum);
    }
  }

  void onGradient(size_t p, const Tensor& leaf) {
    if (!syncEnabled) return;  // noSync: the gradient stays in .grad
    if (!prepared) {
      KILN_CHECK(!options.findUnusedParameters,
                 "DistributedDataParallel: backward without a forward through the module (findUnusedParameters "
                 "needs forward to find the unused parameters); call forward on the DistributedDataParallel");
      prepare();
    }
    if (!callbackQueued) {
      callbackQueued = true;
      autograd::queueCallback([this] { finalize(); });
    }
    const Tensor grad = leaf.grad();
    markReady(p, &grad);
    launchReady();
  }

  void waitLaunched() {
    for (Bucket& b : buckets)
      if (b.launched && b.work.impl()) b.work.wait();
  }

  void finalize() {
    callbackQueued = false;
    prepared = false;
    const int64_t it = iteration++;
    std::vector<std::string> missing;
    for (size_t p = 0; p < params.size(); ++p)
      if (!ready[p]) missing.push_back(names[p]);
    if (!missing.empty() && !options.findUnusedParameters) {
      // The launched all-reduces are matched on the other ranks when they
      // miss the same parameters (the usual case): let them finish.
      waitLaunched();
      ::kiln::fail(
          "DistributedDataParallel: {} parameter(s) received no gradient in iteration {} on rank {}: {}; if forward "
          "does not use every parameter, construct DistributedDataParallel with findUnusedParameters = true (its "
          "unused parameters then count as zero gradients)",
          missing.size(), it, group.rank(), fmt::join(missing, ", "));
    }
    // findUnusedParameters: reached in the graph but given no gradient.
    for (size_t p = 0; p < params.size(); ++p)
      if (!ready[p]) markReady(p, nullptr);
    launchReady();
    KILN_ASSERT(nextLaunch == buckets.size(), "DistributedDataParallel: bucket {} was not launched", nextLaunch);
    std::vector<float> used;
    if (options.findUnusedParameters) {
      bitmapWork.wait();
      used = usedBitmap.toVector();
    }
    waitLaunched();
    for (size_t p = 0; p < params.size(); ++p) {
      if (!used.empty() && used[p] == 0.0f) continue;  // unused on every rank: .grad as it was
      const auto [b, offset] = slot[p];
      const Tensor& flat = buckets[b].traced.defined() ? buckets[b].traced : buckets[b].flat;
      params[p].setGrad(flat.narrow(0, offset, params[p].numel()).view(params[p].shape()).clone());
    }
    // Traced values belong to the trace that is ending: not kept past it.
    tracedGrads.assign(params.size(), Tensor());
    for (Bucket& b : buckets) b.traced = Tensor();
  }

  /// findUnusedParameters: the parameters the graph of `output` reaches.
  void findUnused(const Tensor& output) {
    std::unordered_set<autograd::Node*> reached;
    std::vector<autograd::Node*> stack;
    if (output.requiresGrad()) {
      autograd::Edge e = autograd::gradientEdge(output);
      if (e.node && reached.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
    while (!stack.empty()) {
      autograd::Node* n = stack.back();
      stack.pop_back();
      for (const autograd::Edge& e : n->next)
        if (e.node && reached.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
    std::vector<float> used(params.size(), 0.0f);
    for (size_t p = 0; p < params.size(); ++p) {
      const auto& meta = params[p].impl()->autograd;
      std::shared_ptr<autograd::Node> acc = meta ? meta->accumulator.lock() : nullptr;
      if (acc && reached.contains(acc.get()))
        used[p] = 1.0f;
      else
        markReady(p, nullptr);
    }
    usedBitmap = fromVector(used, {static_cast<int64_t>(used.size())});
    bitmapWork = group.allReduce(usedBitmap, dist::ReduceOp::sum);
  }
};

namespace {

std::string shapeOf(const std::vector<int64_t>& code, size_t p) {
  constexpr size_t kWidth = 10;
  const int64_t* c = code.data() + p * kWidth;
  std::vector<int64_t> dims(c + 2, c + 2 + c[1]);
  return fmt::format("{}[{}]", dtypeName(static_cast<DType>(c[0])), fmt::join(dims, ","));
}

/// kiln::Error unless every rank has the parameters of rank 0 (count, then
/// dtype and shape of each, in order).
void checkSameParameters(const dist::ProcessGroup& group, const std::vector<Tensor>& params,
                         const std::vector<std::string>& names) {
  constexpr size_t kWidth = 10;  // dtype, rank, up to 8 dims
  std::vector<Tensor> counts;
  group.allGather(counts, fromVector(std::vector<int64_t>{static_cast<int64_t>(params.size())}, {1})).wait();
  for (int r = 1; r < group.size(); ++r) {
    const int64_t n = counts[static_cast<size_t>(r)].toVector<int64_t>()[0];
    KILN_CHECK(n == counts[0].toVector<int64_t>()[0],
               "DistributedDataParallel: rank {} has {} parameters, rank 0 has {}", r, n,
               counts[0].toVector<int64_t>()[0]);
  }
  std::vector<int64_t> code(params.size() * kWidth, 0);
  for (size_t p = 0; p < params.size(); ++p) {
    const Shape& shape = params[p].shape();
    KILN_CHECK(shape.size() <= kWidth - 2,
               "DistributedDataParallel: parameter '{}' has {} dims, at most {} are supported", names[p], shape.size(),
               kWidth - 2);
    code[p * kWidth] = static_cast<int64_t>(params[p].dtype());
    code[p * kWidth + 1] = static_cast<int64_t>(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) code[p * kWidth + 2 + d] = shape[d];
  }
  std::vector<Tensor> all;
  group.allGather(all, fromVector(code, {static_cast<int64_t>(code.size())})).wait();
  const std::vector<int64_t> first = all[0].toVector<int64_t>();
  for (int r = 1; r < group.size(); ++r) {
    const std::vector<int64_t> other = all[static_cast<size_t>(r)].toVector<int64_t>();
    for (size_t p = 0; p < params.size(); ++p)
      KILN_CHECK(std::equal(first.begin() + p * kWidth, first.begin() + (p + 1) * kWidth, other.begin() + p * kWidth),
                 "DistributedDataParallel: parameter {} '{}' is {} on rank {} but {} on rank 0 (every rank must "
                 "build the same model)",
                 p, names[p], shapeOf(other, p), r, shapeOf(first, p));
  }
}

}  // namespace

}  // namespace detail

DistributedDataParallelImpl::DistributedDataParallelImpl(std::shared_ptr<Module> module,
                                                         DistributedDataParallelOptions options)
    : Module("DistributedDataParallel"), module_(std::move(module)) {
  // Made inside kiln::compile, its checks and broadcasts still run now,
  // once (Note [Initialization is eager] in frontend/nn/init.cpp).
  ::kiln::detail::EagerScope eager;
  KILN_CHECK(module_ != nullptr, "DistributedDataParallel: a null module");
  KILN_CHECK(options.bucketCapBytes > 0 && options.firstBucketCapBytes > 0,
             "DistributedDataParallel: bucket caps must be positive, got {} and {} bytes", options.firstBucketCapBytes,
             options.bucketCapBytes);
  registerModule("module", module_);
  auto r = std::make_shared<detail::Reducer>();
  r->group = options.processGroup ? *options.processGroup : dist::defaultGroup();
  KILN_CHECK(r->group.isMember(), "DistributedDataParallel: this rank is not a member of the process group");
  r->options = std::move(options);
  for (const auto& [name, p] : module_->namedParameters()) {
    if (!p.requiresGrad()) continue;
    r->names.push_back(name);
    r->params.push_back(p);
  }
  detail::checkSameParameters(r->group, r->params, r->names);

  {
    NoGradGuard noGrad;
    for (const Tensor& p : module_->parameters()) {
      Tensor t = p.detach();
      r->group.broadcast(t, 0).wait();
    }
    for (const Tensor& b : module_->buffers()) {
      Tensor t = b.detach();
      r->group.broadcast(t, 0).wait();
    }
  }

  // Buckets: reverse order, one open bucket per dtype and device.
  std::map<std::string, detail::Bucket> open;
  std::vector<detail::Bucket> closed;
  std::map<std::string, int64_t> openBytes;
  r->slot.resize(r->params.size());
  auto close = [&](const std::string& key) {
    closed.push_back(std::move(open[key]));
    open.erase(key);
    openBytes.erase(key);
  };
  for (size_t i = r->params.size(); i-- > 0;) {
    const Tensor& p = r->params[i];
    const std::string key = fmt::format("{}/{}", dtypeName(p.dtype()), p.device().str());
    detail::Bucket& b = open[key];
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + r->params[b.params.back()].numel());
    b.params.push_back(i);
    openBytes[key] += p.numel() * static_cast<int64_t>(itemSize(p.dtype()));
    const int64_t cap = closed.empty() ? r->options.firstBucketCapBytes : r->options.bucketCapBytes;
    if (openBytes[key] >= cap) close(key);
  }
  while (!open.empty()) close(open.begin()->first);
  for (size_t k = 0; k < closed.size(); ++k) {
    detail::Bucket& b = closed[k];
    const Tensor& p0 = r->params[b.params[0]];
    b.flat = zeros({b.offsets.back() + r->params[b.params.back()].numel()}, p0.dtype(), p0.device());
    for (size_t j = 0; j < b.params.size(); ++j) r->slot[b.params[j]] = {k, b.offsets[j]};
  }
  r->buckets = std::move(closed);

  std::weak_ptr<detail::Reducer> weak = r;
  for (size_t i = 0; i < r->params.size(); ++i)
    r->hookIds.push_back(autograd::registerPostAccumulateGradHook(r->params[i], [weak, i](const Tensor& leaf) {
      if (auto reducer = weak.lock()) reducer->onGradient(i, leaf);
    }));
  reducer_ = std::move(r);
}

DistributedDataParallelImpl::~DistributedDataParallelImpl() {
  for (size_t i = 0; i < reducer_->params.size(); ++i)
    autograd::removePostAccumulateGradHook(reducer_->params[i], reducer_->hookIds[i]);
}

Tensor DistributedDataParallelImpl::forward(const Tensor& input) {
  Tensor out = module_->forward(input);
  detail::Reducer& r = *reducer_;
  if (::kiln::detail::TraceState* trace = ::kiln::detail::TraceState::current()) {
    // Note [DDP inside kiln::compile]
    KILN_CHECK(!(r.syncEnabled && r.options.findUnusedParameters),
               "DistributedDataParallel: findUnusedParameters is not supported inside kiln::compile (its bitmap of "
               "used parameters is read on the host during backward); compile a step whose forward uses every "
               "parameter, with findUnusedParameters = false, or run this one eagerly");
    std::weak_ptr<detail::Reducer> weak = reducer_;
    const bool sync = r.syncEnabled;
    trace->guard(fmt::format("DistributedDataParallel gradient sync is {}", sync ? "on" : "off (noSync)"),
                 [weak, sync] {
                   auto reducer = weak.lock();
                   return reducer && reducer->syncEnabled == sync;
                 });
  }
  if (r.syncEnabled && isGradEnabled()) {
    r.prepare();
    if (r.options.findUnusedParameters) r.findUnused(out);
  }
  return out;
}

DistributedDataParallelImpl::NoSyncGuard::NoSyncGuard(DistributedDataParallelImpl& ddp)
    : ddp_(ddp), outer_(ddp.reducer_->syncEnabled) {
  ddp_.reducer_->syncEnabled = false;
}

DistributedDataParallelImpl::NoSyncGuard::~NoSyncGuard() { ddp_.reducer_->syncEnabled = outer_; }

std::vector<std::vector<size_t>> DistributedDataParallelImpl::bucketAssignment() const {
  std::vector<std::vector<size_t>> out;
  for (const detail::Bucket& b : reducer_->buckets) out.push_back(b.params);
  return out;
}

size_t DistributedDataParallelImpl::bucketsLaunched() const { return reducer_->nextLaunch; }

}  // namespace kiln::nn

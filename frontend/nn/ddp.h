// nn::DistributedDataParallel: data parallelism as PyTorch's DDP and its
// Reducer (docs/distributed.md, "DistributedDataParallel"). Every rank holds
// a replica of the module; construction checks that the replicas have the
// same parameters and copies rank 0's parameters and buffers to the others.
// During backward each parameter's gradient, once accumulated, is copied
// (scaled by 1/world size) into its bucket; a full bucket starts its
// all-reduce at once, so communication overlaps the rest of backward. The
// end of backward waits for every bucket and writes the averages into .grad.
//
//   nn::DistributedDataParallel ddp(model, nn::DistributedDataParallelOptions{.processGroup = group});
//   kiln::optim::SGD opt(ddp->parameters(), {.lr = 0.1});
//   Tensor loss = mseLoss(ddp(x), y);   // forward through ddp
//   loss.backward();                    // gradients averaged over the ranks
//   opt.step();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/distributed.h"
#include "frontend/nn/module.h"

namespace kiln::nn {

struct DistributedDataParallelOptions {
  /// The group to average over; unset: dist::defaultGroup().
  std::optional<dist::ProcessGroup> processGroup;
  /// A bucket closes once it holds at least this many bytes (PyTorch's
  /// bucket_cap_mb, 25 MiB); the first one closes at `firstBucketCapBytes`
  /// so that communication starts early.
  int64_t bucketCapBytes = int64_t{25} << 20;
  int64_t firstBucketCapBytes = int64_t{1} << 20;
  /// Tolerate parameters that get no gradient in some iteration: forward
  /// finds them in the graph, and a bitmap of the parameters used on each
  /// rank is all-reduced (PyTorch's find_unused_parameters).
  bool findUnusedParameters = false;
};

namespace detail {
struct Reducer;
}

/// Wraps `module` (registered as submodule "module"); forward calls its
/// forward. Collectives: the construction's checks and broadcasts, then per
/// synchronized iteration (findUnusedParameters: a bitmap all-reduce at
/// forward, then) one all-reduce per bucket, in bucket order on every rank.
class DistributedDataParallelImpl : public Module {
 public:
  /// Checks that every rank has as many parameters as rank 0, with the same
  /// shapes and dtypes (kiln::Error naming the rank and the first parameter that
  /// differs) and broadcasts rank 0's parameters and buffers. Every rank of
  /// the group must construct it, at the same point.
  explicit DistributedDataParallelImpl(std::shared_ptr<Module> module, DistributedDataParallelOptions options = {});
  /// The same for a module held by a ModuleHolder (`nn::Linear(4, 8)`).
  template <typename Holder>
  requires requires(const Holder& h) { h.ptr(); }
  explicit DistributedDataParallelImpl(const Holder& module, DistributedDataParallelOptions options = {})
      : DistributedDataParallelImpl(std::static_pointer_cast<Module>(module.ptr()), std::move(options)) {}
  ~DistributedDataParallelImpl() override;

  /// The wrapped module's forward. Outside noSync() it starts a
  /// synchronized iteration: the next backward averages the gradients.
  Tensor forward(const Tensor& input) override;

  /// Turns gradient synchronization off while it lives (PyTorch's no_sync):
  /// backward only accumulates into .grad locally, and the first
  /// synchronized backward after it averages the accumulated sums.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallelImpl& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallelImpl& ddp_;
    bool outer_;
  };
  [[nodiscard]] NoSyncGuard noSync() { return NoSyncGuard(*this); }

  const std::shared_ptr<Module>& module() const { return module_; }
  /// The parameters' indices (in module()->parameters() order) of each
  /// bucket, in launch order.
  std::vector<std::vector<size_t>> bucketAssignment() const;
  /// How many buckets' all-reduces the current (or last) synchronized
  /// backward has started.
  size_t bucketsLaunched() const;

 private:
  std::shared_ptr<Module> module_;
  std::shared_ptr<detail::Reducer> reducer_;
};
KILN_MODULE(DistributedDataParallel);

}  // namespace kiln::nn

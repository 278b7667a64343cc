// kiln::dist: collectives on Tensors, shaped like torch.distributed. A
// ProcessGroup is a handle on a runtime process group
// (runtime/dist_process_group.h): its calls take tensors, check them
// (defined, eager, contiguous), write results into them in place and return
// a Work to wait on. Inside kiln::compile, all_reduce is a node of the
// program, run overlapped with the kernels around it; the other
// collectives are refused there. The default group is made by dist::init and used by the
// free functions, like torch.distributed's default group.
//
//   kiln::dist::init("gloo");   // rank and world from kiln-run / torchrun / mpirun / Slurm
//   kiln::Tensor g = kiln::ones({4});
//   kiln::dist::allReduce(g, kiln::dist::ReduceOp::sum).wait();   // g is 2 everywhere
//   kiln::dist::destroyProcessGroup();
//
// Ranks may be threads of one process: make one ProcessGroup per thread with
// ProcessGroup::create over a shared store (the tests do). Semantics,
// backends, timeouts and the signature check: docs/distributed.md.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "runtime/dist_process_group.h"
#include "runtime/dist_store.h"

namespace kiln::dist {

using runtime::dist::DebugLevel;
using runtime::dist::HashStore;
using runtime::dist::PrefixStore;
using runtime::dist::ReduceOp;
using runtime::dist::Store;

/// The handle of an asynchronous call (torch.distributed's Work).
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<runtime::dist::Work> impl) : impl_(std::move(impl)) {}
  /// Blocks until the call is done and rethrows its error; its results are
  /// then in the tensors, visible to work enqueued from now on on the
  /// current streams. Bounded: see runtime::dist::Work::wait.
  void wait() const;
  /// wait() for at most `timeout`: false when the call is still running.
  bool waitFor(std::chrono::milliseconds timeout) const;
  bool isCompleted() const;
  bool isSuccess() const;
  /// Its error once it failed (null while it runs or when it succeeded).
  std::exception_ptr exception() const;
  /// Its sequence number in its group (collectives: 1, 2, ... on every rank).
  uint64_t sequence() const;
  /// "all_reduce(f32[4], sum)".
  std::string description() const;
  const std::shared_ptr<runtime::dist::Work>& impl() const { return impl_; }

 private:
  std::shared_ptr<runtime::dist::Work> impl_;
};

struct Options {
  std::chrono::milliseconds timeout = runtime::dist::kDefaultTimeout;
  /// Gloo: the address to listen on (empty: GLOO_SOCKET_IFNAME, else the
  /// host name, else 127.0.0.1).
  std::string hostname;
  /// NCCL: the device (default cuda:(rank % device count)).
  std::optional<Device> device;
  /// Unset: KILN_DIST_DEBUG.
  std::optional<DebugLevel> debug;
  runtime::dist::ProcessGroupOptions runtimeOptions() const;
};

class ProcessGroup {
 public:
  /// A non-member handle: what newGroup gives ranks outside the new group.
  ProcessGroup() = default;
  explicit ProcessGroup(std::shared_ptr<runtime::dist::ProcessGroup> impl) : impl_(std::move(impl)) {}
  /// A group of `worldSize` ranks meeting through `store` ("gloo" or "nccl";
  /// blocks until every rank has joined, up to the timeout).
  static ProcessGroup create(const std::string& backend, std::shared_ptr<Store> store, int rank, int worldSize,
                             const Options& options = {});

  /// Whether this rank belongs to the group.
  bool isMember() const { return impl_ != nullptr; }
  int rank() const;
  int size() const;
  std::string backend() const;

  /// `tensor` reduced over every rank, in place. Inside kiln::compile it is
  /// an `all_reduce` node of the program (docs/distributed.md, "Compiled
  /// collectives") and the Work returned is complete: the program waits
  /// for the collective before the first step that reads its result.
  Work allReduce(Tensor& tensor, ReduceOp op = ReduceOp::sum) const;
  /// `tensor` reduced over every rank, as a new tensor (`tensor` is left as
  /// it is; PyTorch's functional all_reduce). Eagerly it blocks until the
  /// result is there; inside kiln::compile it is an `all_reduce` node,
  /// started as soon as `tensor` is computed and waited for where the
  /// result is first read. The result does not require grad.
  Tensor allReduced(const Tensor& tensor, ReduceOp op = ReduceOp::sum) const;
  /// `tensor` of rank `root` copied into `tensor` of every rank.
  Work broadcast(Tensor& tensor, int root) const;
  /// outputs[r] = rank r's `input`. An empty `outputs` is filled with new
  /// tensors like `input`.
  Work allGather(std::vector<Tensor>& outputs, const Tensor& input) const;
  /// `output` = the reduction over ranks of their inputs[rank()].
  Work reduceScatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::sum) const;
  /// inputs[j] goes to rank j; outputs[j] comes from rank j (equal sizes).
  /// An empty `outputs` is filled with new tensors like inputs[0].
  Work allToAll(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) const;
  Work send(const Tensor& tensor, int peer, int tag = 0) const;
  Work recv(Tensor& tensor, int peer, int tag = 0) const;
  Work barrier() const;

  /// A sub-group of `ranks` (of this group). Every rank calls it, in the
  /// same order; ranks outside get a non-member handle.
  ProcessGroup newGroup(const std::vector<int>& ranks) const;
  /// A barrier, then leaves the group (Gloo's exit race: DIST_NOTES).
  void shutdown() const;
  /// Leaves at once (peers blocked on this rank fail naming it).
  void abort() const;

  const std::shared_ptr<runtime::dist::ProcessGroup>& impl() const { return impl_; }

 private:
  runtime::dist::ProcessGroup& member(const char* op) const;
  std::shared_ptr<runtime::dist::ProcessGroup> impl_;
};

/// What dist::init needs. With a store, the ranks meet there (rank and
/// worldSize -1: read RANK and WORLD_SIZE). Without one, the environment
/// rendezvous makes it (runtime/dist_rendezvous.h): the rank and world that
/// kiln-run, torchrun, mpirun or Slurm set (rank and worldSize, when given,
/// override them; nothing set is a world of one process), met at
/// `initMethod` ("env://": MASTER_ADDR:MASTER_PORT, rank 0 serving;
/// "tcp://host:port"; "file:///path").
struct InitOptions {
  std::shared_ptr<Store> store;
  int rank = -1;
  int worldSize = -1;
  std::string initMethod = "env://";
  Options options;
};

/// Makes the default group (torch.distributed.init_process_group). Its
/// keys go under "kiln/default_pg" (under ".../<KILN_RESTART_COUNT>" in a
/// store given here; the rendezvous's store has a prefix per restart
/// already), so a restarted job meets again without reading the keys of the
/// attempt before. kiln::Error when a group exists already, the backend
/// cannot run here, or a rank does not join within the timeout.
void init(const std::string& backend, const InitOptions& options = {});
bool isInitialized();
/// The default group; kiln::Error when dist::init was not called.
ProcessGroup defaultGroup();
int getRank();
int getWorldSize();
/// newGroup on the default group.
ProcessGroup newGroup(const std::vector<int>& ranks);
/// Shuts the default group down (a barrier, then leaving) and forgets it.
void destroyProcessGroup();

// The collectives of the default group.
Work allReduce(Tensor& tensor, ReduceOp op = ReduceOp::sum);
Tensor allReduced(const Tensor& tensor, ReduceOp op = ReduceOp::sum);
Work broadcast(Tensor& tensor, int root);
Work allGather(std::vector<Tensor>& outputs, const Tensor& input);
Work reduceScatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::sum);
Work allToAll(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs);
Work send(const Tensor& tensor, int peer, int tag = 0);
Work recv(Tensor& tensor, int peer, int tag = 0);
Work barrier();

}  // namespace kiln::dist

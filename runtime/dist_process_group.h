// Process groups (DESIGN.md §9): the backend-neutral interface of kiln's
// collectives, PyTorch's c10d ProcessGroup in the runtime's terms. The
// runtime knows buffers, not tensors, so every collective takes BufferRefs
// (a Buffer, a byte offset, a count, a dtype, a shape for messages); the
// frontend's kiln::dist wraps them for Tensors (frontend/distributed.h).
// Each call returns a Work handle at once and runs asynchronously, in issue
// order, on the backend: Gloo for cpu and opencl buffers
// (runtime/dist_gloo.cpp), NCCL for cuda buffers (runtime/dist_nccl.cpp).
//
// What every backend shares lives here: argument checks, sequence numbers,
// the signature check (Note [Collective fingerprints] in
// runtime/dist_fingerprint.cpp), the timeout, and the failure report that
// names the rank at fault (Note [Naming the failed rank] in
// runtime/dist_process_group.cpp). A group that failed in its transport is
// broken: every later call fails at once with the first failure's message.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/dist_store.h"
#include "runtime/dtype.h"

namespace kiln::runtime::dist {

/// How all_reduce and reduce_scatter combine the ranks' values. avg is the
/// sum divided by the group's size, for floating-point dtypes only. On bool,
/// sum and max are a logical or, product and min a logical and.
enum class ReduceOp : uint8_t { sum, avg, min, max, product };
/// "sum", "avg", "min", "max", "product".
std::string_view reduceOpName(ReduceOp op);

/// The operations of a process group.
enum class OpKind : uint8_t { allReduce, broadcast, allGather, reduceScatter, allToAll, send, recv, barrier };
/// "all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all",
/// "send", "recv", "barrier" (PyTorch's names).
std::string_view opKindName(OpKind kind);

/// Contiguous elements in device memory: `numel` elements of `dtype` from
/// `offset` bytes into `buffer`. The Work of a call holds the buffer until
/// the call is done. `shape` is what messages and signature checks show
/// (empty: [numel]).
struct BufferRef {
  std::shared_ptr<Buffer> buffer;
  size_t offset = 0;  ///< bytes
  int64_t numel = 0;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  /// Where the elements are; a BufferRef without a buffer (tests of argument
  /// checks) says it here.
  Device device = Device::cpu();

  /// A BufferRef over a whole tensor-like region of `buffer`.
  static BufferRef of(std::shared_ptr<Buffer> buffer, size_t offset, int64_t numel, DType dtype,
                      std::vector<int64_t> shape = {});
  size_t bytes() const { return static_cast<size_t>(numel) * static_cast<size_t>(itemSize(dtype)); }
  DevicePtr ptr() const;
  /// "f32[2,3]"; with the device when `withDevice`: "f32[2,3]@opencl:0".
  std::string str(bool withDevice = false) const;
};

/// The handle of one asynchronous call (c10d's Work). Thread-safe.
class Work {
 public:
  Work(OpKind kind, uint64_t sequence, std::string description, std::chrono::milliseconds timeout);

  OpKind kind() const { return kind_; }
  /// The call's sequence number in its group (collectives count 1, 2, ...
  /// on every rank; send and recv count per peer).
  uint64_t sequence() const { return sequence_; }
  /// "all_reduce(f32[4], sum)".
  const std::string& description() const { return description_; }
  /// Whether it has finished, with or without an error.
  bool isCompleted() const;
  /// Whether it has finished without an error.
  bool isSuccess() const;
  /// Its error once it failed; null while it runs and when it succeeded.
  std::exception_ptr exception() const;
  /// Blocks until it has finished and rethrows its error. The results are
  /// then in the buffers and visible to work enqueued from now on on the
  /// current streams of their devices. Never blocks forever: a call that has
  /// not finished its group's timeout + 5 s after it started fails with an
  /// error saying so (the backends' own timeouts end it long before).
  void wait();
  /// wait() for at most `timeout`: false when it has not finished by then.
  bool waitFor(std::chrono::milliseconds timeout);

  // For backends.
  /// It has started running (its timeout counts from here).
  void markStarted();
  /// It has finished; `error` null for success. Only the first call counts.
  void finish(std::exception_ptr error);
  /// Run by wait() after success, on the waiting thread: makes the current
  /// stream wait for the call's copies (NCCL); empty when nothing is needed.
  void setOnWait(std::function<void()> onWait);

 private:
  bool waitUntilDone(std::optional<std::chrono::steady_clock::time_point> deadline);
  const OpKind kind_;
  const uint64_t sequence_;
  const std::string description_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  bool completed_ = false;
  std::optional<std::chrono::steady_clock::time_point> started_;
  std::exception_ptr error_;
  std::function<void()> onWait_;
};

/// One call of a process group, as a backend runs it. The layout of the
/// buffers per kind: all_reduce and broadcast: inputs = outputs = {data};
/// all_gather: inputs {in}, outputs one per rank; reduce_scatter: inputs
/// one per rank, outputs {out}; all_to_all: one of each per rank (inputs[j]
/// goes to rank j, outputs[j] comes from rank j); send: inputs {data}; recv:
/// outputs {data}; barrier: none.
struct Call {
  OpKind kind = OpKind::barrier;
  ReduceOp op = ReduceOp::sum;
  int root = -1;  ///< broadcast
  int peer = -1;  ///< send, recv
  int tag = 0;    ///< send, recv
  uint64_t sequence = 0;
  std::vector<BufferRef> inputs, outputs;
  std::shared_ptr<Work> work;

  /// The buffer whose shape and dtype the call is described by.
  const BufferRef* subject() const;
  /// What the call is, as messages show it: "all_reduce(f32[4], sum)",
  /// "broadcast(f32[4], root=0)", "send(f32[4], to=1, tag=0)", "barrier()".
  std::string describe() const;
  /// Everything the ranks must agree on, every buffer's shape included:
  /// what KILN_DIST_DEBUG=detail compares, and what the fingerprint hashes.
  std::string signature() const;
  bool isCollective() const { return kind != OpKind::send && kind != OpKind::recv; }
};

/// KILN_DIST_DEBUG: off (no signature check), on (the default: a
/// fingerprint exchange before every collective) or detail (also every
/// rank's full signature through the store); see docs/distributed.md.
enum class DebugLevel : uint8_t { off, on, detail };
/// The level KILN_DIST_DEBUG asks for (read at each call: groups read it
/// when they are made); kiln::Error naming the valid values otherwise.
DebugLevel debugLevelFromEnvironment();

struct ProcessGroupOptions {
  /// Every collective's timeout, and the rendezvous's.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  /// Gloo: the address to listen on. Empty: the interface GLOO_SOCKET_IFNAME
  /// names, else the host name when it resolves, else 127.0.0.1.
  std::string hostname;
  /// NCCL: the device; cuda:(rank % device count) when unset.
  std::optional<Device> device;
  /// Unset: KILN_DIST_DEBUG.
  std::optional<DebugLevel> debug;
  /// Gloo's algorithms count elements in an int; calls are split into
  /// pieces of at most this many elements (tests lower it).
  int64_t maxElementsPerCall = 2147483647;
};

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// "gloo", "nccl".
  const std::string& backend() const { return backend_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  const ProcessGroupOptions& options() const { return options_; }
  DebugLevel debugLevel() const { return debug_; }
  /// The group's own store (a prefix of the one it was made with).
  const std::shared_ptr<Store>& store() const { return store_; }
  /// "gloo group of 3, rank 1".
  std::string str() const;

  // The collectives. Each checks its arguments here (kiln::Error naming
  // the op, shapes, dtypes, devices and ranks), then runs asynchronously.
  std::shared_ptr<Work> allReduce(const BufferRef& data, ReduceOp op = ReduceOp::sum);
  std::shared_ptr<Work> broadcast(const BufferRef& data, int root);
  std::shared_ptr<Work> allGather(const std::vector<BufferRef>& outputs, const BufferRef& input);
  std::shared_ptr<Work> reduceScatter(const BufferRef& output, const std::vector<BufferRef>& inputs,
                                      ReduceOp op = ReduceOp::sum);
  /// inputs[j] goes to rank j, outputs[j] comes from rank j; every chunk has
  /// the same number of elements.
  std::shared_ptr<Work> allToAll(const std::vector<BufferRef>& outputs, const std::vector<BufferRef>& inputs);
  std::shared_ptr<Work> send(const BufferRef& data, int peer, int tag = 0);
  std::shared_ptr<Work> recv(const BufferRef& data, int peer, int tag = 0);
  std::shared_ptr<Work> barrier();

  /// A sub-group of the ranks `ranks` (of this group; sorted here; no repeats).
  /// Every rank of this group calls it, in the same order; ranks not in
  /// `ranks` get null. Blocks until the members have met (the timeout).
  std::shared_ptr<ProcessGroup> newGroup(std::vector<int> ranks);

  /// A barrier (its errors ignored), then abort(): the way to leave a group
  /// without failing a slower peer's last call (Gloo resets connections).
  void shutdown();
  /// Leaves: says so in the store, so that peers blocked on this rank name
  /// it, fails the queued calls and a send or receive in flight as shut
  /// down, waits for a collective in flight (Gloo's cannot be interrupted:
  /// at most its timeout), and closes the connections. Later calls fail.
  void abort();

  /// Whether a transport failure made the group unusable, and why.
  bool broken() const;
  std::string brokenReason() const;

  /// Whether `device` is one this backend runs collectives on.
  bool supports(Device device) const;

 protected:
  ProcessGroup(std::string backend, std::shared_ptr<Store> store, int rank, int size, ProcessGroupOptions options);

  /// Runs `call` (checked, numbered, with its Work) asynchronously.
  virtual void start(std::shared_ptr<Call> call) = 0;
  /// Closes the transport (abort(), the destructor). Called once.
  virtual void closeTransport() = 0;

  /// Marks the group broken with `reason` (the first reason stays).
  void markBroken(const std::string& reason);
  /// The error every call gets once the group is broken.
  std::string brokenMessage(const Call& call) const;
  /// Note [Naming the failed rank]: the error for `call` that failed in the
  /// transport with `what` ("gloo: Read timeout ..."), naming the rank at
  /// fault. `suspect` is the peer the transport names (-1: none). Posts
  /// this rank's failure to the store for its peers, marks the group broken.
  std::string failCall(const Call& call, const std::string& what, int suspect, bool timedOut);
  /// The store key under which rank `r` posts its failures / its leaving.
  static std::string failKey(int r) { return "kiln/fail/" + std::to_string(r); }
  static std::string leftKey(int r) { return "kiln/left/" + std::to_string(r); }

 private:
  std::shared_ptr<Work> submit(std::shared_ptr<Call> call);
  void check(const Call& call) const;
  const std::string backend_;
  std::shared_ptr<Store> store_;
  const int rank_, size_;
  const ProcessGroupOptions options_;
  const DebugLevel debug_;
  std::mutex submitMutex_;
  std::mutex mutex_;
  uint64_t sequence_ = 0;                ///< of the last collective
  std::map<int, uint64_t> p2pSequence_;  ///< per peer
  int groupsMade_ = 0;                   ///< newGroup calls
  mutable std::mutex brokenMutex_;
  std::string brokenReason_;
  std::atomic<bool> closed_{false};
};

/// A process group of `size` ranks meeting through `store` (which every
/// rank passes with the same keys: give each group and each restart its own
/// PrefixStore). `backend` is "gloo" or "nccl"; kiln::Error saying why when
/// that backend cannot run here ("nccl: no CUDA device: ..."). Blocks until
/// every rank has joined, up to options.timeout.
std::shared_ptr<ProcessGroup> createProcessGroup(const std::string& backend, std::shared_ptr<Store> store, int rank,
                                                 int size, const ProcessGroupOptions& options = {});

/// The id of `group` in this process: what a graph's collective nodes name
/// it by (their `group` attribute; docs/ops.md, "Collectives"). Ids count
/// from 0 in the order groups are first asked for; the registry holds the
/// group weakly.
int64_t groupId(const std::shared_ptr<ProcessGroup>& group);
/// The group of id `id`; null when there is none (any more).
std::shared_ptr<ProcessGroup> groupById(int64_t id);
/// The ReduceOp named `name` (as reduceOpName writes it), or nullopt.
std::optional<ReduceOp> reduceOpFromName(std::string_view name);

/// Whether `backend` can be used in this build and process; `why` when not.
bool isBackendAvailable(const std::string& backend, std::string* why = nullptr);

/// The error `backend` gives a call of `kind` on `buffer` whose device it
/// does not run on ("all_reduce: the nccl backend runs on cuda tensors, got
/// f32[4]@cpu (use gloo for cpu and opencl tensors)"); empty when it does.
std::string deviceMismatchMessage(const std::string& backend, OpKind kind, const BufferRef& buffer);

// The backends' factories (runtime/dist_gloo.cpp, runtime/dist_nccl.cpp).
std::shared_ptr<ProcessGroup> createGlooProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                                                     const ProcessGroupOptions& options);
std::shared_ptr<ProcessGroup> createNcclProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                                                     const ProcessGroupOptions& options);
bool glooAvailable(std::string* why);
bool ncclAvailable(std::string* why);

}  // namespace kiln::runtime::dist

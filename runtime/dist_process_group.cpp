// What every process-group backend shares (runtime/dist_process_group.h):
// names, Work, the argument checks of each collective, sequence numbers,
// sub-groups, leaving a group, and the report of a failed call.
//
// Note [Naming the failed rank]
// When a call fails in the transport, the survivor's own error rarely says
// who is at fault: in a ring whose rank 2 is stuck, rank 0 times out on
// rank 2 but rank 1 times out on rank 0, which is alive and waiting too.
// So a failing rank (1) posts at once under kiln/fail/<rank> that it is
// investigating; (2) looks at the rank its transport names (Gloo's message
// carries the peer's address, which runtime/dist_gloo.cpp maps to a rank):
// if that rank left the group (abort() and shutdown() post kiln/left/<rank>)
// it is the culprit; if it posted a verdict, its culprit is taken over
// ("... (reported by rank 0)"); if it is still investigating, its verdict
// is awaited (at most 800 ms or three quarters of the timeout); if it said
// nothing within a short grace (300 ms or a quarter of the timeout), it is
// the culprit; (3) when the transport names nobody, names the ranks that
// said nothing; (4) posts its verdict, then the backend closes its
// connections, which wakes the peers blocked on it, and they find the
// verdict in turn. Every surviving rank thus names the same rank, within
// the timeout plus at most 800 ms. Only non-blocking store reads (check,
// then get) are used.
#include "runtime/dist_process_group.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "runtime/dist_fingerprint.h"
#include "runtime/error.h"

namespace kiln::runtime::dist {

std::string_view reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::product: return "product";
  }
  return "?";
}

std::string_view opKindName(OpKind kind) {
  switch (kind) {
    case OpKind::allReduce: return "all_reduce";
    case OpKind::broadcast: return "broadcast";
    case OpKind::allGather: return "all_gather";
    case OpKind::reduceScatter: return "reduce_scatter";
    case OpKind::allToAll: return "all_to_all";
    case OpKind::send: return "send";
    case OpKind::recv: return "recv";
    case OpKind::barrier: return "barrier";
  }
  return "?";
}

DebugLevel debugLevelFromEnvironment() {
  const char* v = std::getenv("KILN_DIST_DEBUG");
  if (!v || !*v) return DebugLevel::on;
  const std::string s(v);
  if (s == "off" || s == "0") return DebugLevel::off;
  if (s == "on" || s == "1" || s == "info") return DebugLevel::on;
  if (s == "detail") return DebugLevel::detail;
  fail("KILN_DIST_DEBUG: expected off, on or detail, got '{}'", s);
}

// --- BufferRef ---

std::optional<ReduceOp> reduceOpFromName(std::string_view name) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max, ReduceOp::product})
    if (reduceOpName(op) == name) return op;
  return std::nullopt;
}

namespace {
struct GroupRegistry {
  std::mutex mutex;
  std::vector<std::weak_ptr<ProcessGroup>> groups;  ///< by id
};
GroupRegistry& groupRegistry() {
  static GroupRegistry* registry = new GroupRegistry;  // never destroyed: groups may outlive static destruction
  return *registry;
}
}  // namespace

int64_t groupId(const std::shared_ptr<ProcessGroup>& group) {
  KILN_ASSERT(group != nullptr, "groupId of a null group");
  GroupRegistry& r = groupRegistry();
  std::lock_guard lock(r.mutex);
  for (size_t i = 0; i < r.groups.size(); ++i)
    if (r.groups[i].lock() == group) return static_cast<int64_t>(i);
  r.groups.push_back(group);
  return static_cast<int64_t>(r.groups.size()) - 1;
}

std::shared_ptr<ProcessGroup> groupById(int64_t id) {
  GroupRegistry& r = groupRegistry();
  std::lock_guard lock(r.mutex);
  if (id < 0 || static_cast<size_t>(id) >= r.groups.size()) return nullptr;
  return r.groups[static_cast<size_t>(id)].lock();
}

BufferRef BufferRef::of(std::shared_ptr<Buffer> buffer, size_t offset, int64_t numel, DType dtype,
                        std::vector<int64_t> shape) {
  BufferRef b;
  b.device = buffer ? buffer->device() : Device::cpu();
  b.buffer = std::move(buffer);
  b.offset = offset;
  b.numel = numel;
  b.dtype = dtype;
  b.shape = std::move(shape);
  return b;
}

DevicePtr BufferRef::ptr() const {
  KILN_ASSERT(buffer, "a BufferRef without a buffer was used");
  return buffer->ptr(offset);
}

std::string BufferRef::str(bool withDevice) const {
  std::string text = shape.empty() ? fmt::format("{}[{}]", dtypeName(dtype), numel)
                                   : fmt::format("{}[{}]", dtypeName(dtype), fmt::join(shape, ","));
  if (withDevice) text += "@" + device.str();
  return text;
}

// --- Work ---

Work::Work(OpKind kind, uint64_t sequence, std::string description, std::chrono::milliseconds timeout)
    : kind_(kind), sequence_(sequence), description_(std::move(description)), timeout_(timeout) {}

bool Work::isCompleted() const {
  std::lock_guard lock(mutex_);
  return completed_;
}
bool Work::isSuccess() const {
  std::lock_guard lock(mutex_);
  return completed_ && !error_;
}
std::exception_ptr Work::exception() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Work::markStarted() {
  std::lock_guard lock(mutex_);
  if (!started_) started_ = std::chrono::steady_clock::now();
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (completed_) return;
    completed_ = true;
    error_ = std::move(error);
  }
  done_.notify_all();
}

void Work::setOnWait(std::function<void()> onWait) {
  std::lock_guard lock(mutex_);
  onWait_ = std::move(onWait);
}

bool Work::waitUntilDone(std::optional<std::chrono::steady_clock::time_point> deadline) {
  using clock = std::chrono::steady_clock;
  std::function<void()> onWait;
  {
    std::unique_lock lock(mutex_);
    while (!completed_) {
      const auto now = clock::now();
      if (deadline && now >= *deadline) return false;
      const auto limit = timeout_ + std::chrono::seconds(5);
      if (started_ && now - *started_ > limit)
        fail("{}: still running {} ms after it started, past its timeout of {} ms (the backend did not end it)",
             description_, std::chrono::duration_cast<std::chrono::milliseconds>(limit).count(), timeout_.count());
      auto next = now + std::chrono::milliseconds(50);
      if (deadline) next = std::min(next, *deadline);
      done_.wait_until(lock, next);
    }
    if (error_) std::rethrow_exception(error_);
    onWait = onWait_;
  }
  if (onWait) onWait();
  return true;
}

void Work::wait() { waitUntilDone(std::nullopt); }

bool Work::waitFor(std::chrono::milliseconds timeout) {
  return waitUntilDone(std::chrono::steady_clock::now() + timeout);
}

// --- ProcessGroup ---

ProcessGroup::ProcessGroup(std::string backend, std::shared_ptr<Store> store, int rank, int size,
                           ProcessGroupOptions options)
    : backend_(std::move(backend)),
      store_(std::move(store)),
      rank_(rank),
      size_(size),
      options_(std::move(options)),
      debug_(options_.debug ? *options_.debug : debugLevelFromEnvironment()) {}

ProcessGroup::~ProcessGroup() = default;

std::string ProcessGroup::str() const { return fmt::format("{} group of {}, rank {}", backend_, size_, rank_); }

bool ProcessGroup::supports(Device device) const {
  BufferRef probe;
  probe.device = device;
  return deviceMismatchMessage(backend_, OpKind::barrier, probe).empty();
}

std::shared_ptr<Work> ProcessGroup::allReduce(const BufferRef& data, ReduceOp op) {
  auto call = std::make_shared<Call>();
  call->kind = OpKind::allReduce;
  call->op = op;
  call->inputs = call->outputs = {data};
  return submit(std::move(call));
}

std::shared_ptr<Work> ProcessGroup::broadcast(const BufferRef& data, int root) {
  auto call = std::make_shared<Call>();
  call->kind = OpKind::broadcast;
  call->root = root;
  call->inputs = call->outputs = {data};
  return submit(std::move(call));
}

std::shared_ptr<Work> ProcessGroup::allGather(const std::vector<BufferRef>& outputs, const BufferRef& input) {
  auto call = std::make_shared<Call>();
  call->kind = OpKind::allGather;
  call->inputs = {input};
  call->outputs = outputs;
  return submit(std::move(call));
}

std::shared_ptr<Work> ProcessGroup::reduceScatter(const BufferRef& output, const std::vector<BufferRef>& inputs,
                                                  ReduceOp op) {
  auto call = std::make_shared<Call>();
  call->kind = OpKind::reduceScatter;
  call->op = op;
  call->inputs = inputs;
  call->outputs = {output};
  return submit(std::move(call));
}

std::shared_ptr<Work> ProcessGroup::allToAll(const std::vector<BufferRef>& outputs,
                                             const std::vector<BufferRef>& inputs) {
  auto call = std::make_shared<Call>();
  call->kind = OpKind::allToAll;
  call->inputs = inputs;
  call->outputs = outputs;
  return submit(std::move(call));
}

std::shared_ptr<Work> ProcessGroup::send(const BufferRef& data, int peer, int tag) {
  auto call = std::make_shared<Call>();
  call->kind = OpKind::send;
  call->peer = peer;
  call->tag = tag;
  call->inputs = {data};
  return submit(std::move(call));
}

std::shared_ptr<Work> ProcessGroup::recv(const BufferRef& data, int peer, int tag) {
  auto call = std::make_shared<Call>();
  call->kind = OpKind::recv;
  call->peer = peer;
  call->tag = tag;
  call->outputs = {data};
  return submit(std::move(call));
}

std::shared_ptr<Work> ProcessGroup::barrier() {
  auto call = std::make_shared<Call>();
  call->kind = OpKind::barrier;
  return submit(std::move(call));
}

void ProcessGroup::check(const Call& call) const {
  const std::string_view op = opKindName(call.kind);
  std::vector<const BufferRef*> all;
  for (const BufferRef& b : call.inputs) all.push_back(&b);
  for (const BufferRef& b : call.outputs) all.push_back(&b);
  for (const BufferRef* b : all) {
    const std::string wrongDevice = deviceMismatchMessage(backend_, call.kind, *b);
    KILN_CHECK(wrongDevice.empty(), "{}", wrongDevice);
    KILN_CHECK(b->numel >= 0, "{}: a negative element count ({})", op, b->numel);
    KILN_CHECK(b->buffer || b->numel == 0, "{}: {} has no memory", op, b->str(true));
    if (b->buffer)
      KILN_CHECK(b->offset + b->bytes() <= b->buffer->bytes(),
                 "{}: {} at byte offset {} runs past the end of its buffer of {} bytes", op, b->str(true), b->offset,
                 b->buffer->bytes());
    KILN_CHECK(b->dtype == all[0]->dtype, "{}: expected every tensor of one dtype, got {} and {}", op,
               all[0]->str(true), b->str(true));
    KILN_CHECK(b->device == all[0]->device, "{}: expected every tensor on one device, got {} and {}", op,
               all[0]->str(true), b->str(true));
  }
  const auto sameCount = [&](const std::vector<BufferRef>& list, int64_t numel, const char* what) {
    KILN_CHECK(static_cast<int>(list.size()) == size_, "{}: expected {} {} tensors (one per rank), got {}", op, size_,
               what, list.size());
    for (const BufferRef& b : list)
      KILN_CHECK(b.numel == numel, "{}: expected every {} tensor to hold {} elements, got {}", op, what, numel,
                 b.str(true));
  };
  const auto reduction = [&] {
    if (call.op == ReduceOp::avg)
      KILN_CHECK(isFloatingPoint(call.subject()->dtype), "{}: avg needs a floating-point dtype, got {}", op,
                 call.subject()->str(true));
  };
  switch (call.kind) {
    case OpKind::allReduce: reduction(); break;
    case OpKind::broadcast:
      KILN_CHECK(call.root >= 0 && call.root < size_, "broadcast: root {} is not a rank of this group of {}", call.root,
                 size_);
      break;
    case OpKind::allGather: sameCount(call.outputs, call.inputs[0].numel, "output"); break;
    case OpKind::reduceScatter:
      sameCount(call.inputs, call.outputs[0].numel, "input");
      reduction();
      break;
    case OpKind::allToAll:
      KILN_CHECK(!call.inputs.empty(), "all_to_all: expected {} input tensors (one per rank), got none", size_);
      sameCount(call.inputs, call.inputs[0].numel, "input");
      sameCount(call.outputs, call.inputs[0].numel, "output");
      break;
    case OpKind::send:
    case OpKind::recv:
      KILN_CHECK(call.peer >= 0 && call.peer < size_ && call.peer != rank_,
                 "{}: peer {} is not another rank of this group of {} (this is rank {})", op, call.peer, size_, rank_);
      KILN_CHECK(call.tag >= 0, "{}: tag {} is negative", op, call.tag);
      break;
    case OpKind::barrier: break;
  }
}

std::shared_ptr<Work> ProcessGroup::submit(std::shared_ptr<Call> call) {
  KILN_CHECK(!closed_, "{}: the {} process group (rank {} of {}) has been shut down", opKindName(call->kind), backend_,
             rank_, size_);
  check(*call);
  KILN_CHECK(!broken(), "{}", brokenMessage(*call));
  // Numbered and started under one lock: calls from several threads reach
  // the backend in the order of their numbers.
  std::lock_guard lock(submitMutex_);
  {
    std::lock_guard numbers(mutex_);
    call->sequence = call->isCollective() ? ++sequence_ : ++p2pSequence_[call->peer];
  }
  call->work = std::make_shared<Work>(call->kind, call->sequence, call->describe(), timeout());
  start(call);
  return call->work;
}

std::shared_ptr<ProcessGroup> ProcessGroup::newGroup(std::vector<int> ranks) {
  KILN_CHECK(!ranks.empty(), "new_group: expected at least one rank");
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    KILN_CHECK(ranks[i] >= 0 && ranks[i] < size_, "new_group: rank {} is not in this group of {} ranks (0 to {})",
               ranks[i], size_, size_ - 1);
    KILN_CHECK(i == 0 || ranks[i] != ranks[i - 1], "new_group: rank {} is listed twice", ranks[i]);
  }
  int id = 0;
  {
    std::lock_guard lock(mutex_);
    id = groupsMade_++;
  }
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;
  // The ranks are part of the prefix: ranks that disagree on them do not
  // meet (they time out naming the keys) instead of forming a wrong group.
  auto sub = std::make_shared<PrefixStore>(fmt::format("group{}[{}]", id, fmt::join(ranks, ",")), store_);
  ProcessGroupOptions options = options_;
  options.debug = debug_;
  return createProcessGroup(backend_, std::move(sub), static_cast<int>(me - ranks.begin()),
                            static_cast<int>(ranks.size()), options);
}

void ProcessGroup::shutdown() {
  if (closed_) return;
  if (!broken() && size_ > 1) {
    try {
      barrier()->wait();
    } catch (const std::exception&) {
      // Leaving anyway: the barrier only spares a slower peer's last call.
    }
  }
  abort();
}

void ProcessGroup::abort() {
  if (closed_.exchange(true)) return;
  try {
    store_->set(leftKey(rank_), std::string("1"));
  } catch (const std::exception&) {
    // The store may be gone with the job; the peers then see a closed connection.
  }
  closeTransport();
}

bool ProcessGroup::broken() const {
  std::lock_guard lock(brokenMutex_);
  return !brokenReason_.empty();
}

std::string ProcessGroup::brokenReason() const {
  std::lock_guard lock(brokenMutex_);
  return brokenReason_;
}

void ProcessGroup::markBroken(const std::string& reason) {
  std::lock_guard lock(brokenMutex_);
  if (brokenReason_.empty()) brokenReason_ = reason;
}

std::string ProcessGroup::brokenMessage(const Call& call) const {
  return fmt::format("{}: the {} process group (rank {} of {}) is unusable after an earlier failure: {}",
                     opKindName(call.kind), backend_, rank_, size_, brokenReason());
}

static std::string_view counterpartOf(OpKind kind) {
  if (kind == OpKind::send) return "recv";
  if (kind == OpKind::recv) return "send";
  return opKindName(kind);
}

std::string ProcessGroup::failCall(const Call& call, const std::string& what, int suspect, bool timedOut) {
  using clock = std::chrono::steady_clock;
  const std::string_view op = opKindName(call.kind);
  auto has = [&](const std::string& key) {
    try {
      return store_->check({key});
    } catch (const std::exception&) {
      return false;
    }
  };
  // A rank's post: culprit, whether it is final, cause.
  struct Post {
    int culprit = -1;
    bool final = false;
    std::string cause;
  };
  auto post = [&](int r) -> std::optional<Post> {
    if (r == rank_ || !has(failKey(r))) return std::nullopt;
    try {
      const std::string text = store_->getString(failKey(r));
      const size_t a = text.find('\n'), b = text.find('\n', a + 1);
      if (a == std::string::npos || b == std::string::npos) return std::nullopt;
      return Post{std::atoi(text.substr(0, a).c_str()), text.substr(a + 1, b - a - 1) == "final", text.substr(b + 1)};
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  auto publish = [&](int culprit, bool final, const std::string& cause) {
    try {
      store_->set(failKey(rank_), fmt::format("{}\n{}\n{}", culprit, final ? "final" : "investigating", cause));
    } catch (const std::exception&) {
    }
  };
  // Say at once that this rank failed, so that peers blocked on it wait
  // for its verdict instead of blaming it.
  publish(-1, false, what);
  const auto start = clock::now();
  const auto grace = start + std::min<std::chrono::milliseconds>(std::chrono::milliseconds(300), timeout() / 4);
  const auto patience = start + std::min<std::chrono::milliseconds>(std::chrono::milliseconds(800), timeout() * 3 / 4);
  const std::string_view awaited = counterpartOf(call.kind);
  int culprit = -1;
  std::string cause;
  auto fromPost = [&](int r, const Post& p) {
    if (p.culprit >= 0 && p.culprit != rank_) {
      culprit = p.culprit;
      cause = fmt::format("{} (reported by rank {})", p.cause, r);
    } else {
      culprit = r;
      cause = fmt::format("rank {} failed: {}", r, p.cause);
    }
  };
  if (suspect >= 0) {
    for (;;) {
      const auto p = post(suspect);
      if (has(leftKey(suspect))) {
        culprit = suspect;
        cause = fmt::format("rank {} left the group (it shut down or aborted its process group)", suspect);
      } else if (p && p->final) {
        fromPost(suspect, *p);
      } else if (!timedOut && !p) {
        culprit = suspect;
        cause = fmt::format("rank {} closed its connection (it exited or crashed)", suspect);
      } else if (clock::now() >= (p ? patience : grace)) {
        culprit = suspect;
        cause = p ? fmt::format("rank {} failed too: {}", suspect, p->cause)
                  : fmt::format("timed out waiting for rank {} (stuck, dead, or not calling {})", suspect, awaited);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      break;
    }
  } else {
    // The transport names nobody: wait a moment for the others' posts and
    // name the ranks that said nothing.
    // A rank that posted anything is alive and failing too.
    std::vector<int> silent;
    for (;;) {
      silent.clear();
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && !has(leftKey(r)) && !post(r)) silent.push_back(r);
      if (silent.empty() || clock::now() >= grace) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (int r = 0; r < size_ && culprit < 0; ++r)
      if (r != rank_ && has(leftKey(r))) {
        culprit = r;
        cause = fmt::format("rank {} left the group (it shut down or aborted its process group)", r);
      }
    for (int r = 0; r < size_ && culprit < 0; ++r)
      if (const auto p = post(r); p && p->final && p->culprit >= 0 && p->culprit != rank_) fromPost(r, *p);
    if (culprit < 0 && !silent.empty()) {
      if (silent.size() == 1) culprit = silent[0];
      cause = fmt::format("{} rank{} {} (stuck, dead, or not calling {})",
                          timedOut ? "timed out waiting for" : "no word from", silent.size() == 1 ? "" : "s",
                          fmt::join(silent, ", "), awaited);
    }
    if (culprit < 0) cause = "every peer failed too, and none named a culprit";
  }
  publish(culprit, true, cause);
  const std::string where =
      call.isCollective()
          ? fmt::format("sequence {}", call.sequence)
          : fmt::format("{} {} rank {} (tag {})", op, call.kind == OpKind::send ? "to" : "from", call.peer, call.tag);
  const std::string message = fmt::format("{}: {} failed on rank {} of {} ({}, timeout {} ms): {}; {}", op, where,
                                          rank_, size_, backend_, timeout().count(), cause, what);
  markBroken(message);
  return message;
}

// --- backends ---

std::string deviceMismatchMessage(const std::string& backend, OpKind kind, const BufferRef& buffer) {
  const std::string_view op = opKindName(kind);
  if (backend == "gloo" && buffer.device.isCuda())
    return fmt::format(
        "{}: the gloo backend runs on cpu and opencl tensors, got {} (use the nccl backend for cuda "
        "tensors)",
        op, buffer.str(true));
  if (backend == "nccl" && !buffer.device.isCuda())
    return fmt::format(
        "{}: the nccl backend runs on cuda tensors, got {} (use the gloo backend for cpu and opencl "
        "tensors)",
        op, buffer.str(true));
  return {};
}

bool isBackendAvailable(const std::string& backend, std::string* why) {
  if (backend == "gloo") return glooAvailable(why);
  if (backend == "nccl") return ncclAvailable(why);
  if (why) *why = fmt::format("unknown backend '{}' (expected gloo or nccl)", backend);
  return false;
}

std::shared_ptr<ProcessGroup> createProcessGroup(const std::string& backend, std::shared_ptr<Store> store, int rank,
                                                 int size, const ProcessGroupOptions& options) {
  KILN_CHECK(backend == "gloo" || backend == "nccl", "init_process_group: unknown backend '{}' (expected gloo or nccl)",
             backend);
  KILN_CHECK(store, "init_process_group: no store to meet through");
  KILN_CHECK(size >= 1, "init_process_group: a group needs at least one rank, got world size {}", size);
  KILN_CHECK(rank >= 0 && rank < size, "init_process_group: rank {} is not in a group of {} ranks (0 to {})", rank,
             size, size - 1);
  KILN_CHECK(options.timeout.count() > 0, "init_process_group: the timeout must be positive, got {} ms",
             options.timeout.count());
  KILN_CHECK(options.maxElementsPerCall > 0, "init_process_group: maxElementsPerCall must be positive, got {}",
             options.maxElementsPerCall);
  if (backend == "gloo") return createGlooProcessGroup(std::move(store), rank, size, options);
  return createNcclProcessGroup(std::move(store), rank, size, options);
}

}  // namespace kiln::runtime::dist

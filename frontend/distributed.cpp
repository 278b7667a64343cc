// kiln::dist (frontend/distributed.h): tensors to the runtime's BufferRefs,
// the default group, and the free functions over it.
#include "frontend/distributed.h"

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#include "frontend/trace.h"
#include "ir/graph.h"
#include "runtime/dist_rendezvous.h"
#include "runtime/error.h"

namespace kiln::dist {
namespace {

namespace rd = runtime::dist;

/// The tensor's elements as the runtime takes them; kiln::Error naming `op`
/// when they cannot be used in place.
rd::BufferRef refOf(std::string_view op, const Tensor& t) {
  KILN_CHECK(t.defined(), "{}: an undefined tensor", op);
  KILN_CHECK(!t.isTraced() && !::kiln::detail::TraceState::current(),
             "{}: {} inside kiln::compile: only all_reduce is a collective of compiled programs; call {} outside the "
             "compiled function",
             op, t.str(), op);
  KILN_CHECK(t.isContiguous(), "{}: expected a contiguous tensor, got {} with strides [{}] (call contiguous() first)",
             op, t.str(), fmt::join(t.strides(), ","));
  return rd::BufferRef::of(t.impl()->storage, static_cast<size_t>(t.storageOffset() * itemSize(t.dtype())), t.numel(),
                           t.dtype(), t.shape());
}

std::vector<rd::BufferRef> refsOf(std::string_view op, const std::vector<Tensor>& ts) {
  std::vector<rd::BufferRef> refs;
  refs.reserve(ts.size());
  for (const Tensor& t : ts) refs.push_back(refOf(op, t));
  return refs;
}

/// An in-place write: the tensor's version moves (autograd's saved-tensor check).
void bump(const Tensor& t) { ++*t.impl()->version; }

std::mutex& defaultMutex() {
  static std::mutex m;
  return m;
}
ProcessGroup& defaultSlot() {
  static ProcessGroup group;
  return group;
}

int fromEnvironment(const char* name, int given) {
  if (given >= 0) return given;
  const char* v = std::getenv(name);
  KILN_CHECK(v && *v, "dist::init: {} is not set and InitOptions gives no value for it", name);
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  KILN_CHECK(end && *end == '\0' && n >= 0, "dist::init: {}={} is not a non-negative integer", name, v);
  return static_cast<int>(n);
}

}  // namespace

// --- Work ---

void Work::wait() const {
  KILN_CHECK(impl_, "wait: an empty Work");
  impl_->wait();
}
bool Work::waitFor(std::chrono::milliseconds timeout) const {
  KILN_CHECK(impl_, "wait: an empty Work");
  return impl_->waitFor(timeout);
}
bool Work::isCompleted() const { return impl_ && impl_->isCompleted(); }
bool Work::isSuccess() const { return impl_ && impl_->isSuccess(); }
std::exception_ptr Work::exception() const { return impl_ ? impl_->exception() : nullptr; }
uint64_t Work::sequence() const { return impl_ ? impl_->sequence() : 0; }
std::string Work::description() const { return impl_ ? impl_->description() : std::string(); }

// --- ProcessGroup ---

rd::ProcessGroupOptions Options::runtimeOptions() const {
  rd::ProcessGroupOptions o;
  o.timeout = timeout;
  o.hostname = hostname;
  o.device = device;
  o.debug = debug;
  return o;
}

ProcessGroup ProcessGroup::create(const std::string& backend, std::shared_ptr<Store> store, int rank, int worldSize,
                                  const Options& options) {
  return ProcessGroup(rd::createProcessGroup(backend, std::move(store), rank, worldSize, options.runtimeOptions()));
}

rd::ProcessGroup& ProcessGroup::member(const char* op) const {
  KILN_CHECK(impl_, "{}: this rank is not a member of the group", op);
  return *impl_;
}

int ProcessGroup::rank() const { return impl_ ? impl_->rank() : -1; }
int ProcessGroup::size() const { return impl_ ? impl_->size() : 0; }
std::string ProcessGroup::backend() const { return impl_ ? impl_->backend() : std::string(); }

Work ProcessGroup::allReduce(Tensor& tensor, ReduceOp op) const {
  auto& g = member("all_reduce");
  if (::kiln::detail::TraceState::current()) {
    // The program writes the result into the tensor at every call (Note
    // [Writes into eager state] in frontend/trace.h).
    tensor.copy_(allReduced(tensor, op));
    auto done = std::make_shared<rd::Work>(rd::OpKind::allReduce, 0,
                                           fmt::format("all_reduce({}, {}) in a compiled program", tensor.str(),
                                                       rd::reduceOpName(op)),
                                           g.timeout());
    done->finish(nullptr);
    return Work(std::move(done));
  }
  Work w(g.allReduce(refOf("all_reduce", tensor), op));
  bump(tensor);
  return w;
}

Tensor ProcessGroup::allReduced(const Tensor& tensor, ReduceOp op) const {
  auto& g = member("all_reduce");
  KILN_CHECK(tensor.defined(), "all_reduce: an undefined tensor");
  if (::kiln::detail::TraceState* trace = ::kiln::detail::TraceState::current()) {
    rd::BufferRef probe = rd::BufferRef::of(nullptr, 0, tensor.numel(), tensor.dtype(), tensor.shape());
    probe.device = tensor.device();
    const std::string wrongDevice = rd::deviceMismatchMessage(g.backend(), rd::OpKind::allReduce, probe);
    KILN_CHECK(wrongDevice.empty(), "{}", wrongDevice);
    const std::vector<ir::Value*> in = {trace->valueOf(tensor, "all_reduce")};
    ir::Node* node = trace->graph->create(
        ir::Op::all_reduce, in,
        {{"group", rd::groupId(impl_)}, {"op", std::string(rd::reduceOpName(op))}});
    return trace->wrap(node->output());
  }
  Tensor result = tensor.detach().contiguous().clone();
  g.allReduce(refOf("all_reduce", result), op)->wait();
  return result;
}

Work ProcessGroup::broadcast(Tensor& tensor, int root) const {
  auto& g = member("broadcast");
  Work w(g.broadcast(refOf("broadcast", tensor), root));
  if (g.rank() != root) bump(tensor);
  return w;
}

Work ProcessGroup::allGather(std::vector<Tensor>& outputs, const Tensor& input) const {
  auto& g = member("all_gather");
  const rd::BufferRef in = refOf("all_gather", input);
  if (outputs.empty())
    for (int r = 0; r < g.size(); ++r) outputs.push_back(zeros(input.shape(), input.dtype(), input.device()));
  Work w(g.allGather(refsOf("all_gather", outputs), in));
  for (const Tensor& t : outputs) bump(t);
  return w;
}

Work ProcessGroup::reduceScatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) const {
  auto& g = member("reduce_scatter");
  Work w(g.reduceScatter(refOf("reduce_scatter", output), refsOf("reduce_scatter", inputs), op));
  bump(output);
  return w;
}

Work ProcessGroup::allToAll(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) const {
  auto& g = member("all_to_all");
  KILN_CHECK(!inputs.empty(), "all_to_all: expected {} input tensors (one per rank), got none", g.size());
  if (outputs.empty())
    for (size_t r = 0; r < inputs.size(); ++r)
      outputs.push_back(zeros(inputs[0].shape(), inputs[0].dtype(), inputs[0].device()));
  Work w(g.allToAll(refsOf("all_to_all", outputs), refsOf("all_to_all", inputs)));
  for (const Tensor& t : outputs) bump(t);
  return w;
}

Work ProcessGroup::send(const Tensor& tensor, int peer, int tag) const {
  return Work(member("send").send(refOf("send", tensor), peer, tag));
}

Work ProcessGroup::recv(Tensor& tensor, int peer, int tag) const {
  Work w(member("recv").recv(refOf("recv", tensor), peer, tag));
  bump(tensor);
  return w;
}

Work ProcessGroup::barrier() const { return Work(member("barrier").barrier()); }

ProcessGroup ProcessGroup::newGroup(const std::vector<int>& ranks) const {
  return ProcessGroup(member("new_group").newGroup(ranks));
}

void ProcessGroup::shutdown() const {
  if (impl_) impl_->shutdown();
}
void ProcessGroup::abort() const {
  if (impl_) impl_->abort();
}

// --- the default group ---

void init(const std::string& backend, const InitOptions& options) {
  std::lock_guard lock(defaultMutex());
  KILN_CHECK(!defaultSlot().isMember(),
             "dist::init: the default process group exists already (rank {} of {}); call "
             "dist::destroyProcessGroup() first",
             defaultSlot().rank(), defaultSlot().size());
  int rank = options.rank, worldSize = options.worldSize;
  std::shared_ptr<Store> store;
  if (options.store) {
    rank = fromEnvironment("RANK", rank);
    worldSize = fromEnvironment("WORLD_SIZE", worldSize);
    const char* restart = std::getenv("KILN_RESTART_COUNT");
    store = std::make_shared<PrefixStore>(fmt::format("kiln/default_pg/{}", restart && *restart ? restart : "0"),
                                          options.store);
  } else {
    rd::RendezvousInfo info = rd::readEnvironment();
    if (rank >= 0) info.rank = rank;
    if (worldSize >= 0) info.worldSize = worldSize;
    rank = info.rank;
    worldSize = info.worldSize;
    store = std::make_shared<PrefixStore>("kiln/default_pg",
                                          rd::rendezvous(info, options.initMethod, options.options.timeout));
  }
  defaultSlot() = ProcessGroup::create(backend, std::move(store), rank, worldSize, options.options);
}

bool isInitialized() {
  std::lock_guard lock(defaultMutex());
  return defaultSlot().isMember();
}

ProcessGroup defaultGroup() {
  std::lock_guard lock(defaultMutex());
  KILN_CHECK(defaultSlot().isMember(), "dist: the default process group is not initialized (call dist::init first)");
  return defaultSlot();
}

int getRank() { return defaultGroup().rank(); }
int getWorldSize() { return defaultGroup().size(); }
ProcessGroup newGroup(const std::vector<int>& ranks) { return defaultGroup().newGroup(ranks); }

void destroyProcessGroup() {
  ProcessGroup group;
  {
    std::lock_guard lock(defaultMutex());
    group = defaultSlot();
    defaultSlot() = ProcessGroup();
  }
  group.shutdown();
}

Work allReduce(Tensor& tensor, ReduceOp op) { return defaultGroup().allReduce(tensor, op); }
Tensor allReduced(const Tensor& tensor, ReduceOp op) { return defaultGroup().allReduced(tensor, op); }
Work broadcast(Tensor& tensor, int root) { return defaultGroup().broadcast(tensor, root); }
Work allGather(std::vector<Tensor>& outputs, const Tensor& input) { return defaultGroup().allGather(outputs, input); }
Work reduceScatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  return defaultGroup().reduceScatter(output, inputs, op);
}
Work allToAll(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  return defaultGroup().allToAll(outputs, inputs);
}
Work send(const Tensor& tensor, int peer, int tag) { return defaultGroup().send(tensor, peer, tag); }
Work recv(Tensor& tensor, int peer, int tag) { return defaultGroup().recv(tensor, peer, tag); }
Work barrier() { return defaultGroup().barrier(); }

}  // namespace kiln::dist

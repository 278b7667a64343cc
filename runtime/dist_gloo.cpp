// The Gloo backend of process groups (DESIGN.md §9): cpu tensors directly,
// opencl tensors through pinned host copies ordered on their streams. Built
// with Debian's libgloo-dev (KILN_HAVE_GLOO); without it the backend says
// that kiln was built without Gloo.
//
// A group owns one Gloo context (a full mesh of TCP pairs, met through the
// kiln Store bridged to Gloo's rendezvous store), a worker thread that runs
// the collectives in issue order, and a thread that completes sends and
// receives (posted at once on the caller's thread, so that a receive never
// waits behind a collective, as in PyTorch). Before each collective the
// worker exchanges fingerprints (Note [Collective fingerprints]); the
// collective itself runs on host memory (runtime/dist_gloo_ops.cpp).
//
// Note [Collectives on device streams]
// A collective on opencl tensors must see what the caller's stream computed
// before the call, and the caller's stream must not see the result before
// it is there. At the call, an event is recorded on the caller's current
// stream. The worker makes the group's own stream on that device wait for
// it, copies the inputs into pinned host memory on that stream, waits for
// the copy (bounded by the timeout), runs Gloo, copies the results back on
// the same stream and waits for that too before it completes the Work. So
// the data is on the device when Work::wait() returns, and work the caller
// enqueues after wait() sees it (PyTorch's contract: use the tensors only
// after wait()). The buffers are recorded as used on the group's stream
// (Note [Memory belongs to a stream]), and the Work holds them until done.
#include "runtime/dist_gloo.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <regex>
#include <thread>

#include "runtime/dist_fingerprint.h"
#include "runtime/dist_process_group.h"
#include "runtime/error.h"

#ifdef KILN_HAVE_GLOO
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "runtime/device_interface.h"
#include "runtime/pinned_memory.h"
#include "runtime/stream.h"
#endif

namespace kiln::runtime::dist {

#ifndef KILN_HAVE_GLOO

bool glooAvailable(std::string* why) {
  if (why) *why = "gloo: kiln was built without Gloo (install libgloo-dev and rebuild)";
  return false;
}

std::shared_ptr<ProcessGroup> createGlooProcessGroup(std::shared_ptr<Store>, int, int, const ProcessGroupOptions&) {
  fail("gloo: kiln was built without Gloo (install libgloo-dev and rebuild)");
}

#else

bool glooAvailable(std::string*) { return true; }

namespace gloo_backend {
namespace {

/// kiln's Store as Gloo's rendezvous store: get blocks up to the store's
/// timeout (connectFullMesh reads peers' keys without waiting first).
class StoreBridge final : public ::gloo::rendezvous::Store {
 public:
  explicit StoreBridge(std::shared_ptr<dist::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const Bytes b = store_->get(key);
    return {b.begin(), b.end()};
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<dist::Store> store_;
};

/// A failure a peer may be named for.
struct PeerError : std::runtime_error {
  PeerError(const std::string& what, int suspect, bool timedOut)
      : std::runtime_error(what), suspect(suspect), timedOut(timedOut) {}
  int suspect;
  bool timedOut;
};

/// A failure of this rank's own device (a copy that did not finish).
struct LocalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr uint8_t kHeaderSlot = 0x40, kDataSlot = 0x41;

/// One call on its way through the group.
struct Task {
  std::shared_ptr<Call> call;
  std::optional<Event> ready;  ///< recorded on the caller's stream (device buffers)
  // Sends and receives.
  Fingerprint header;
  std::unique_ptr< ::gloo::transport::UnboundBuffer> headerBuffer, dataBuffer;
  void* host = nullptr;  ///< the data on the host: the buffer itself (cpu) or pinned
  bool pinned = false;
  ~Task() {
    if (pinned) PinnedAllocator::instance().release(host);
  }
};

/// Host memory for one collective (Note [Collectives on device streams]).
struct Staging {
  std::vector<void*> in, out;
  std::vector<void*> pinned;
  ~Staging() {
    for (void* p : pinned) PinnedAllocator::instance().release(p);
  }
};

const BufferRef* firstBuffer(const Call& call) {
  if (!call.inputs.empty()) return &call.inputs[0];
  if (!call.outputs.empty()) return &call.outputs[0];
  return nullptr;
}

bool sameRegion(const BufferRef& a, const BufferRef& b) { return a.buffer == b.buffer && a.offset == b.offset; }

class GlooProcessGroup final : public ProcessGroup {
 public:
  GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size, const ProcessGroupOptions& options)
      : ProcessGroup("gloo", std::move(store), rank, size, options) {
    if (size > 1) connect();
    ops_ = std::make_unique<GlooOps>(context_, rank, size, options.maxElementsPerCall, timeout());
    worker_ = std::thread([this] { workerLoop(); });
    p2pWorker_ = std::thread([this] { p2pLoop(); });
  }
  ~GlooProcessGroup() override { abort(); }

 protected:
  void start(std::shared_ptr<Call> call) override;
  void closeTransport() override;

 private:
  void connect();
  void workerLoop();
  void p2pLoop();
  /// Runs a collective; returns the mismatch error, or empty.
  std::string runCollective(Task& task);
  void postP2p(Task& task);
  void completeP2p(Task& task);
  /// Ends `task` with the failure `e`, breaking the group.
  void failTask(Task& task, std::exception_ptr e);
  /// The rank whose Gloo address `what` names, or -1.
  int rankOfAddress(const std::string& what);
  const Stream& streamFor(Device device, bool p2p);
  Staging stageIn(Task& task);
  void stageOut(Task& task, Staging& staging);
  void waitFor(const Event& event, const Call& call, const std::string& what);
  void closeContext();
  std::string shutDownMessage(const Call& call) const {
    return fmt::format("{}: the gloo process group (rank {} of {}) was shut down before the call completed",
                       opKindName(call.kind), rank(), size());
  }

  std::shared_ptr< ::gloo::rendezvous::Context> context_;
  std::unique_ptr<GlooOps> ops_;
  std::mutex queueMutex_;
  std::condition_variable queueChanged_;
  std::deque<std::shared_ptr<Task> > queue_, p2pQueue_;
  std::shared_ptr<Task> p2pCurrent_;  ///< the send or receive the p2p thread waits on
  bool stopping_ = false;
  std::thread worker_, p2pWorker_;
  std::mutex streamsMutex_;
  std::map<std::string, Stream> streams_;
  std::mutex contextMutex_;
  bool contextClosed_ = false;
};

void GlooProcessGroup::connect() {
  // Meet through the store first, so that a rank that never comes is named.
  store()->set(fmt::format("kiln/gloo/joined/{}", rank()), std::string("1"));
  std::vector<int> missing;
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  for (int r = 0; r < size(); ++r) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      store()->wait({fmt::format("kiln/gloo/joined/{}", r)}, std::max(left, std::chrono::milliseconds(1)));
    } catch (const Error&) {
      missing.push_back(r);
    }
  }
  KILN_CHECK(missing.empty(), "init_process_group: gloo rank {} of {}: rank(s) {} did not join within {} ms", rank(),
             size(), fmt::join(missing, ", "), timeout().count());
  try {
    auto device = makeDevice(options());
    context_ = std::make_shared< ::gloo::rendezvous::Context>(rank(), size());
    context_->setTimeout(timeout());
    auto mesh = std::make_shared<PrefixStore>("kiln/gloo/mesh", store());
    mesh->setTimeout(timeout());
    StoreBridge bridge(mesh);
    context_->connectFullMesh(bridge, device);
  } catch (const std::exception& e) {
    fail("init_process_group: gloo rank {} of {} could not connect to its peers: {}", rank(), size(),
         glooText(e.what()));
  }
  // Each peer's pair to this rank, as Gloo names it in errors (Note
  // [Naming the failed rank]).
  std::string addresses;
  for (int r = 0; r < size(); ++r)
    if (r != rank()) addresses += fmt::format("{}={}\n", r, context_->getPair(r)->address().str());
  store()->set(fmt::format("kiln/gloo/addr/{}", rank()), addresses);
}

int GlooProcessGroup::rankOfAddress(const std::string& what) {
  static const std::regex address(R"(\[[^\]]+\]:\d+)");
  std::smatch m;
  if (!std::regex_search(what, m, address)) return -1;
  const std::string mine = fmt::format("{}={}\n", rank(), m.str());
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    const std::string key = fmt::format("kiln/gloo/addr/{}", r);
    try {
      if (store()->check({key}) && store()->getString(key).find(mine) != std::string::npos) return r;
    } catch (const std::exception&) {
    }
  }
  return -1;
}

void GlooProcessGroup::start(std::shared_ptr<Call> call) {
  auto task = std::make_shared<Task>();
  task->call = call;
  const BufferRef* b = firstBuffer(*call);
  if (b && !b->device.isCpu()) {
    task->ready.emplace();
    task->ready->record(currentStream(b->device));
  }
  if (!call->isCollective()) {
    try {
      postP2p(*task);
    } catch (const Error&) {
      call->work->finish(std::current_exception());  // the group was closed or broken before
      return;
    } catch (...) {
      failTask(*task, std::current_exception());
      return;
    }
  }
  {
    std::lock_guard lock(queueMutex_);
    (call->isCollective() ? queue_ : p2pQueue_).push_back(std::move(task));
  }
  queueChanged_.notify_all();
}

void GlooProcessGroup::workerLoop() {
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock lock(queueMutex_);
      queueChanged_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    Work& work = *task->call->work;
    bool stopping = false;
    {
      std::lock_guard lock(queueMutex_);
      stopping = stopping_;
    }
    if (stopping) {
      work.finish(std::make_exception_ptr(Error(shutDownMessage(*task->call))));
      continue;
    }
    if (broken()) {
      work.finish(std::make_exception_ptr(Error(brokenMessage(*task->call))));
      continue;
    }
    work.markStarted();
    try {
      const std::string mismatch = runCollective(*task);
      work.finish(mismatch.empty() ? nullptr : std::make_exception_ptr(Error(mismatch)));
    } catch (...) {
      failTask(*task, std::current_exception());
    }
  }
}

void GlooProcessGroup::failTask(Task& task, std::exception_ptr e) {
  const Call& call = *task.call;
  {
    std::lock_guard lock(queueMutex_);
    if (stopping_) {
      // This rank is leaving: the failure is its own doing, no peer's.
      call.work->finish(std::make_exception_ptr(Error(shutDownMessage(call))));
      return;
    }
  }
  std::string message;
  auto local = [&](const char* what) {  // this rank's own trouble: a device copy, memory
    message = fmt::format("{}: {} failed on rank {} of {} (gloo): {}", opKindName(call.kind),
                          call.isCollective() ? fmt::format("sequence {}", call.sequence) : call.describe(), rank(),
                          size(), what);
    markBroken(message);
  };
  try {
    std::rethrow_exception(e);
  } catch (const PeerError& pe) {
    message = failCall(call, pe.what(), pe.suspect, pe.timedOut);
  } catch (const Error& le) {
    local(le.what());
  } catch (const LocalError& le) {
    local(le.what());
  } catch (const std::exception& ex) {
    const std::string what = glooText(ex.what());
    const int suspect = call.isCollective() ? rankOfAddress(what) : call.peer;
    message = failCall(call, what, suspect, saysTimeout(what));
  }
  call.work->finish(std::make_exception_ptr(Error(message)));
  // Gloo's context is dead after an I/O error; closing it now wakes the
  // peers that wait on this rank, which then find its post in the store.
  closeContext();
}

const Stream& GlooProcessGroup::streamFor(Device device, bool p2p) {
  std::lock_guard lock(streamsMutex_);
  const std::string key = device.str() + (p2p ? "/p2p" : "/collectives");
  auto it = streams_.find(key);
  if (it == streams_.end()) it = streams_.emplace(key, Stream::create(device)).first;
  return it->second;
}

void GlooProcessGroup::waitFor(const Event& event, const Call& call, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  while (!event.query()) {
    if (std::chrono::steady_clock::now() > deadline)
      throw LocalError(fmt::format("{} did not finish within {} ms", what, timeout().count()));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Staging GlooProcessGroup::stageIn(Task& task) {
  const Call& call = *task.call;
  Staging s;
  s.in.assign(call.inputs.size(), nullptr);
  s.out.assign(call.outputs.size(), nullptr);
  const BufferRef* first = firstBuffer(call);
  if (!first) return s;
  if (first->device.isCpu()) {
    for (size_t i = 0; i < call.inputs.size(); ++i)
      if (call.inputs[i].buffer) s.in[i] = hostAddress(call.inputs[i].ptr());
    for (size_t i = 0; i < call.outputs.size(); ++i)
      if (call.outputs[i].buffer) s.out[i] = hostAddress(call.outputs[i].ptr());
    return s;
  }
  const Device device = first->device;
  const Stream& stream = streamFor(device, false);
  DeviceInterface& driver = deviceInterface(device);
  PinnedAllocator& pinned = PinnedAllocator::instance();
  stream.wait(*task.ready);
  auto stage = [&](const BufferRef& b, bool copy) -> void* {
    if (b.bytes() == 0) return nullptr;
    void* host = pinned.allocate(b.bytes());
    s.pinned.push_back(host);
    driver.recordStream(b.buffer->ptr(), stream.handle());
    if (copy) {
      driver.copyDeviceToHostAsync(host, b.ptr(), b.bytes(), stream.handle());
      pinned.recordUse(host, device, stream.handle());
    }
    return host;
  };
  for (size_t i = 0; i < call.inputs.size(); ++i) s.in[i] = stage(call.inputs[i], true);
  for (size_t o = 0; o < call.outputs.size(); ++o) {
    for (size_t i = 0; i < call.inputs.size() && !s.out[o]; ++i)
      if (sameRegion(call.outputs[o], call.inputs[i])) s.out[o] = s.in[i];
    if (!s.out[o]) s.out[o] = stage(call.outputs[o], false);
  }
  Event copied;
  copied.record(stream);
  waitFor(copied, call, fmt::format("the copy of its inputs from {} to the host", device.str()));
  return s;
}

void GlooProcessGroup::stageOut(Task& task, Staging& s) {
  const Call& call = *task.call;
  const BufferRef* first = firstBuffer(call);
  if (!first || first->device.isCpu()) return;
  if (call.kind == OpKind::broadcast && call.root == rank()) return;  // the root's data did not change
  const Device device = first->device;
  const Stream& stream = streamFor(device, false);
  DeviceInterface& driver = deviceInterface(device);
  for (size_t o = 0; o < call.outputs.size(); ++o) {
    if (!s.out[o]) continue;
    driver.copyHostToDeviceAsync(call.outputs[o].ptr(), s.out[o], call.outputs[o].bytes(), stream.handle());
    PinnedAllocator::instance().recordUse(s.out[o], device, stream.handle());
  }
  Event copied;
  copied.record(stream);
  waitFor(copied, call, fmt::format("the copy of its results from the host to {}", device.str()));
}

std::string GlooProcessGroup::runCollective(Task& task) {
  const Call& call = *task.call;
  Staging staging = stageIn(task);
  const bool check = debugLevel() != DebugLevel::off && size() > 1;
  bool useCache = false;
  if (check) {
    if (debugLevel() == DebugLevel::detail) {
      int missing = -1;
      std::string mismatch;
      try {
        mismatch = exchangeSignatures(*store(), call, rank(), size(), timeout(), missing);
      } catch (const Error& e) {
        throw PeerError(e.what(), missing, true);
      }
      if (!mismatch.empty()) return mismatch;
    }
    Fingerprint fp = fingerprintOf(call);
    fp.cachedBuild = ops_->cachedBuild(call, staging.in);
    const std::vector<Fingerprint> all = ops_->exchange(fp);
    if (std::string mismatch = findMismatch(call, all); !mismatch.empty()) return mismatch;
    useCache = fp.cachedBuild != 0 && std::all_of(all.begin(), all.end(), [&](const Fingerprint& f) {
                 return f.cachedBuild == fp.cachedBuild;
               });
    if (debugLevel() == DebugLevel::detail) store()->deleteKey(signatureKey(call.sequence, rank()));
  }
  ops_->run(call, staging.in, staging.out, useCache, check);
  stageOut(task, staging);
  return {};
}

void GlooProcessGroup::postP2p(Task& task) {
  const Call& call = *task.call;
  const BufferRef& b = call.kind == OpKind::send ? call.inputs[0] : call.outputs[0];
  if (b.bytes() > 0) {
    if (b.device.isCpu()) {
      task.host = hostAddress(b.ptr());
    } else {
      task.host = PinnedAllocator::instance().allocate(b.bytes());
      task.pinned = true;
      // A blocking copy on the caller's stream: it sees what came before.
      if (call.kind == OpKind::send)
        deviceInterface(b.device).copyDeviceToHost(task.host, b.ptr(), b.bytes(), currentStream(b.device).handle());
    }
  }
  std::lock_guard lock(contextMutex_);
  KILN_CHECK(!contextClosed_, "{}", brokenMessage(call));
  task.header = fingerprintOf(call);
  task.headerBuffer = context_->createUnboundBuffer(&task.header, sizeof(Fingerprint));
  const uint32_t tag = static_cast<uint32_t>(call.tag);
  if (call.kind == OpKind::send) {
    task.headerBuffer->send(call.peer, ::gloo::Slot::build(kHeaderSlot, tag));
    if (b.bytes() > 0) {
      task.dataBuffer = context_->createUnboundBuffer(task.host, b.bytes());
      task.dataBuffer->send(call.peer, ::gloo::Slot::build(kDataSlot, tag));
    }
  } else {
    // Both posted now, so that a peer's send completes whatever this rank's
    // receive thread is waiting for.
    task.headerBuffer->recv(call.peer, ::gloo::Slot::build(kHeaderSlot, tag));
    if (b.bytes() > 0) {
      task.dataBuffer = context_->createUnboundBuffer(task.host, b.bytes());
      task.dataBuffer->recv(call.peer, ::gloo::Slot::build(kDataSlot, tag));
    }
  }
}

void GlooProcessGroup::completeP2p(Task& task) {
  const Call& call = *task.call;
  const std::string aborted = fmt::format("{}: aborted", call.describe());
  if (call.kind == OpKind::send) {
    if (!task.headerBuffer->waitSend(timeout()) || (task.dataBuffer && !task.dataBuffer->waitSend(timeout())))
      throw LocalError(aborted);
    return;
  }
  if (!task.headerBuffer->waitRecv(timeout())) throw LocalError(aborted);
  if (std::string mismatch = findP2pMismatch(call, rank(), task.header); !mismatch.empty()) {
    // The sender's data, of another size, may still be on its way into
    // this rank's posted receive: close the context before the memory goes.
    markBroken(mismatch);
    closeContext();
    throw Error(mismatch);
  }
  const BufferRef& b = call.outputs[0];
  if (b.bytes() == 0) return;
  if (!task.dataBuffer->waitRecv(timeout())) throw LocalError(aborted);
  if (!b.device.isCpu()) {
    const Stream& stream = streamFor(b.device, true);
    DeviceInterface& driver = deviceInterface(b.device);
    driver.recordStream(b.buffer->ptr(), stream.handle());
    driver.copyHostToDeviceAsync(b.ptr(), task.host, b.bytes(), stream.handle());
    PinnedAllocator::instance().recordUse(task.host, b.device, stream.handle());
    Event copied;
    copied.record(stream);
    waitFor(copied, call, fmt::format("the copy of the received data to {}", b.device.str()));
  }
}

void GlooProcessGroup::p2pLoop() {
  for (;;) {
    std::shared_ptr<Task> task;
    bool stopping = false;
    {
      std::unique_lock lock(queueMutex_);
      queueChanged_.wait(lock, [&] { return stopping_ || !p2pQueue_.empty(); });
      if (p2pQueue_.empty()) return;
      task = std::move(p2pQueue_.front());
      p2pQueue_.pop_front();
      stopping = stopping_;
      p2pCurrent_ = task;
    }
    Work& work = *task->call->work;
    if (stopping) {
      work.finish(std::make_exception_ptr(Error(shutDownMessage(*task->call))));
      continue;
    }
    work.markStarted();
    try {
      completeP2p(*task);
      work.finish(nullptr);
    } catch (const Error& e) {  // a mismatch (the group is broken already) or a closed context
      std::lock_guard lock(queueMutex_);
      work.finish(stopping_ ? std::make_exception_ptr(Error(shutDownMessage(*task->call))) : std::current_exception());
    } catch (...) {
      failTask(*task, std::current_exception());
    }
    std::lock_guard lock(queueMutex_);
    p2pCurrent_.reset();
  }
}

void GlooProcessGroup::closeContext() {
  std::lock_guard lock(contextMutex_);
  if (contextClosed_ || !context_) return;
  contextClosed_ = true;
  try {
    context_->closeConnections();
  } catch (const std::exception&) {
  }
}

void GlooProcessGroup::closeTransport() {
  {
    std::lock_guard lock(queueMutex_);
    stopping_ = true;
    // A send or receive in flight stops waiting at once (Gloo's unbound
    // buffers can be aborted; a flag set before a wait ends that wait too).
    if (p2pCurrent_)
      for (auto* b : {p2pCurrent_->headerBuffer.get(), p2pCurrent_->dataBuffer.get()})
        if (b) b->abortWaitRecv(), b->abortWaitSend();
  }
  queueChanged_.notify_all();
  // A collective in flight cannot be interrupted (Gloo 0.5.0's algorithm
  // classes have no abort, and closing the pairs does not wake their
  // waits): it ends at its timeout at the latest, as shut down. The queued
  // calls fail as shut down. Then the connections close, which the peers see.
  if (worker_.joinable()) worker_.join();
  if (p2pWorker_.joinable()) p2pWorker_.join();
  closeContext();
  ops_.reset();
  context_.reset();
}

}  // namespace
}  // namespace gloo_backend

std::shared_ptr<ProcessGroup> createGlooProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                                                     const ProcessGroupOptions& options) {
  return std::make_shared<gloo_backend::GlooProcessGroup>(std::move(store), rank, size, options);
}

#endif  // KILN_HAVE_GLOO

}  // namespace kiln::runtime::dist

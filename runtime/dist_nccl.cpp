// The NCCL backend of process groups (DESIGN.md §9), for cuda tensors.
// libnccl.so.2 is opened at run time (runtime/cuda_libraries.h's search,
// KILN_NCCL_LIBRARY overrides it), like every CUDA library of kiln, so kiln
// starts and runs its other backends where NCCL or a GPU is missing; the
// types come from the toolkit's nccl.h and cuda.h at build time
// (KILN_HAVE_NCCL), nothing is linked.
//
// As PyTorch's ProcessGroupNCCL: rank 0 makes the unique id and puts it in
// the group's store, the others read it; every rank then forms the
// communicator (non-blocking, polled, so that a rank that never joins is a
// timeout instead of a hang). A call enqueues its NCCL operation on the
// group's communication stream, which first waits for the caller's current
// stream (an event), and records an end event; Work::wait() makes the
// caller's current stream wait for that event. A watchdog thread polls the
// end events and ncclCommGetAsyncError: a call past its timeout, or an
// asynchronous error, aborts the communicator (ncclCommAbort: destroy can
// hang on a dead peer) and fails every call in flight, naming the ranks
// that did not report a failure of their own (Note [Naming the failed
// rank]). The signature check runs on a helper Gloo group over the same
// store (a blocking all-gather of the fingerprint on the caller's thread;
// PyTorch's DETAIL mode does the same), when kiln has Gloo.
//
// Without a GPU (this machine) it stops at "nccl: no CUDA device: ..."; the
// data path is untested here (docs/distributed.md).
#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <thread>

#include "runtime/cuda_libraries.h"
#include "runtime/device_interface.h"
#include "runtime/dist_fingerprint.h"
#include "runtime/dist_process_group.h"
#include "runtime/dynamic_library.h"
#include "runtime/error.h"
#include "runtime/stream.h"

#if defined(KILN_HAVE_CUDA) && defined(KILN_HAVE_NCCL)
#include <nccl.h>

#include "runtime/cuda_api.h"
#endif

namespace kiln::runtime::dist {
namespace {

/// Why NCCL cannot run here, or empty: a GPU first (DIST_NOTES: probe the
/// device count first), then the build, then the library.
std::string ncclUnavailableReason() {
  std::string why;
  if (!isAvailable(DeviceType::cuda, &why) || runtime::deviceCount(DeviceType::cuda) == 0)
    return fmt::format("nccl: no CUDA device: {}", why.empty() ? "the CUDA driver reports no GPU" : why);
#if !defined(KILN_HAVE_CUDA) || !defined(KILN_HAVE_NCCL)
  return "nccl: this build of kiln has no NCCL support (it was built without the CUDA toolkit's cuda.h and nccl.h)";
#else
  const cuda::LibraryProbe& probe = cuda::probeLibrary(cuda::Library::nccl);
  if (!probe.found) return fmt::format("nccl: {}", probe.reason);
  return {};
#endif
}

}  // namespace

bool ncclAvailable(std::string* why) {
  std::string reason = ncclUnavailableReason();
  if (why) *why = reason;
  return reason.empty();
}

#if !defined(KILN_HAVE_CUDA) || !defined(KILN_HAVE_NCCL)

std::shared_ptr<ProcessGroup> createNcclProcessGroup(std::shared_ptr<Store>, int, int, const ProcessGroupOptions&) {
  fail("{}", ncclUnavailableReason());
}

#else

namespace nccl_backend {
namespace {

/// NCCL's entry points, resolved once from libnccl.so.2.
struct NcclApi {
  std::string error;
// clang-format off
#define KILN_NCCL_ENTRIES(X)                                                              \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclAllReduce)        \
  X(ncclBroadcast) X(ncclAllGather) X(ncclReduceScatter) X(ncclSend) X(ncclRecv)         \
  X(ncclGroupStart) X(ncclGroupEnd) X(ncclCommAbort) X(ncclCommDestroy)                  \
  X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclGetLastError)
// clang-format on
#define KILN_NCCL_FIELD(fn) decltype(&::fn) fn = nullptr;
  KILN_NCCL_ENTRIES(KILN_NCCL_FIELD)
#undef KILN_NCCL_FIELD
};

const NcclApi& api() {
  static const NcclApi table = [] {
    NcclApi t;
    const std::vector<std::string> candidates = cuda::libraryCandidates(cuda::Library::nccl);
    static const DynamicLibrary library = DynamicLibrary::open(candidates);
    if (!library.loaded()) {
      t.error = fmt::format("nccl: {}", library.error());
      return t;
    }
    std::string why;
#define KILN_NCCL_RESOLVE(fn)                                         \
  t.fn = reinterpret_cast<decltype(t.fn)>(library.symbol(#fn, &why)); \
  if (!t.fn && t.error.empty()) t.error = fmt::format("nccl: {} lacks {}: {}", library.name(), #fn, why);
    KILN_NCCL_ENTRIES(KILN_NCCL_RESOLVE)
#undef KILN_NCCL_RESOLVE
    return t;
  }();
  return table;
}

/// Throws kiln::Error naming the call and NCCL's error.
void ncclCheck(ncclResult_t result, const char* what, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const char* last = comm ? api().ncclGetLastError(comm) : nullptr;
  fail("nccl: {} failed: {}{}{}", what, api().ncclGetErrorString(result), last && *last ? ": " : "", last ? last : "");
}

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::boolean: return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t ncclOp(ReduceOp op, DType dtype) {
  if (dtype == DType::boolean)  // or / and on 0 and 1, as on Gloo
    return op == ReduceOp::sum || op == ReduceOp::max ? ncclMax : ncclMin;
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::product: return ncclProd;
  }
  return ncclSum;
}

void* address(const BufferRef& b) { return b.buffer ? reinterpret_cast<void*>(cuda::pointerOf(b.ptr())) : nullptr; }

struct InFlight {
  std::shared_ptr<Call> call;
  Event end;
  std::chrono::steady_clock::time_point started;
  std::vector<std::shared_ptr<Buffer> > temporaries;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<Store> store, int rank, int size, const ProcessGroupOptions& options)
      : ProcessGroup("nccl", std::move(store), rank, size, options) {
    const int count = runtime::deviceCount(DeviceType::cuda);
    device_ = options.device.value_or(Device::cuda(rank % count));
    KILN_CHECK(device_.isCuda() && device_.index() < count, "init_process_group: nccl needs a cuda device, got {}",
               device_.str());
    KILN_CHECK(api().error.empty(), "{}", api().error);
    if (debugLevel() != DebugLevel::off && size > 1 && glooAvailable(nullptr)) {
      ProcessGroupOptions helper = options;
      helper.debug = DebugLevel::off;
      checker_ =
          createGlooProcessGroup(std::make_shared<PrefixStore>("kiln/nccl/check", this->store()), rank, size, helper);
    }
    formCommunicator();
    stream_ = Stream::create(device_);
    watchdog_ = std::thread([this] { watch(); });
  }
  ~NcclProcessGroup() override { abort(); }

 protected:
  void start(std::shared_ptr<Call> call) override;
  void closeTransport() override;

 private:
  void formCommunicator();
  void checkSignature(const Call& call);
  void enqueue(const Call& call, InFlight& flight);
  void settle(const Call& call);
  void watch();
  void abortAll(const std::string& what, bool timedOut);
  CUstream cuStream() const { return cuda::streamOf(device_.index(), stream_.handle()); }

  Device device_;
  std::shared_ptr<ProcessGroup> checker_;
  ncclComm_t comm_ = nullptr;
  Stream stream_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<InFlight> inFlight_;
  bool stopping_ = false;
  std::thread watchdog_;
};

void NcclProcessGroup::formCommunicator() {
  cuda::makeCurrent(device_.index());
  ncclUniqueId id;
  const std::string key = "kiln/nccl/unique_id";
  if (rank() == 0) {
    ncclCheck(api().ncclGetUniqueId(&id), "ncclGetUniqueId");
    store()->set(key, Bytes(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id)));
  } else {
    try {
      store()->wait({key}, timeout());
    } catch (const Error& e) {
      fail("init_process_group: nccl rank {} of {}: rank 0 did not publish the unique id: {}", rank(), size(),
           e.what());
    }
    const Bytes b = store()->get(key);
    KILN_CHECK(b.size() == sizeof(id), "init_process_group: nccl: the unique id in the store has {} bytes, not {}",
               b.size(), sizeof(id));
    std::memcpy(&id, b.data(), sizeof(id));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclCheck(api().ncclCommInitRankConfig(&comm_, size(), id, rank(), &config), "ncclCommInitRankConfig");
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    ncclCheck(api().ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_);
    if (state == ncclInProgress && std::chrono::steady_clock::now() > deadline) {
      api().ncclCommAbort(comm_);
      comm_ = nullptr;
      fail(
          "init_process_group: nccl rank {} of {}: the communicator did not form within {} ms (a rank did not "
          "join)",
          rank(), size(), timeout().count());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ncclCheck(state, "ncclCommInitRankConfig", comm_);
}

void NcclProcessGroup::checkSignature(const Call& call) {
  if (!checker_ || !call.isCollective()) return;
  if (debugLevel() == DebugLevel::detail) {
    int missing = -1;
    const std::string mismatch = exchangeSignatures(*store(), call, rank(), size(), timeout(), missing);
    KILN_CHECK(mismatch.empty(), "{}", mismatch);
  }
  const Fingerprint mine = fingerprintOf(call);
  auto in = allocateBuffer(Device::cpu(), sizeof(Fingerprint));
  std::memcpy(in->hostData(), &mine, sizeof(Fingerprint));
  std::vector<BufferRef> outs;
  for (int r = 0; r < size(); ++r)
    outs.push_back(
        BufferRef::of(allocateBuffer(Device::cpu(), sizeof(Fingerprint)), 0, sizeof(Fingerprint), DType::boolean));
  checker_->allGather(outs, BufferRef::of(in, 0, sizeof(Fingerprint), DType::boolean))->wait();
  std::vector<Fingerprint> all(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r)
    std::memcpy(&all[static_cast<size_t>(r)], outs[static_cast<size_t>(r)].buffer->hostData(), sizeof(Fingerprint));
  const std::string mismatch = findMismatch(call, all);
  KILN_CHECK(mismatch.empty(), "{}", mismatch);
  if (debugLevel() == DebugLevel::detail) store()->deleteKey(signatureKey(call.sequence, rank()));
}

void NcclProcessGroup::enqueue(const Call& call, InFlight& flight) {
  const CUstream s = cuStream();
  const BufferRef* subject = call.subject();
  const ncclDataType_t type = subject ? ncclType(subject->dtype) : ncclUint8;
  const size_t count = subject ? static_cast<size_t>(subject->numel) : 0;
  DeviceInterface& driver = deviceInterface(device_);
  auto temporary = [&](size_t bytes) {
    auto b = allocateBuffer(device_, bytes);
    driver.recordStream(b->ptr(), stream_.handle());
    flight.temporaries.push_back(b);
    return b;
  };
  switch (call.kind) {
    case OpKind::allReduce:
      ncclCheck(api().ncclAllReduce(address(call.inputs[0]), address(call.inputs[0]), count, type,
                                    ncclOp(call.op, subject->dtype), comm_, s),
                "ncclAllReduce", comm_);
      break;
    case OpKind::broadcast:
      ncclCheck(api().ncclBroadcast(address(call.inputs[0]), address(call.inputs[0]), count, type, call.root, comm_, s),
                "ncclBroadcast", comm_);
      break;
    case OpKind::allGather: {
      const size_t bytes = subject->bytes();
      auto gathered = temporary(bytes * static_cast<size_t>(size()));
      ncclCheck(api().ncclAllGather(address(call.inputs[0]), reinterpret_cast<void*>(cuda::pointerOf(gathered->ptr())),
                                    count, type, comm_, s),
                "ncclAllGather", comm_);
      for (int r = 0; r < size(); ++r)
        driver.copyDeviceToDevice(call.outputs[static_cast<size_t>(r)].ptr(),
                                  gathered->ptr(static_cast<size_t>(r) * bytes), bytes, stream_.handle());
      break;
    }
    case OpKind::reduceScatter: {
      const size_t bytes = subject->bytes();
      auto packed = temporary(bytes * static_cast<size_t>(size()));
      for (int r = 0; r < size(); ++r)
        driver.copyDeviceToDevice(packed->ptr(static_cast<size_t>(r) * bytes),
                                  call.inputs[static_cast<size_t>(r)].ptr(), bytes, stream_.handle());
      ncclCheck(
          api().ncclReduceScatter(reinterpret_cast<void*>(cuda::pointerOf(packed->ptr())), address(call.outputs[0]),
                                  count, type, ncclOp(call.op, subject->dtype), comm_, s),
          "ncclReduceScatter", comm_);
      break;
    }
    case OpKind::allToAll:
      ncclCheck(api().ncclGroupStart(), "ncclGroupStart");
      for (int r = 0; r < size(); ++r) {
        ncclCheck(api().ncclSend(address(call.inputs[static_cast<size_t>(r)]), count, type, r, comm_, s), "ncclSend",
                  comm_);
        ncclCheck(api().ncclRecv(address(call.outputs[static_cast<size_t>(r)]), count, type, r, comm_, s), "ncclRecv",
                  comm_);
      }
      ncclCheck(api().ncclGroupEnd(), "ncclGroupEnd");
      break;
    case OpKind::send:
      ncclCheck(api().ncclSend(address(call.inputs[0]), count, type, call.peer, comm_, s), "ncclSend", comm_);
      break;
    case OpKind::recv:
      ncclCheck(api().ncclRecv(address(call.outputs[0]), count, type, call.peer, comm_, s), "ncclRecv", comm_);
      break;
    case OpKind::barrier: {
      auto one = temporary(sizeof(float));
      const float zero = 0;
      driver.fill(one->ptr(), sizeof(float), &zero, sizeof(float), stream_.handle());
      ncclCheck(api().ncclAllReduce(address(BufferRef::of(one, 0, 1, DType::f32)),
                                    address(BufferRef::of(one, 0, 1, DType::f32)), 1, ncclFloat32, ncclSum, comm_, s),
                "ncclAllReduce", comm_);
      break;
    }
  }
}

void NcclProcessGroup::settle(const Call& call) {
  // A non-blocking communicator may still be enqueuing the operation
  // (ncclInProgress); NCCL wants no other call on it until it is done.
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  ncclResult_t state = ncclInProgress;
  for (;;) {
    ncclCheck(api().ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_);
    if (state != ncclInProgress) break;
    KILN_CHECK(std::chrono::steady_clock::now() < deadline, "{}: nccl did not accept the operation within {} ms",
               call.describe(), timeout().count());
    std::this_thread::yield();
  }
  ncclCheck(state, call.describe().c_str(), comm_);
}

void NcclProcessGroup::start(std::shared_ptr<Call> call) {
  checkSignature(*call);
  cuda::makeCurrent(device_.index());
  InFlight flight;
  flight.call = call;
  Event ready;
  ready.record(currentStream(device_));
  stream_.wait(ready);
  DeviceInterface& driver = deviceInterface(device_);
  for (const auto* list : {&call->inputs, &call->outputs})
    for (const BufferRef& b : *list)
      if (b.buffer) driver.recordStream(b.buffer->ptr(), stream_.handle());
  std::lock_guard lock(mutex_);
  KILN_CHECK(comm_, "{}", brokenMessage(*call));
  enqueue(*call, flight);
  settle(*call);
  flight.end.record(stream_);
  flight.started = std::chrono::steady_clock::now();
  call->work->markStarted();
  call->work->setOnWait([end = flight.end, device = device_] { currentStream(device).wait(end); });
  inFlight_.push_back(std::move(flight));
  changed_.notify_all();
}

void NcclProcessGroup::abortAll(const std::string& what, bool timedOut) {
  // mutex_ held.
  if (comm_) api().ncclCommAbort(comm_);
  comm_ = nullptr;
  for (InFlight& f : inFlight_) {
    // The first call in flight names the culprit; the others share its verdict.
    const std::string message = broken()
                                    ? brokenMessage(*f.call)
                                    : failCall(*f.call, what, f.call->isCollective() ? -1 : f.call->peer, timedOut);
    f.call->work->finish(std::make_exception_ptr(Error(message)));
  }
  inFlight_.clear();
}

void NcclProcessGroup::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    changed_.wait_for(lock, std::chrono::milliseconds(inFlight_.empty() ? 100 : 1));
    while (!inFlight_.empty() && inFlight_.front().end.query()) {
      inFlight_.front().call->work->finish(nullptr);
      inFlight_.pop_front();
    }
    if (!comm_ || inFlight_.empty()) continue;
    ncclResult_t async = ncclSuccess;
    api().ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      const char* last = api().ncclGetLastError(comm_);
      abortAll(fmt::format("nccl: asynchronous error: {}{}{}", api().ncclGetErrorString(async), last ? ": " : "",
                           last ? last : ""),
               false);
    } else if (std::chrono::steady_clock::now() - inFlight_.front().started > timeout()) {
      abortAll(fmt::format("nccl: {} did not finish within {} ms; the communicator was aborted",
                           inFlight_.front().call->describe(), timeout().count()),
               true);
    }
  }
}

void NcclProcessGroup::closeTransport() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  std::lock_guard lock(mutex_);
  for (InFlight& f : inFlight_)
    f.call->work->finish(std::make_exception_ptr(
        Error(fmt::format("{}: the nccl process group was shut down before the call finished", f.call->describe()))));
  inFlight_.clear();
  if (comm_) api().ncclCommAbort(comm_);  // destroy can hang on a dead peer (DIST_NOTES)
  comm_ = nullptr;
  if (checker_) checker_->abort();
}

}  // namespace
}  // namespace nccl_backend

std::shared_ptr<ProcessGroup> createNcclProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                                                     const ProcessGroupOptions& options) {
  const std::string why = ncclUnavailableReason();
  KILN_CHECK(why.empty(), "{}", why);
  return std::make_shared<nccl_backend::NcclProcessGroup>(std::move(store), rank, size, options);
}

#endif

}  // namespace kiln::runtime::dist

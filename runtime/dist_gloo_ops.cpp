// The Gloo backend's collectives on host memory (runtime/dist_gloo.h):
// Gloo's algorithm classes per dtype and reduce op, calls split in pieces
// Gloo's int counts can hold, and the algorithm cache; and the transport's
// small helpers (the TCP device a group listens on, Gloo's messages).
//
// Note [Cached Gloo algorithms]
// Gloo's algorithm classes (AllreduceHalvingDoubling, BroadcastOneToAll,
// AllgatherRing, ReduceScatterHalvingDoubling) register their buffers with
// the context's pairs when they are built and take slots from
// context->nextSlot(), so every rank must build them in the same order;
// building one per call costs about a quarter of a small call's latency
// (DIST_NOTES). kiln keeps the instances of small one-piece calls (at most
// kCacheBytes per rank, kMaxEntries of them), keyed by kind, dtype, reduce
// op, root, count and the host addresses they work on; and of one-piece
// all-reduces above that size, the last kMaxLargeEntries of them: building
// an AllreduceRingChunked per call (two inboxes of the call's size malloc'd
// and freed, its buffers registered with the pairs) made a 64 MiB
// all-reduce 1.5x slower than Gloo's own loop on the same instance
// (kiln-bench-dist). A cached large instance keeps those inboxes, of which
// Gloo writes one chunk (bytes / (2 size)) each. Addresses differ
// between ranks, so a rank alone cannot know whether its peers hit too, nor
// whether their hits are the same instances: every rank builds anew
// together, so an instance is named by the call that built it (its
// sequence number, the same on every rank). Each rank names the build it
// would reuse in its fingerprint (Fingerprint::cachedBuild), and a call
// reuses cached instances only when every rank names the same build;
// otherwise every rank builds new ones, in the same order. (Hits of
// different builds happen: rank 0 alternates two buffers while rank 1 keeps
// one, so rank 1's entry is rebuilt at the miss while rank 0 keeps its first
// one; reusing both ran two instances of different slots against each
// other, a hang until the timeout, which kiln-bench-dist found.) Without fingerprints
// (KILN_DIST_DEBUG=off) nothing is cached this way; see the next note.
//
// Note [Staged all-reduces without fingerprints]
// With KILN_DIST_DEBUG=off no rank knows what the others hold, and building
// an algorithm per call made a 1 KiB all-reduce 2-5 ms where a cached one
// takes 0.1-0.3 ms (kiln-bench-dist: Gloo's first messages can arrive
// before the peer has registered the new buffers). So small all-reduces
// (up to kCacheBytes) run on a staging buffer of the group's own, keyed by
// dtype, reduce op and count only: copy in, run, copy out. Nothing rank-
// local is in the key, so ranks that make the same calls (which off mode
// requires anyway) build and drop the same instances at the same calls;
// ranks that do not wait for each other until the timeout, as they would
// without the cache. The cache is cleared when it holds kMaxEntries. The option-based API
// (gloo::alltoall) is used only for all_to_all, which has no class.
#include <gloo/allgather_ring.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/reduce_scatter.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <type_traits>

#include "runtime/dist_gloo.h"
#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::runtime::dist::gloo_backend {
namespace {

constexpr size_t kCacheBytes = 1 << 20;
constexpr size_t kMaxEntries = 32;
/// all_reduce calls above kCacheBytes are cached too, at most this many
/// (Note [Cached Gloo algorithms]).
constexpr size_t kMaxLargeEntries = 2;
/// Above this many bytes per rank, all_reduce uses the chunked ring.
constexpr size_t kHalvingDoublingBytes = 1 << 20;

// Reductions Gloo has no built-in for: f16 and bf16 (computed in f32 and
// rounded back, as PyTorch's CPU kernels do) and bool (or / and).
template <float (*toF32)(uint16_t), uint16_t (*fromF32)(float), ReduceOp kOp>
void reduce16(uint16_t* x, const uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float a = toF32(x[i]), b = toF32(y[i]);
    float r = 0;
    if constexpr (kOp == ReduceOp::sum || kOp == ReduceOp::avg) r = a + b;
    if constexpr (kOp == ReduceOp::product) r = a * b;
    if constexpr (kOp == ReduceOp::min) r = b < a ? b : a;
    if constexpr (kOp == ReduceOp::max) r = b > a ? b : a;
    x[i] = fromF32(r);
  }
}

template <bool kOr>
void reduceBool(uint8_t* x, const uint8_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = kOr ? (x[i] || y[i]) : (x[i] && y[i]);
}

template <float (*toF32)(uint16_t), uint16_t (*fromF32)(float)>
const ::gloo::ReductionFunction<uint16_t>* reduction16(ReduceOp op) {
  using F = ::gloo::ReductionFunction<uint16_t>;
  static const F sum(::gloo::CUSTOM, &reduce16<toF32, fromF32, ReduceOp::sum>);
  static const F product(::gloo::CUSTOM, &reduce16<toF32, fromF32, ReduceOp::product>);
  static const F min(::gloo::CUSTOM, &reduce16<toF32, fromF32, ReduceOp::min>);
  static const F max(::gloo::CUSTOM, &reduce16<toF32, fromF32, ReduceOp::max>);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return &sum;
    case ReduceOp::product: return &product;
    case ReduceOp::min: return &min;
    case ReduceOp::max: return &max;
  }
  return &sum;
}

/// The reduction of `op` on elements of `dtype` stored as T.
template <typename T>
const ::gloo::ReductionFunction<T>* reductionFor(DType dtype, ReduceOp op) {
  using F = ::gloo::ReductionFunction<T>;
  if constexpr (std::is_same_v<T, uint16_t>) {
    return dtype == DType::f16 ? reduction16<f16BitsToF32, f32ToF16Bits>(op)
                               : reduction16<bf16BitsToF32, f32ToBf16Bits>(op);
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    static const F anyOf(::gloo::CUSTOM, &reduceBool<true>);
    static const F allOf(::gloo::CUSTOM, &reduceBool<false>);
    return op == ReduceOp::sum || op == ReduceOp::max ? &anyOf : &allOf;
  } else {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return F::sum;
      case ReduceOp::product: return F::product;
      case ReduceOp::min: return F::min;
      case ReduceOp::max: return F::max;
    }
    return F::sum;
  }
}

/// Calls fn(std::type_identity<T>{}) with the storage type of `dtype`.
template <typename Fn>
decltype(auto) withStorageType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(std::type_identity<float>{});
    case DType::f64: return fn(std::type_identity<double>{});
    case DType::i32: return fn(std::type_identity<int32_t>{});
    case DType::i64: return fn(std::type_identity<int64_t>{});
    case DType::f16:
    case DType::bf16: return fn(std::type_identity<uint16_t>{});
    case DType::boolean: return fn(std::type_identity<uint8_t>{});
  }
  KILN_ASSERT(false, "dtype {} has no Gloo storage type", dtypeName(dtype));
  return fn(std::type_identity<float>{});
}

const BufferRef& subjectOf(const Call& call) {
  const BufferRef* s = call.subject();
  KILN_ASSERT(s, "{} has no buffer", opKindName(call.kind));
  return *s;
}

}  // namespace

void divideInPlace(void* data, int64_t numel, DType dtype, int divisor) {
  const auto n = static_cast<size_t>(numel);
  switch (dtype) {
    case DType::f32:
      for (size_t i = 0; i < n; ++i) static_cast<float*>(data)[i] /= static_cast<float>(divisor);
      return;
    case DType::f64:
      for (size_t i = 0; i < n; ++i) static_cast<double*>(data)[i] /= divisor;
      return;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t& h = static_cast<uint16_t*>(data)[i];
        h = f32ToF16Bits(f16BitsToF32(h) / static_cast<float>(divisor));
      }
      return;
    case DType::bf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t& h = static_cast<uint16_t*>(data)[i];
        h = f32ToBf16Bits(bf16BitsToF32(h) / static_cast<float>(divisor));
      }
      return;
    case DType::i32:
    case DType::i64:
    case DType::boolean: break;
  }
  KILN_ASSERT(false, "avg of {} elements", dtypeName(dtype));
}

GlooOps::GlooOps(std::shared_ptr<::gloo::Context> context, int rank, int size, int64_t maxElementsPerCall,
                 std::chrono::milliseconds timeout)
    : context_(std::move(context)), rank_(rank), size_(size), maxElements_(maxElementsPerCall), timeout_(timeout) {
  if (!context_) return;
  for (int i = 0; i < 2; ++i) {
    fpOut_[i].resize(static_cast<size_t>(size));
    std::vector<const uint8_t*> in{reinterpret_cast<const uint8_t*>(&fpIn_[i])};
    fpGather_[i] = std::make_unique<::gloo::AllgatherRing<uint8_t>>(
        context_, in, reinterpret_cast<uint8_t*>(fpOut_[i].data()), static_cast<int>(sizeof(Fingerprint)));
  }
  barrier_ = std::make_unique<::gloo::BarrierAllToAll>(context_);
}

GlooOps::~GlooOps() {
  // Gloo's algorithm destructors may throw (noexcept(false)) once the
  // context has failed; a destructor must not.
  auto drop = [](std::unique_ptr<::gloo::Algorithm>& a) {
    try {
      a.reset();
    } catch (const std::exception&) {
      (void)a.release();  // leaked: its buffers belong to a dead context
    }
  };
  for (auto& [key, entry] : cache_) drop(entry.algorithm);
  drop(fpGather_[0]);
  drop(fpGather_[1]);
  drop(barrier_);
}

std::vector<Fingerprint> GlooOps::exchange(const Fingerprint& mine) {
  if (!context_) return {mine};
  // Alternate between two instances: a peer that finished this exchange
  // may start the next one (writing into its output buffer on this rank)
  // before this rank has read this one's output, but it cannot start the
  // one after, which needs this rank's next fingerprint.
  const size_t i = exchanges_++ % 2;
  fpIn_[i] = mine;
  fpGather_[i]->run();
  return fpOut_[i];
}

int64_t GlooOps::pieceElements(const Call& call) const {
  const int64_t item = itemSize(subjectOf(call).dtype);
  int64_t limit = std::min<int64_t>(maxElements_, INT_MAX);
  switch (call.kind) {
    case OpKind::broadcast:
    case OpKind::allGather: limit = std::min<int64_t>(limit, INT_MAX / item); break;
    case OpKind::reduceScatter: limit = std::max<int64_t>(1, limit / size_); break;
    default: break;
  }
  return std::max<int64_t>(limit, 1);
}

std::optional<GlooOps::Key> GlooOps::keyOf(const Call& call, const std::vector<void*>& in) const {
  if (!context_) return std::nullopt;
  const bool cachedKind = call.kind == OpKind::allReduce || call.kind == OpKind::broadcast ||
                          call.kind == OpKind::allGather || call.kind == OpKind::reduceScatter;
  if (!cachedKind) return std::nullopt;
  const BufferRef& s = subjectOf(call);
  if (s.numel == 0 || s.numel > pieceElements(call)) return std::nullopt;
  if (s.bytes() > kCacheBytes && call.kind != OpKind::allReduce) return std::nullopt;
  // reduce_scatter works on its own staging: the inputs' addresses do not matter.
  std::vector<void*> where = call.kind == OpKind::reduceScatter ? std::vector<void*>{} : in;
  return Key{static_cast<int>(call.kind),
             static_cast<int>(s.dtype),
             static_cast<int>(call.op),
             call.root,
             s.numel,
             std::move(where)};
}

uint32_t GlooOps::cachedBuild(const Call& call, const std::vector<void*>& in) const {
  const auto key = keyOf(call, in);
  if (!key) return 0;
  const auto it = cache_.find(*key);
  return it == cache_.end() ? 0 : it->second.build;
}

void GlooOps::build(Entry& entry, const Call& call, void* data, int64_t count) {
  const BufferRef& s = subjectOf(call);
  const int n = static_cast<int>(count);
  withStorageType(s.dtype, [&]<typename T>(std::type_identity<T>) {
    const auto* fn = reductionFor<T>(s.dtype, call.op);
    switch (call.kind) {
      case OpKind::allReduce:
        if (static_cast<size_t>(count) * sizeof(T) <= kHalvingDoublingBytes)
          entry.algorithm = std::make_unique<::gloo::AllreduceHalvingDoubling<T>>(
              context_, std::vector<T*>{static_cast<T*>(data)}, n, fn);
        else
          entry.algorithm = std::make_unique<::gloo::AllreduceRingChunked<T>>(
              context_, std::vector<T*>{static_cast<T*>(data)}, n, fn);
        break;
      case OpKind::broadcast:
        entry.algorithm = std::make_unique<::gloo::BroadcastOneToAll<uint8_t>>(
            context_, std::vector<uint8_t*>{static_cast<uint8_t*>(data)}, n * static_cast<int>(sizeof(T)), call.root);
        break;
      case OpKind::allGather:
        entry.staging.resize(static_cast<size_t>(count) * sizeof(T) * static_cast<size_t>(size_));
        entry.algorithm = std::make_unique<::gloo::AllgatherRing<uint8_t>>(
            context_, std::vector<const uint8_t*>{static_cast<const uint8_t*>(data)}, entry.staging.data(),
            n * static_cast<int>(sizeof(T)));
        break;
      case OpKind::reduceScatter:
        entry.staging.resize(static_cast<size_t>(count) * sizeof(T) * static_cast<size_t>(size_));
        entry.algorithm = std::make_unique<::gloo::ReduceScatterHalvingDoubling<T>>(
            context_, std::vector<T*>{reinterpret_cast<T*>(entry.staging.data())}, n * size_,
            std::vector<int>(static_cast<size_t>(size_), n), fn);
        break;
      case OpKind::allToAll:
      case OpKind::send:
      case OpKind::recv:
      case OpKind::barrier: KILN_ASSERT(false, "no Gloo algorithm class for {}", opKindName(call.kind));
    }
  });
}

GlooOps::Entry& GlooOps::entryFor(const Call& call, const std::vector<void*>& in, bool useCache, bool mayCache,
                                  Entry& scratch) {
  const auto key = keyOf(call, in);
  if (key && useCache) {
    auto it = cache_.find(*key);
    KILN_ASSERT(it != cache_.end(), "every rank said {} was cached, this one has lost it", call.describe());
    it->second.age = ++clock_;
    return it->second;
  }
  if (!key || !mayCache) return scratch;
  const bool large = subjectOf(call).bytes() > kCacheBytes;
  // Evicts the least recently used entry (of the large ones only, when `onlyLarge`).
  auto evict = [&](bool onlyLarge) {
    auto oldest = cache_.end();
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if ((!onlyLarge || it->second.large) && (oldest == cache_.end() || it->second.age < oldest->second.age))
        oldest = it;
    if (oldest != cache_.end()) cache_.erase(oldest);
  };
  if (!cache_.count(*key)) {
    const auto largeEntries = std::count_if(cache_.begin(), cache_.end(), [](const auto& e) { return e.second.large; });
    if (large && static_cast<size_t>(largeEntries) >= kMaxLargeEntries) evict(true);
    if (cache_.size() >= kMaxEntries) evict(false);
  }
  Entry& entry = cache_[*key];
  entry = Entry{};
  entry.large = large;
  entry.age = ++clock_;
  entry.build = static_cast<uint32_t>(call.sequence);  // 0 after a wrap: never reused
  return entry;
}

void GlooOps::run(const Call& call, const std::vector<void*>& in, const std::vector<void*>& out, bool useCache,
                  bool mayCache) {
  if (!context_) return runLocal(call, in, out);
  switch (call.kind) {
    case OpKind::allReduce: return allReduce(call, out[0], useCache, mayCache);
    case OpKind::broadcast: return broadcast(call, out[0], useCache, mayCache);
    case OpKind::allGather: return allGather(call, in[0], out, useCache, mayCache);
    case OpKind::reduceScatter: return reduceScatter(call, in, out[0], useCache, mayCache);
    case OpKind::allToAll: return allToAll(call, in, out);
    case OpKind::barrier: return barrier_->run();
    case OpKind::send:
    case OpKind::recv: break;
  }
  KILN_ASSERT(false, "{} is not a collective", opKindName(call.kind));
}

void GlooOps::runLocal(const Call& call, const std::vector<void*>& in, const std::vector<void*>& out) {
  // One rank: every collective is the identity (avg divides by 1).
  const BufferRef* s = call.subject();
  const size_t bytes = s ? s->bytes() : 0;
  if ((call.kind == OpKind::allGather || call.kind == OpKind::reduceScatter || call.kind == OpKind::allToAll) &&
      bytes > 0 && in[0] != out[0])
    std::memcpy(out[0], in[0], bytes);
}

void GlooOps::allReduce(const Call& call, void* data, bool useCache, bool mayCache) {
  const BufferRef& s = call.inputs[0];
  const int64_t piece = pieceElements(call);
  const size_t item = static_cast<size_t>(itemSize(s.dtype));
  if (!mayCache && s.numel > 0 && s.bytes() <= kCacheBytes && s.numel <= piece) {
    // KILN_DIST_DEBUG=off: Note [Staged all-reduces without fingerprints].
    const auto key = std::make_tuple(static_cast<int>(s.dtype), static_cast<int>(call.op), s.numel);
    if (!staged_.count(key) && staged_.size() >= kMaxEntries) staged_.clear();
    Entry& e = staged_[key];
    if (!e.algorithm) {
      e.staging.resize(s.bytes());
      build(e, call, e.staging.data(), s.numel);
    }
    std::memcpy(e.staging.data(), data, s.bytes());
    e.algorithm->run();
    std::memcpy(data, e.staging.data(), s.bytes());
    if (call.op == ReduceOp::avg) divideInPlace(data, s.numel, s.dtype, size_);
    return;
  }
  for (int64_t at = 0; at < s.numel; at += piece) {
    Entry scratch;
    void* where = static_cast<char*>(data) + static_cast<size_t>(at) * item;
    Entry& e = entryFor(call, {data}, useCache, mayCache, scratch);
    if (!e.algorithm) build(e, call, where, std::min(piece, s.numel - at));
    e.algorithm->run();
  }
  if (call.op == ReduceOp::avg) divideInPlace(data, s.numel, s.dtype, size_);
}

void GlooOps::broadcast(const Call& call, void* data, bool useCache, bool mayCache) {
  const BufferRef& s = call.inputs[0];
  const int64_t piece = pieceElements(call);
  const size_t item = static_cast<size_t>(itemSize(s.dtype));
  for (int64_t at = 0; at < s.numel; at += piece) {
    Entry scratch;
    Entry& e = entryFor(call, {data}, useCache, mayCache, scratch);
    if (!e.algorithm)
      build(e, call, static_cast<char*>(data) + static_cast<size_t>(at) * item, std::min(piece, s.numel - at));
    e.algorithm->run();
  }
}

void GlooOps::allGather(const Call& call, const void* in, const std::vector<void*>& out, bool useCache, bool mayCache) {
  const BufferRef& s = call.inputs[0];
  const int64_t piece = pieceElements(call);
  const size_t item = static_cast<size_t>(itemSize(s.dtype));
  for (int64_t at = 0; at < s.numel; at += piece) {
    const int64_t count = std::min(piece, s.numel - at);
    const size_t bytes = static_cast<size_t>(count) * item, offset = static_cast<size_t>(at) * item;
    Entry scratch;
    Entry& e = entryFor(call, {const_cast<void*>(in)}, useCache, mayCache, scratch);
    if (!e.algorithm) build(e, call, const_cast<char*>(static_cast<const char*>(in)) + offset, count);
    e.algorithm->run();
    for (int r = 0; r < size_; ++r)
      std::memcpy(static_cast<char*>(out[static_cast<size_t>(r)]) + offset,
                  e.staging.data() + static_cast<size_t>(r) * bytes, bytes);
  }
}

void GlooOps::reduceScatter(const Call& call, const std::vector<void*>& in, void* out, bool useCache, bool mayCache) {
  const BufferRef& s = call.outputs[0];
  const int64_t piece = pieceElements(call);
  const size_t item = static_cast<size_t>(itemSize(s.dtype));
  for (int64_t at = 0; at < s.numel; at += piece) {
    const int64_t count = std::min(piece, s.numel - at);
    const size_t bytes = static_cast<size_t>(count) * item, offset = static_cast<size_t>(at) * item;
    Entry scratch;
    Entry& e = entryFor(call, in, useCache, mayCache, scratch);
    if (!e.algorithm) build(e, call, nullptr, count);
    for (int r = 0; r < size_; ++r)
      std::memcpy(e.staging.data() + static_cast<size_t>(r) * bytes,
                  static_cast<const char*>(in[static_cast<size_t>(r)]) + offset, bytes);
    e.algorithm->run();
    // Gloo leaves this rank's reduced chunk at the start of the buffer
    // (measured for 2-4 ranks: tests/dist/collectives_test.cpp).
    std::memcpy(static_cast<char*>(out) + offset, e.staging.data(), bytes);
  }
  if (call.op == ReduceOp::avg) divideInPlace(out, s.numel, s.dtype, size_);
}

void GlooOps::allToAll(const Call& call, const std::vector<void*>& in, const std::vector<void*>& out) {
  const size_t bytes = call.inputs[0].bytes();
  if (bytes == 0) return;
  std::vector<uint8_t> packedIn(bytes * static_cast<size_t>(size_)), packedOut(packedIn.size());
  for (int r = 0; r < size_; ++r)
    std::memcpy(packedIn.data() + static_cast<size_t>(r) * bytes, in[static_cast<size_t>(r)], bytes);
  ::gloo::AlltoallOptions opts(context_);
  opts.setInput(packedIn.data(), packedIn.size());
  opts.setOutput(packedOut.data(), packedOut.size());
  opts.setTag(static_cast<uint32_t>(call.sequence));
  opts.setTimeout(timeout_);
  ::gloo::alltoall(opts);
  for (int r = 0; r < size_; ++r)
    std::memcpy(out[static_cast<size_t>(r)], packedOut.data() + static_cast<size_t>(r) * bytes, bytes);
}

// --- the transport ---

std::shared_ptr<::gloo::transport::Device> makeDevice(const ProcessGroupOptions& options) {
  ::gloo::transport::tcp::attr attr;
  if (!options.hostname.empty()) {
    attr.hostname = options.hostname;
    return ::gloo::transport::tcp::CreateDevice(attr);
  }
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    const std::string names(ifname);
    attr.iface = names.substr(0, names.find(','));
    return ::gloo::transport::tcp::CreateDevice(attr);
  }
  // PyTorch's default: the host name when it resolves to an address that
  // can be bound, else the loopback interface.
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0]) {
    try {
      attr.hostname = host;
      return ::gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception&) {
    }
  }
  attr.hostname = "127.0.0.1";
  return ::gloo::transport::tcp::CreateDevice(attr);
}

/// Gloo's message without its source location ("[gloo/x.cc:12] ").
std::string glooText(const std::string& what) {
  static const std::regex location(R"(^\[[^\]]*:\d+\] )");
  return "gloo: " + std::regex_replace(what, location, "");
}

bool saysTimeout(const std::string& what) {
  std::string lower(what);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("timeout") != std::string::npos || lower.find("timed out") != std::string::npos;
}

}  // namespace kiln::runtime::dist::gloo_backend

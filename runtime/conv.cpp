// The CPU's convolution call (runtime/conv.h): which algorithm runs it.
//
// Note [Choosing a convolution algorithm]
// A CPU convolution has up to three algorithms: `onednn_blocked` (oneDNN's
// direct kernels on its own layouts, with reorders), `onednn` (oneDNN on
// kiln's layouts as they are: im2col + GEMM for NCHW) for f32 and bf16
// where the build has oneDNN and oneDNN has a kernel other than its
// reference one (Note [Convolutions on oneDNN] in runtime/conv_onednn.cpp),
// and `direct` (kiln's loops, runtime/conv_direct.cpp) for everything.
// Which one runs, for each distinct call (its encoded arguments and the
// thread count):
// - KILN_CONV_ALGORITHM=onednn_blocked|onednn|direct forces one where it
//   is available (else the order below).
// - setConvBenchmark(true) (kiln::backends::setBenchmark, cudnn.benchmark's
//   meaning): the first call times each available algorithm on the call's
//   own buffers and keeps the fastest for the process and in the store
//   codegen installs (the disk kernel cache, under the CPU's description),
//   so that a later process reads it instead of measuring. The chosen one
//   then runs, so the result is always that algorithm's.
// - Otherwise, and always under runtime::deterministic() (which pins what
//   a measurement could vary, as for the BLAS), the first available in the
//   order onednn_blocked, onednn, direct: measured here on ResNet-18's
//   layers (docs/convolution.md), the blocked kernels with their reorders
//   were 1.0-1.3x faster forward and on most backward calls, and ResNet-18
//   25% faster end to end; oneDNN on kiln's layout won the 7x7 stem's
//   backward (which the benchmark setting finds).
// Each algorithm's result depends on the call only, so eager and compiled
// calls of a convolution agree bit for bit under one choice.
//
// Note [Convolution epilogues]
// Compiled code may give a forward convolution the elementwise kernel after
// it as an epilogue (Note [Matmul epilogues in compiled programs] in
// codegen/compile_graph.cpp): the bias, batch norm's eval affine, the
// activation, a residual add. The call runs the convolution and then the
// kernel over its result, in place, on kiln's pool: one library step, no
// buffer and no launch of its own. The call may run in chunks of whole
// images (each chunk's result at most chunkBytes()), the kernel over each
// chunk right after it while it is in cache, but by default one chunk is
// the whole call: measured here (docs/convolution.md), oneDNN computes a
// batch of 8 ResNet images 2-3x slower one image at a time than at once,
// far more than the pass over the result the epilogue then makes.
// Whatever the chunks, a call without an epilogue is split the same way,
// so compiled results equal eager ones (the convolution and then the
// kernel) bit for bit. The backward calls are never split (weightGrad sums
// over the batch).
#include "runtime/conv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "runtime/blas.h"
#include "runtime/determinism.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

namespace {

std::atomic<bool> benchmarkOn{false};

/// Note [Convolution epilogues]: the most result bytes a chunk holds;
/// KILN_CONV_CHUNK_BYTES (read once) or detail::setConvChunkBytes sets it.
std::atomic<int64_t> chunkLimit{-1};  // -1: not read yet

int64_t chunkBytes() {
  int64_t bytes = chunkLimit.load(std::memory_order_relaxed);
  if (bytes < 0) {
    const char* v = std::getenv("KILN_CONV_CHUNK_BYTES");
    const int64_t fromEnv = v && *v ? std::max<int64_t>(std::atoll(v), 1) : INT64_MAX;
    int64_t expected = -1;
    chunkLimit.compare_exchange_strong(expected, fromEnv);
    bytes = chunkLimit.load(std::memory_order_relaxed);
  }
  return bytes;
}
constexpr int64_t kEpilogueGrain = 32768;

struct Choices {
  std::mutex mutex;
  ConvChoiceStore store;
  std::map<std::vector<int64_t>, ConvAlgorithm> chosen;  // this process's measured choices
};
Choices& choices() {
  static Choices c;
  return c;
}

std::optional<ConvAlgorithm> parseAlgorithm(std::string_view name) {
  for (ConvAlgorithm a : {ConvAlgorithm::onednn, ConvAlgorithm::onednnBlocked, ConvAlgorithm::direct})
    if (convAlgorithmName(a) == name) return a;
  return std::nullopt;
}

/// KILN_CONV_ALGORITHM, read once; detail::forceConvAlgorithm replaces it.
std::atomic<int> forcedAlgorithm{-2};  // -2: not read yet, -1: none

std::optional<ConvAlgorithm> forced() {
  int f = forcedAlgorithm.load(std::memory_order_relaxed);
  if (f == -2) {
    const char* v = std::getenv("KILN_CONV_ALGORITHM");
    std::optional<ConvAlgorithm> a;
    if (v && *v && std::string_view(v) != "auto") {
      a = parseAlgorithm(v);
      KILN_CHECK(a.has_value(), "KILN_CONV_ALGORITHM must be onednn, onednn_blocked, direct or auto, got '{}'", v);
    }
    int expected = -2;
    forcedAlgorithm.compare_exchange_strong(expected, a ? static_cast<int>(*a) : -1);
    f = forcedAlgorithm.load(std::memory_order_relaxed);
  }
  return f < 0 ? std::nullopt : std::optional<ConvAlgorithm>(static_cast<ConvAlgorithm>(f));
}

bool isEmpty(const ConvCall& k) {
  return k.n == 0 || k.c == 0 || k.o == 0 || k.h == 0 || k.w == 0 || k.ho == 0 || k.wo == 0;
}

bool run(const ConvCall& k, ConvAlgorithm a, std::span<void* const> buffers, int threads) {
  if (a == ConvAlgorithm::direct) {
    detail::convDirect(k, buffers);
    return true;
  }
  return detail::oneDnnConv(k, a == ConvAlgorithm::onednnBlocked, buffers, threads);
}

/// Times each candidate on the call's buffers (each run once to warm up,
/// then the best of two) and returns the fastest, with the timings.
std::pair<ConvAlgorithm, std::string> measure(const ConvCall& k, const std::vector<ConvAlgorithm>& candidates,
                                              std::span<void* const> buffers, int threads) {
  ConvAlgorithm best = candidates.front();
  double bestMs = 1e300;
  std::string timings;
  for (ConvAlgorithm a : candidates) {
    run(k, a, buffers, threads);
    double ms = 1e300;
    for (int rep = 0; rep < 2; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      run(k, a, buffers, threads);
      ms = std::min(ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    timings += fmt::format("{}{} {:.3f} ms", timings.empty() ? "" : ", ", convAlgorithmName(a), ms);
    if (ms < bestMs) best = a, bestMs = ms;
  }
  return {best, timings};
}

}  // namespace

std::string_view convAlgorithmName(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::onednnBlocked: return "onednn_blocked";
    case ConvAlgorithm::onednn: return "onednn";
    case ConvAlgorithm::direct: return "direct";
  }
  return "?";
}

void setConvBenchmark(bool enabled) { benchmarkOn.store(enabled, std::memory_order_relaxed); }
bool convBenchmark() { return benchmarkOn.load(std::memory_order_relaxed); }

void setConvChoiceStore(ConvChoiceStore store) {
  Choices& c = choices();
  std::lock_guard lock(c.mutex);
  c.store = std::move(store);
}

namespace detail {

std::string convChoiceKey(const ConvCall& k, int threads, const std::string& description) {
  return fmt::format("conv-choice/v1/{}/{}/threads {}", description, fmt::join(k.encode(), ","), threads);
}

namespace {
/// Whether algorithm `a` can run the call (asking oneDNN makes its
/// primitive, kept for the run that follows).
bool available(const ConvCall& k, ConvAlgorithm a, int threads) {
  if (a == ConvAlgorithm::direct) return true;
  return !isEmpty(k) && (k.dtype == DType::f32 || k.dtype == DType::bf16) &&
         !oneDnnConvImplementation(k, a == ConvAlgorithm::onednnBlocked, threads).empty();
}
constexpr ConvAlgorithm kOrder[] = {ConvAlgorithm::onednnBlocked, ConvAlgorithm::onednn, ConvAlgorithm::direct};
}  // namespace

std::vector<ConvAlgorithm> convCandidates(const ConvCall& k, int threads) {
  std::vector<ConvAlgorithm> all;
  for (ConvAlgorithm a : kOrder)
    if (available(k, a, threads)) all.push_back(a);
  return all;
}

ConvAlgorithm convAlgorithmFor(const ConvCall& k, int threads, std::span<void* const> buffers) {
  if (const std::optional<ConvAlgorithm> f = forced(); f && available(k, *f, threads)) return *f;
  if (!convBenchmark() || deterministic()) {
    // The default: the first available, without asking oneDNN for the
    // variants after it.
    for (ConvAlgorithm a : kOrder)
      if (available(k, a, threads)) return a;
  }
  const std::vector<ConvAlgorithm> candidates = convCandidates(k, threads);
  if (candidates.size() == 1) return candidates.front();
  Choices& c = choices();
  std::vector<int64_t> key = k.encode();
  key.push_back(threads);
  std::lock_guard lock(c.mutex);  // one measurement at a time: they would slow each other
  if (auto it = c.chosen.find(key); it != c.chosen.end()) return it->second;
  const std::string stored = c.store.load ? convChoiceKey(k, threads, c.store.description) : "";
  if (c.store.load)
    if (const std::optional<std::string> kept = c.store.load(stored)) {
      std::istringstream in(*kept);
      std::string name;
      in >> name;
      const std::optional<ConvAlgorithm> a = parseAlgorithm(name);
      if (a && std::find(candidates.begin(), candidates.end(), *a) != candidates.end()) return c.chosen[key] = *a;
    }
  if (buffers.empty()) return candidates.front();  // asked without a call to measure on
  auto [best, timings] = measure(k, candidates, buffers, threads);
  if (c.store.save) c.store.save(stored, fmt::format("{} ({})", convAlgorithmName(best), timings));
  return c.chosen[key] = best;
}

void forceConvAlgorithm(std::optional<ConvAlgorithm> algorithm) {
  forcedAlgorithm.store(algorithm ? static_cast<int>(*algorithm) : -1, std::memory_order_relaxed);
}

void setConvChunkBytes(int64_t bytes) { chunkLimit.store(bytes > 0 ? bytes : INT64_MAX, std::memory_order_relaxed); }

void forgetConvChoices() {
  Choices& c = choices();
  std::lock_guard lock(c.mutex);
  c.chosen.clear();
}

std::string convImplementation(const ConvCall& call) {
  const int threads = ThreadPool::instance().numThreads();
  const ConvAlgorithm a = convAlgorithmFor(call, threads, {});
  if (a == ConvAlgorithm::direct) return "direct";
  return fmt::format("{}: {}", convAlgorithmName(a),
                     oneDnnConvImplementation(call, a == ConvAlgorithm::onednnBlocked, threads));
}

}  // namespace detail

namespace {
/// Note [Convolution epilogues]: the images a chunk of this call holds.
int64_t imagesPerChunk(const ConvCall& k) {
  if (k.kind != ConvCall::Kind::forward || k.n <= 1) return std::max<int64_t>(k.n, 1);
  const int64_t image = std::max<int64_t>(k.o * k.ho * k.wo * itemSize(k.dtype), 1);
  return std::clamp<int64_t>(chunkBytes() / image, 1, k.n);
}

/// The call in chunks, `epilogue` over each chunk's result after it.
void convThen(const ConvCall& k, std::span<void* const> buffers, const HostEpilogue& epilogue) {
  const int threads = ThreadPool::instance().numThreads();
  const int64_t per = imagesPerChunk(k), image = k.o * k.ho * k.wo, item = itemSize(k.dtype);
  auto finish = [&](int64_t begin, int64_t end) {
    if (!epilogue.fn || begin >= end) return;
    ThreadPool::instance().parallelFor(end - begin, kEpilogueGrain, [&](int64_t b, int64_t e) {
      epilogue.fn(epilogue.buffers.data(), epilogue.args.data(), begin + b, begin + e);
    });
  };
  if (per >= k.n) {
    const ConvAlgorithm a = detail::convAlgorithmFor(k, threads, buffers);
    const bool ran = run(k, a, buffers, threads);
    KILN_ASSERT(ran, "conv: algorithm {} refused a call it was chosen for", convAlgorithmName(a));
    finish(0, k.kind == ConvCall::Kind::forward ? k.n * image : 0);
    return;
  }
  for (int64_t start = 0; start < k.n; start += per) {
    ConvCall sub = k;
    sub.n = std::min(per, k.n - start);
    void* const part[3] = {static_cast<char*>(buffers[0]) + start * k.xStrides[0] * item, buffers[1],
                           static_cast<char*>(buffers[2]) + start * image * item};
    const std::span<void* const> subBuffers(part, 3);
    const ConvAlgorithm a = detail::convAlgorithmFor(sub, threads, subBuffers);
    const bool ran = run(sub, a, subBuffers, threads);
    KILN_ASSERT(ran, "conv: algorithm {} refused a call it was chosen for", convAlgorithmName(a));
    finish(start * image, (start + sub.n) * image);
  }
}
}  // namespace

void conv(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 3, "conv with {} buffers", call.buffers.size());
  void* ptrs[3];
  for (size_t i = 0; i < 3; ++i) ptrs[i] = hostAddress(call.buffers[i]);
  convThen(ConvCall::decode(call.args), std::span<void* const>(ptrs, 3), HostEpilogue{});
}

void convWithEpilogue(const LibraryCall& call) {
  KILN_ASSERT(call.epilogue && call.epilogue->kernel && call.epilogue->firstBuffer == 3,
              "conv with an epilogue called without one");
  const ConvCall k = ConvCall::decode(call.args);
  KILN_ASSERT(k.kind == ConvCall::Kind::forward, "conv: an epilogue on a call of kind {}", static_cast<int>(k.kind));
  std::vector<void*> host(call.buffers.size());
  for (size_t i = 0; i < host.size(); ++i) host[i] = hostAddress(call.buffers[i]);
  const std::span<void* const> all(host);
  convThen(k, all.first(3), HostEpilogue{hostKernelFn(*call.epilogue->kernel), all.subspan(3), call.epilogue->args});
}

}  // namespace kiln::runtime

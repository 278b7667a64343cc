// The CPU's convolution algorithms (runtime/conv.h): each one against the
// direct loops on every kind of call, and how one is chosen (Note
// [Choosing a convolution algorithm] in runtime/conv.cpp): the default
// without measuring, a measurement kept for the process and in the store,
// a stored choice read instead of measuring, and nothing measured under
// runtime::deterministic().
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/conv_calls.h"
#include "runtime/blas.h"
#include "runtime/conv.h"
#include "runtime/determinism.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {
namespace {

using Kind = ConvCall::Kind;

ConvCall call(ConvCall::Kind kind, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int64_t stride,
              int64_t pad, int64_t dilation = 1, int64_t groups = 1, DType dtype = DType::f32) {
  return testutil::squareConvCall(kind, n, c, h, w, o, k, stride, pad, dilation, groups, dtype);
}

/// The three buffers of a call (operands filled with normal samples, the
/// result zeroed), in the call's order.
struct Buffers {
  std::vector<float> a, b, out;
  std::vector<void*> ptrs;
  Buffers(const ConvCall& k, uint32_t seed) {
    const size_t xs = static_cast<size_t>(k.n * k.c * k.h * k.w),
                 ws = static_cast<size_t>(k.o * (k.c / k.groups) * k.kh * k.kw),
                 ys = static_cast<size_t>(k.n * k.o * k.ho * k.wo);
    const size_t sizes[3][3] = {{xs, ws, ys}, {ys, ws, xs}, {xs, ys, ws}};
    const auto& s = sizes[static_cast<int>(k.kind)];
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal;
    a.resize(s[0]), b.resize(s[1]), out.assign(s[2], 0.0f);
    for (float& v : a) v = normal(gen);
    for (float& v : b) v = normal(gen);
    ptrs = {a.data(), b.data(), out.data()};
  }
  std::span<void* const> span() const { return {ptrs.data(), ptrs.size()}; }
};

std::vector<ConvCall> calls() {
  std::vector<ConvCall> all;
  for (Kind kind : {Kind::forward, Kind::transpose, Kind::weightGrad}) {
    all.push_back(call(kind, 2, 8, 9, 9, 16, 3, 1, 1, 1, 1));
    all.push_back(call(kind, 1, 8, 10, 10, 8, 3, 2, 1, 1, 8));  // depthwise, stride 2
    all.push_back(call(kind, 2, 6, 8, 8, 4, 3, 1, 2, 2, 2));    // dilation, groups
    all.push_back(call(kind, 2, 16, 9, 9, 32, 1, 2, 0, 1, 1));  // 1x1 stride 2: the last row never read
  }
  return all;
}

TEST(ConvAlgorithms, EachAvailableOneEqualsTheDirectLoops) {
  const int threads = ThreadPool::instance().numThreads();
  int oneDnnRuns = 0;
  for (const ConvCall& k : calls()) {
    SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(k.kind) << ", c " << k.c << ", o " << k.o << ", k "
                                      << k.kh << ", stride " << k.strideH << ", groups " << k.groups);
    Buffers want(k, 1);
    detail::convDirect(k, want.span());
    for (ConvAlgorithm a : detail::convCandidates(k, threads)) {
      if (a == ConvAlgorithm::direct) continue;
      Buffers got(k, 1);
      ASSERT_TRUE(detail::oneDnnConv(k, a == ConvAlgorithm::onednnBlocked, got.span(), threads));
      ++oneDnnRuns;
      for (size_t i = 0; i < want.out.size(); ++i)
        ASSERT_NEAR(got.out[i], want.out[i], 1e-4 * (1 + std::fabs(want.out[i])))
            << convAlgorithmName(a) << ", element " << i;
    }
  }
  if (haveOneDnn()) {
    EXPECT_GE(oneDnnRuns, 12) << "oneDNN serves every kind of call here in at least one layout";
  }
}

TEST(ConvAlgorithms, ABroadcastOperandIsNotAOneDnnLayout) {
  ConvCall k = call(Kind::forward, 2, 4, 6, 6, 4, 3, 1, 1, 1, 1);
  k.xStrides[0] = 0;  // both images are one
  const std::vector<ConvAlgorithm> c = detail::convCandidates(k, 1);
  EXPECT_EQ(c, std::vector<ConvAlgorithm>{ConvAlgorithm::direct});
}

/// Installs a store that records what it is asked, for one test.
struct RecordingStore {
  std::vector<std::pair<std::string, std::string>> saved;
  std::vector<std::string> loaded;
  std::optional<std::string> answer;
  RecordingStore() {
    detail::forgetConvChoices();
    ConvChoiceStore s;
    s.description = "test-cpu";
    s.load = [this](const std::string& key) {
      loaded.push_back(key);
      return answer;
    };
    s.save = [this](const std::string& key, const std::string& value) { saved.emplace_back(key, value); };
    setConvChoiceStore(std::move(s));
  }
  ~RecordingStore() {
    setConvChoiceStore({});
    setConvBenchmark(false);
    detail::forgetConvChoices();
  }
};

TEST(ConvChoice, WithoutBenchmarkTheDefaultRunsUnmeasured) {
  RecordingStore store;
  const ConvCall k = call(Kind::forward, 2, 8, 9, 9, 16, 3, 1, 1, 1, 1);
  Buffers b(k, 2);
  const int threads = ThreadPool::instance().numThreads();
  EXPECT_EQ(detail::convAlgorithmFor(k, threads, b.span()), detail::convCandidates(k, threads).front());
  EXPECT_TRUE(store.saved.empty());
  EXPECT_TRUE(store.loaded.empty());
}

TEST(ConvChoice, BenchmarkMeasuresOnceAndKeepsTheChoice) {
  RecordingStore store;
  setConvBenchmark(true);
  const ConvCall k = call(Kind::forward, 2, 8, 9, 9, 16, 3, 1, 1, 1, 1);
  const int threads = ThreadPool::instance().numThreads();
  const std::vector<ConvAlgorithm> candidates = detail::convCandidates(k, threads);
  if (candidates.size() < 2) GTEST_SKIP() << "one algorithm only (no oneDNN): nothing to choose";
  Buffers b(k, 3);
  const ConvAlgorithm first = detail::convAlgorithmFor(k, threads, b.span());
  ASSERT_EQ(store.saved.size(), 1u);
  EXPECT_EQ(store.saved[0].first.rfind("conv-choice/v1/test-cpu/", 0), 0u) << store.saved[0].first;
  // The value names the choice first, then every candidate's time.
  EXPECT_EQ(store.saved[0].second.rfind(std::string(convAlgorithmName(first)) + " (", 0), 0u) << store.saved[0].second;
  for (ConvAlgorithm a : candidates)
    EXPECT_NE(store.saved[0].second.find(std::string(convAlgorithmName(a)) + " "), std::string::npos)
        << store.saved[0].second;
  // Kept: asked again, no second measurement and the same answer.
  EXPECT_EQ(detail::convAlgorithmFor(k, threads, b.span()), first);
  EXPECT_EQ(store.saved.size(), 1u);
  // Another call is measured on its own.
  const ConvCall other = call(Kind::weightGrad, 2, 8, 9, 9, 16, 3, 1, 1, 1, 1);
  Buffers ob(other, 4);
  detail::convAlgorithmFor(other, threads, ob.span());
  EXPECT_EQ(store.saved.size(), 2u);
  EXPECT_NE(store.saved[1].first, store.saved[0].first);
}

TEST(ConvChoice, AStoredChoiceIsReadInsteadOfMeasured) {
  RecordingStore store;
  setConvBenchmark(true);
  const ConvCall k = call(Kind::transpose, 2, 8, 9, 9, 16, 3, 1, 1, 1, 1);
  const int threads = ThreadPool::instance().numThreads();
  if (detail::convCandidates(k, threads).size() < 2) GTEST_SKIP() << "one algorithm only (no oneDNN)";
  // A choice no default would make: direct.
  store.answer = "direct (onednn 1.000 ms, direct 0.500 ms)";
  Buffers b(k, 5);
  EXPECT_EQ(detail::convAlgorithmFor(k, threads, b.span()), ConvAlgorithm::direct);
  EXPECT_EQ(store.loaded.size(), 1u);
  EXPECT_TRUE(store.saved.empty());
}

TEST(ConvChoice, DeterministicModeMeasuresNothing) {
  RecordingStore store;
  setConvBenchmark(true);
  setDeterministic(true);
  const ConvCall k = call(Kind::forward, 1, 8, 9, 9, 8, 3, 1, 1, 1, 1);
  Buffers b(k, 6);
  const int threads = ThreadPool::instance().numThreads();
  EXPECT_EQ(detail::convAlgorithmFor(k, threads, b.span()), detail::convCandidates(k, threads).front());
  setDeterministic(false);
  EXPECT_TRUE(store.saved.empty());
  EXPECT_TRUE(store.loaded.empty());
}

}  // namespace
}  // namespace kiln::runtime

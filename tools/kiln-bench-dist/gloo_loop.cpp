// Gloo's own all-reduce loop (tools/kiln-bench-dist/gloo_loop.h).
#include "tools/kiln-bench-dist/gloo_loop.h"

#include "runtime/error.h"

#ifdef KILN_HAVE_GLOO
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#endif

namespace kiln::bench::dist {

#ifndef KILN_HAVE_GLOO

bool glooLoopAvailable(std::string* why) {
  if (why) *why = "kiln-bench-dist was built without Gloo (libgloo-dev)";
  return false;
}
struct GlooLoop::Impl {};
GlooLoop::GlooLoop(std::shared_ptr<runtime::dist::Store>, int, int, std::chrono::milliseconds) {
  fail("gloo: kiln-bench-dist was built without Gloo (libgloo-dev)");
}
GlooLoop::~GlooLoop() = default;
void GlooLoop::prepare(float*, int64_t) {}
void GlooLoop::runAlgorithm() {}
void GlooLoop::runAllreduce() {}
std::string GlooLoop::algorithmName() const { return ""; }

#else

bool glooLoopAvailable(std::string*) { return true; }

namespace {

/// kiln's store as Gloo's rendezvous store; get blocks up to the store's
/// timeout, since connectFullMesh reads peers' keys without waiting first.
class StoreBridge final : public ::gloo::rendezvous::Store {
 public:
  explicit StoreBridge(std::shared_ptr<runtime::dist::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, runtime::dist::Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const runtime::dist::Bytes b = store_->get(key);
    return {b.begin(), b.end()};
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<runtime::dist::Store> store_;
};

// The size up to which halving-doubling is used, as in kiln's backend.
constexpr int64_t kHalvingDoublingBytes = int64_t{1} << 20;

}  // namespace

struct GlooLoop::Impl {
  std::shared_ptr< ::gloo::rendezvous::Context> context;
  std::unique_ptr< ::gloo::Algorithm> algorithm;
  std::string algorithmName;
  float* data = nullptr;
  int64_t count = 0;
  uint32_t tag = 0;  ///< gloo::allreduce: a tag per call, so that no call can take a message of the next
};

GlooLoop::GlooLoop(std::shared_ptr<runtime::dist::Store> store, int rank, int size, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  try {
    ::gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = ::gloo::transport::tcp::CreateDevice(attr);
    impl_->context = std::make_shared< ::gloo::rendezvous::Context>(rank, size);
    impl_->context->setTimeout(timeout);
    StoreBridge bridge(std::move(store));
    impl_->context->connectFullMesh(bridge, device);
  } catch (const ::gloo::Exception& e) {
    fail("gloo: rank {} of {} could not connect its own context: {}", rank, size, e.what());
  }
}

GlooLoop::~GlooLoop() = default;

void GlooLoop::prepare(float* data, int64_t count) {
  KILN_CHECK(count > 0 && count <= INT32_MAX, "gloo: {} elements do not fit one call", count);
  impl_->algorithm.reset();
  impl_->data = data;
  impl_->count = count;
  const int n = static_cast<int>(count);
  if (count * static_cast<int64_t>(sizeof(float)) <= kHalvingDoublingBytes) {
    impl_->algorithm =
        std::make_unique< ::gloo::AllreduceHalvingDoubling<float> >(impl_->context, std::vector<float*>{data}, n);
    impl_->algorithmName = "AllreduceHalvingDoubling";
  } else {
    impl_->algorithm =
        std::make_unique< ::gloo::AllreduceRingChunked<float> >(impl_->context, std::vector<float*>{data}, n);
    impl_->algorithmName = "AllreduceRingChunked";
  }
}

void GlooLoop::runAlgorithm() { impl_->algorithm->run(); }

void GlooLoop::runAllreduce() {
  ::gloo::AllreduceOptions opts(impl_->context);
  opts.setOutput(impl_->data, static_cast<size_t>(impl_->count));
  opts.setAlgorithm(::gloo::AllreduceOptions::Algorithm::RING);
  opts.setTag(++impl_->tag);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
  ::gloo::allreduce(opts);
}

std::string GlooLoop::algorithmName() const { return impl_->algorithmName; }

#endif

}  // namespace kiln::bench::dist

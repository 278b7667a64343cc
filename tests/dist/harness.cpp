// Ranks as threads (tests/dist/harness.h).
#include "tests/dist/harness.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::testing::dist {

rd::ProcessGroupOptions testOptions(std::chrono::milliseconds timeout) {
  rd::ProcessGroupOptions o;
  o.timeout = timeout;
  o.hostname = "127.0.0.1";
  return o;
}

std::vector<std::string> runRanks(int n, const std::function<void(int)>& body, std::chrono::seconds limit) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable done;
    int finished = 0;
    std::vector<std::string> errors;
  };
  auto shared = std::make_shared<Shared>();
  shared->errors.assign(static_cast<size_t>(n), "");
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([shared, r, &body] {
      std::string error;
      try {
        body(r);
      } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "an exception without a message";
      }
      std::lock_guard lock(shared->mutex);
      shared->errors[static_cast<size_t>(r)] = error;
      ++shared->finished;
      shared->done.notify_all();
    });
  {
    std::unique_lock lock(shared->mutex);
    if (!shared->done.wait_for(lock, limit, [&] { return shared->finished == n; })) {
      std::fprintf(stderr, "rank threads still running after %lld s: a hang\n", static_cast<long long>(limit.count()));
      std::abort();
    }
  }
  for (std::thread& t : threads) t.join();
  return shared->errors;
}

void expectNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

std::vector<std::shared_ptr<rd::ProcessGroup>> makeGroups(int n, const rd::ProcessGroupOptions& options,
                                                          std::shared_ptr<rd::Store> store) {
  if (!store) store = std::make_shared<rd::HashStore>(options.timeout);
  std::vector<std::shared_ptr<rd::ProcessGroup>> groups(static_cast<size_t>(n));
  const auto errors = runRanks(
      n, [&](int r) { groups[static_cast<size_t>(r)] = rd::createProcessGroup("gloo", store, r, n, options); });
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) throw Error("making rank " + std::to_string(r) + ": " + errors[r]);
  return groups;
}

std::vector<kiln::dist::ProcessGroup> makeFrontendGroups(int n, std::chrono::milliseconds timeout) {
  std::vector<kiln::dist::ProcessGroup> groups(static_cast<size_t>(n));
  auto store = std::make_shared<kiln::dist::HashStore>();
  kiln::dist::Options options;
  options.timeout = timeout;
  options.hostname = "127.0.0.1";
  expectNoErrors(runRanks(n, [&](int r) {
    groups[static_cast<size_t>(r)] = kiln::dist::ProcessGroup::create("gloo", store, r, n, options);
  }));
  return groups;
}

rd::BufferRef cpuBuffer(DType dtype, int64_t numel, std::vector<int64_t> shape) {
  const size_t bytes = static_cast<size_t>(numel * itemSize(dtype));
  auto buffer = runtime::allocateBuffer(Device::cpu(), std::max<size_t>(bytes, 1));
  std::memset(buffer->hostData(), 0, buffer->bytes());
  return rd::BufferRef::of(buffer, 0, numel, dtype, std::move(shape));
}

void setValue(const rd::BufferRef& b, int64_t i, double v) {
  char* base = static_cast<char*>(runtime::hostAddress(b.ptr()));
  storeAs(base + i * itemSize(b.dtype), b.dtype, v);
}

double getValue(const rd::BufferRef& b, int64_t i) {
  const char* p = static_cast<const char*>(runtime::hostAddress(b.ptr())) + i * itemSize(b.dtype);
  switch (b.dtype) {
    case DType::f32: return *reinterpret_cast<const float*>(p);
    case DType::f64: return *reinterpret_cast<const double*>(p);
    case DType::f16: return f16BitsToF32(*reinterpret_cast<const uint16_t*>(p));
    case DType::bf16: return bf16BitsToF32(*reinterpret_cast<const uint16_t*>(p));
    case DType::i32: return *reinterpret_cast<const int32_t*>(p);
    case DType::i64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::boolean: return *reinterpret_cast<const uint8_t*>(p);
  }
  return 0;
}

double reduceReference(const std::vector<double>& values, rd::ReduceOp op, DType dtype) {
  double acc = values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    const double v = values[i];
    switch (op) {
      case rd::ReduceOp::sum:
      case rd::ReduceOp::avg: acc = dtype == DType::boolean ? double(acc != 0 || v != 0) : acc + v; break;
      case rd::ReduceOp::product: acc = dtype == DType::boolean ? double(acc != 0 && v != 0) : acc * v; break;
      case rd::ReduceOp::min: acc = std::min(acc, v); break;
      case rd::ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  if (op == rd::ReduceOp::avg) acc /= static_cast<double>(values.size());
  return roundToDType(acc, dtype);
}

double tolerance(DType dtype, rd::ReduceOp op) {
  if (op != rd::ReduceOp::avg) return 0;  // the test values keep every other result exact
  switch (dtype) {
    case DType::f16: return 1e-2;
    case DType::bf16: return 5e-2;
    case DType::f32: return 1e-6;
    default: return 1e-12;
  }
}

std::string waitError(const std::shared_ptr<rd::Work>& work) {
  try {
    work->wait();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace kiln::testing::dist

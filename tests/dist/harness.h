// Ranks as threads, for the process-group tests: each rank is a thread of
// this process with its own Gloo context, meeting the others through one
// HashStore (multi-process tests come with the TCP store). A rank thread
// that does not finish in time aborts the test binary: a hang is a failure,
// never a stuck test run.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "frontend/distributed.h"
#include "runtime/buffer.h"
#include "runtime/dist_process_group.h"
#include "runtime/dist_store.h"
#include "runtime/dtype.h"

namespace kiln::testing::dist {

namespace rd = ::kiln::runtime::dist;
using namespace std::chrono_literals;

/// Every dtype kiln has, for the sweeps.
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16,    DType::bf16,
                                       DType::i32, DType::i64, DType::boolean};
inline constexpr rd::ReduceOp kAllOps[] = {rd::ReduceOp::sum, rd::ReduceOp::avg, rd::ReduceOp::min, rd::ReduceOp::max,
                                           rd::ReduceOp::product};

/// Options for tests: loopback, a short timeout.
rd::ProcessGroupOptions testOptions(std::chrono::milliseconds timeout = 10s);

/// Runs body(rank) on `n` threads at once and returns each rank's uncaught
/// error ("" for none). Aborts the process when a thread is still running
/// after `limit`.
std::vector<std::string> runRanks(int n, const std::function<void(int)>& body, std::chrono::seconds limit = 60s);

/// Expects every entry of runRanks' result to be empty.
void expectNoErrors(const std::vector<std::string>& errors);

/// `n` gloo groups over one store (a new HashStore when null), made at
/// once on `n` threads.
std::vector<std::shared_ptr<rd::ProcessGroup>> makeGroups(int n, const rd::ProcessGroupOptions& options = testOptions(),
                                                          std::shared_ptr<rd::Store> store = nullptr);

/// The same as kiln::dist::ProcessGroup handles (the frontend's), on
/// 127.0.0.1 with `timeout`.
std::vector<kiln::dist::ProcessGroup> makeFrontendGroups(int n, std::chrono::milliseconds timeout = 10s);

/// A CPU buffer of `numel` elements of `dtype`, as a BufferRef.
rd::BufferRef cpuBuffer(DType dtype, int64_t numel, std::vector<int64_t> shape = {});
/// Element `i` of a CPU BufferRef, written from / read as a double.
void setValue(const rd::BufferRef& b, int64_t i, double v);
double getValue(const rd::BufferRef& b, int64_t i);

/// The reduction of `values` by `op` as dtype `dtype` computes it (bool:
/// or / and; avg: the sum divided by the count, rounded to the dtype).
double reduceReference(const std::vector<double>& values, rd::ReduceOp op, DType dtype);
/// How far a reduced value may be from reduceReference.
double tolerance(DType dtype, rd::ReduceOp op);

/// The message of the kiln::Error that wait() on `work` throws, or "no error".
std::string waitError(const std::shared_ptr<rd::Work>& work);

}  // namespace kiln::testing::dist

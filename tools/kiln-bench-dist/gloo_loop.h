// Gloo's own all-reduce loop, the yardstick of kiln's process group: a
// Gloo context of its own, met through kiln's store (a bridge to Gloo's
// rendezvous store) on 127.0.0.1, running one algorithm instance built once
// per size (AllreduceHalvingDoubling up to 1 MiB, AllreduceRingChunked
// above: the classes kiln's backend uses, DIST_NOTES) or gloo::allreduce
// with its options, as a user of Gloo would write either, with nothing of
// kiln's around the call.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/dist_store.h"

namespace kiln::bench::dist {

/// Whether the tool was built with Gloo; `why` says what is missing.
bool glooLoopAvailable(std::string* why);

class GlooLoop {
 public:
  /// Connects the full mesh (every rank, at the same point; blocks up to
  /// `timeout`). kiln::Error when a peer does not come.
  GlooLoop(std::shared_ptr<runtime::dist::Store> store, int rank, int size, std::chrono::milliseconds timeout);
  ~GlooLoop();
  GlooLoop(const GlooLoop&) = delete;
  GlooLoop& operator=(const GlooLoop&) = delete;

  /// Builds the algorithm for `count` floats at `data` (every rank, in the
  /// same order: it takes the context's next slot).
  void prepare(float* data, int64_t count);
  /// One all-reduce (sum) by the prepared algorithm instance.
  void runAlgorithm();
  /// One all-reduce (sum) by gloo::allreduce (ring), options made per call.
  void runAllreduce();
  /// The prepared algorithm's class.
  std::string algorithmName() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::bench::dist

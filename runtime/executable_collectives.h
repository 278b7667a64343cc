// The collective steps of one Executable::run (Note [Collective steps] in
// runtime/executable_collectives.cpp): internal to runtime/executable.cpp.
#pragma once

#include <memory>
#include <vector>

#include "runtime/executable.h"

namespace kiln::runtime {

namespace dist {
class Work;
}

/// Issues the collective steps of one run of `exe` over its bound slots.
/// Destroyed before finish() (a step threw), it waits for the collectives
/// still running, so that none writes into a buffer after the run let go
/// of it, and drops their errors (the step's error is on its way).
class CollectiveRun {
 public:
  CollectiveRun(const Executable& exe, const std::vector<std::shared_ptr<Buffer>>& bound,
                const std::vector<DevicePtr>& base);
  ~CollectiveRun();
  CollectiveRun(const CollectiveRun&) = delete;
  CollectiveRun& operator=(const CollectiveRun&) = delete;

  /// Runs a start (issues the all-reduce) or a wait (waits for it and
  /// rethrows its error).
  void step(const CollectiveStep& c);
  /// The end of the run: every collective started has been waited for.
  void finish();

 private:
  const Executable& exe_;
  const std::vector<std::shared_ptr<Buffer>>& bound_;
  const std::vector<DevicePtr>& base_;
  std::vector<std::shared_ptr<dist::Work>> works_;  ///< by ticket, while running
};

}  // namespace kiln::runtime

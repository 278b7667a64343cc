// Running the collective steps of an Executable.
//
// Note [Collective steps]
// A collective node of the graph (ir/Ops.def: all_reduce) is two steps: a
// start, placed right after the step that computes its operand, and a
// wait, placed right before the first step that reads its result
// (codegen/compile_graph.cpp, Note [Scheduling collectives]). The start
// hands the slot to the process group, which runs the all-reduce in place
// on its own thread (Gloo) or communication stream (NCCL), ordered after
// the work already enqueued on the current stream; run() goes on
// launching the steps in between, which neither read nor write that slot
// (the graph is in SSA form, and the memory plan keeps the slot's buffer
// for it from the start to its last reader, because both steps name it).
// The wait blocks until the all-reduce is done and makes the current
// stream see its result (runtime::dist::Work::wait). So in a compiled DDP
// step each bucket's all-reduce runs while the rest of the backward pass
// computes, and the optimizer's kernels wait for it. Every rank issues the
// starts in the order of its steps, which is the graph's order: the same
// on every rank, because every rank traces the same program and runs the
// same passes. A failed collective (a peer died, a timeout) throws from its
// wait, naming the rank, the collective and its sequence number; the run
// then waits for the others it started before letting go of their buffers.
// A program with collectives is never recorded for graph replay: its
// steps run on the host.
#include "runtime/executable_collectives.h"

#include <fmt/format.h>

#include "runtime/dist_process_group.h"
#include "runtime/error.h"
#include "runtime/profiler_events.h"

namespace kiln::runtime {

CollectiveRun::CollectiveRun(const Executable& exe, const std::vector<std::shared_ptr<Buffer>>& bound,
                             const std::vector<DevicePtr>& base)
    : exe_(exe), bound_(bound), base_(base) {}

CollectiveRun::~CollectiveRun() {
  for (const std::shared_ptr<dist::Work>& w : works_) {
    if (!w) continue;
    try {
      w->wait();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the run's own error is on its way
    }
  }
}

void CollectiveRun::step(const CollectiveStep& c) {
  KILN_ASSERT(c.ticket >= 0 && c.slots.size() == 1 && c.group, "collective step {} is malformed", c.name);
  // Host ranges, not kernel events: the process group runs the collective
  // (docs/profiler.md).
  profiler::RecordFunction range("collective",
                                 c.phase == CollectiveStep::Phase::start ? "collective_start" : "collective_wait");
  if (range.event()) [[unlikely]]
    range.event()->detail = fmt::format("{} of {} bytes, ticket {}", c.name, c.numel * itemSize(c.dtype), c.ticket);
  const auto ticket = static_cast<size_t>(c.ticket);
  if (works_.size() <= ticket) works_.resize(ticket + 1);
  if (c.phase == CollectiveStep::Phase::wait) {
    KILN_ASSERT(works_[ticket] != nullptr, "collective step {}: a wait for ticket {} that was not started", c.name,
                c.ticket);
    const std::shared_ptr<dist::Work> work = std::move(works_[ticket]);
    work->wait();
    return;
  }
  KILN_ASSERT(works_[ticket] == nullptr, "collective step {}: ticket {} started twice", c.name, c.ticket);
  const auto slot = static_cast<size_t>(c.slots[0]);
  const std::shared_ptr<Buffer>& buffer = bound_.at(slot);
  KILN_ASSERT(buffer != nullptr, "collective step {}: slot {} has no buffer", c.name, slot);
  const size_t offset =
      base_[slot].offset - buffer->ptr().offset + static_cast<size_t>(c.offsets.empty() ? 0 : c.offsets[0]);
  works_[ticket] = c.group->allReduce(dist::BufferRef::of(buffer, offset, c.numel, c.dtype, c.shape), c.op);
}

void CollectiveRun::finish() {
  for (size_t t = 0; t < works_.size(); ++t)
    KILN_ASSERT(works_[t] == nullptr, "collective {} of a program of {} steps was started and never waited for", t,
                exe_.steps.size());
}

}  // namespace kiln::runtime

// lowerCollective and scheduleCollectives (codegen/lowering_collective.h).
//
// Note [Scheduling collectives]
// compileGraph emits a collective's start where its node stands in the
// graph, the wait not at all; scheduleCollectives then places both:
// - the start goes up to right after the step that last names its slot
//   before it (the kernel or copy that put the operand there), so the
//   all-reduce of a DDP bucket starts as soon as the bucket is filled,
//   whatever other nodes the trace or the passes put in between; it never
//   goes above the start before it, so the collectives are issued in graph
//   order, the same on every rank (a process group runs them in issue
//   order, and so must every rank);
// - the wait goes down to right before the first step after the start that
//   names the slot (the optimizer's kernel reading the averaged gradient),
//   or to the end of the program when none does (a result only returned);
//   but never below the first in-place update of a donated input (Note
//   [Donated buffers] in codegen/compile_graph.cpp): a collective that
//   fails (a peer died) then throws before any parameter was overwritten,
//   and the call leaves its inputs as they were.
// The steps between the two are what overlaps the communication. The
// memory plan (codegen/plan_memory.cpp) runs after this and keeps the
// slot's buffer from the start to its last reader, since both steps name it.
#include "codegen/lowering_collective.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/collective_rules.h"
#include "runtime/dist_process_group.h"
#include "runtime/error.h"

namespace kiln::codegen {

runtime::CollectiveStep lowerCollective(const ir::Node& node, int slot, int ticket) {
  KILN_ASSERT(node.op() == ir::Op::all_reduce, "lowerCollective of {}", ir::opName(node.op()));
  const std::string_view name = ir::opName(node.op());
  const int64_t id = ir::collectiveGroup(node.attrs(), name);
  const std::string_view reduce = ir::collectiveReduceOp(node.attrs(), name);
  const ir::TensorType& type = node.output()->type();
  runtime::CollectiveStep step;
  step.name = fmt::format("{}_{}", name, dtypeName(type.dtype));
  step.ticket = ticket;
  step.group = runtime::dist::groupById(id);
  KILN_CHECK(step.group != nullptr,
             "codegen: {} of {} names process group {}, which this process does not have (a graph with collectives "
             "runs in the process that traced it; docs/ops.md, \"Collectives\")",
             name, type.str(), id);
  const auto op = runtime::dist::reduceOpFromName(reduce);
  KILN_ASSERT(op.has_value(), "reduce op {} has no runtime::dist::ReduceOp", reduce);
  step.op = *op;
  KILN_CHECK(step.group->supports(type.device), "codegen: {} of {} on a {} group, which does not run on {}", name,
             type.str(), step.group->backend(), type.device.str());
  step.dtype = type.dtype;
  step.numel = type.numel();
  step.shape = type.shape;
  step.slots = {slot};
  return step;
}

void scheduleCollectives(runtime::Executable& exe, const std::vector<int>& donated) {
  using runtime::CollectiveStep;
  auto names = [](const runtime::Step& s, int slot) {
    const std::vector<int>& slots = runtime::stepSlots(s);
    return std::find(slots.begin(), slots.end(), slot) != slots.end();
  };
  // Starts, in order: hoisted above the steps that do not touch their slot.
  size_t floor = 0;  // no start goes above this index
  for (size_t i = 0; i < exe.steps.size(); ++i) {
    const auto* c = std::get_if<CollectiveStep>(&exe.steps[i]);
    if (!c || c->phase != CollectiveStep::Phase::start) continue;
    const int slot = c->slots[0];
    size_t to = i;
    while (to > floor && !names(exe.steps[to - 1], slot)) --to;
    if (to < i) {
      std::rotate(exe.steps.begin() + static_cast<std::ptrdiff_t>(to),
                  exe.steps.begin() + static_cast<std::ptrdiff_t>(i),
                  exe.steps.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    }
    floor = to + 1;
  }
  // The first in-place update of a donated input: the last step naming its slot.
  constexpr size_t kNone = static_cast<size_t>(-1);
  size_t firstUpdate = kNone;
  for (int slot : donated)
    for (size_t i = exe.steps.size(); i-- > 0;)
      if (names(exe.steps[i], slot)) {
        firstUpdate = std::min(firstUpdate, i);
        break;
      }
  // Waits: before the first later step that names the slot.
  for (size_t i = 0; i < exe.steps.size(); ++i) {
    const auto* c = std::get_if<CollectiveStep>(&exe.steps[i]);
    if (!c || c->phase != CollectiveStep::Phase::start) continue;
    CollectiveStep wait = *c;
    wait.phase = CollectiveStep::Phase::wait;
    size_t at = i + 1;
    while (at < exe.steps.size() && at < firstUpdate && !names(exe.steps[at], wait.slots[0])) ++at;
    if (firstUpdate != kNone && at <= firstUpdate) ++firstUpdate;  // it moves down with the insert
    exe.steps.insert(exe.steps.begin() + static_cast<std::ptrdiff_t>(at), std::move(wait));
  }
}

}  // namespace kiln::codegen

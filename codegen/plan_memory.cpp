// The memory plan of codegen/plan_memory.h: greedy best fit over the steps.
#include "codegen/plan_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <variant>
#include <vector>

#include "runtime/error.h"

namespace kiln::codegen {

// Note [The memory plan is made over steps]
// DESIGN.md §5 lists plan-memory among the graph passes, but which values
// get a buffer is decided in codegen, not in the graph: a view read only by
// library calls aliases its input's slot (Note [Library calls read views]),
// a fusion's body values live in registers, a multi-result fusion writes
// several slots in one step, a cat writes one slot in several steps, and
// graph inputs are bound where the caller's views start. A graph pass would
// have to predict all of that and drift from it; the Executable's steps
// state it exactly (the slots each step names, in the order they run). So
// the plan is computed here, over the steps, after compileGraph has laid
// out its slots, and compileGraph always applies it: kiln::compile and
// eager one-op programs (which have no intermediates) alike.

namespace {
struct Lifetime {
  int first = std::numeric_limits<int>::max();
  int last = -1;
};

std::vector<Lifetime> lifetimes(const runtime::Executable& exe) {
  std::vector<Lifetime> life(exe.slots.size());
  for (int i = 0; i < static_cast<int>(exe.steps.size()); ++i) {
    for (int s : runtime::stepSlots(exe.steps[i])) {
      KILN_ASSERT(s >= 0 && static_cast<size_t>(s) < life.size(), "step {} names slot {} of {}", i, s, life.size());
      life[s].first = std::min(life[s].first, i);
      life[s].last = std::max(life[s].last, i);
    }
  }
  return life;
}

// Note [The lower bound of a plan]
// At step i every planned slot whose lifetime covers i needs its own bytes,
// so the most bytes live at one step (per device, summed) bounds any plan
// from below; describeMemoryPlan prints it beside the plan's total, which
// says how much the packing loses.
size_t peakLiveBytes(const runtime::Executable& exe, const std::vector<Lifetime>& life) {
  std::vector<long long> delta(exe.steps.size() + 1, 0);
  for (size_t s = 0; s < exe.slots.size(); ++s) {
    if (exe.slotBuffers.empty() || exe.slotBuffers[s] < 0 || life[s].last < 0) continue;
    delta[life[s].first] += static_cast<long long>(exe.slots[s].bytes);
    delta[life[s].last + 1] -= static_cast<long long>(exe.slots[s].bytes);
  }
  long long live = 0, most = 0;
  for (long long d : delta) most = std::max(most, live += d);
  return static_cast<size_t>(most);
}
}  // namespace

namespace {
/// A packing: for each slot its buffer (-1 outside the plan), and the buffers.
struct Packing {
  std::vector<int> slotBuffers;
  std::vector<runtime::SlotSpec> buffers;
  size_t bytes() const {
    size_t total = 0;
    for (const runtime::SlotSpec& b : buffers) total += b.bytes;
    return total;
  }
};

/// Slots taken in the order of their first step; each gets the smallest
/// free buffer of its device that is big enough, else the largest free one,
/// grown to fit, else a new one. A buffer is free for a slot when every slot
/// in it died before the slot's first step.
Packing packInOrder(const runtime::Executable& exe, const std::vector<Lifetime>& life, std::vector<int> order) {
  // By first step; among slots born in one step, the larger first, so that
  // it gets the pick of the free buffers.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (life[a].first != life[b].first) return life[a].first < life[b].first;
    return exe.slots[a].bytes > exe.slots[b].bytes;
  });
  Packing p;
  p.slotBuffers.assign(exe.slots.size(), -1);
  std::vector<int> busyUntil;  // per buffer: the last step of the slots in it
  for (int s : order) {
    const runtime::SlotSpec& spec = exe.slots[s];
    int best = -1, largest = -1;
    for (int b = 0; b < static_cast<int>(p.buffers.size()); ++b) {
      if (busyUntil[b] >= life[s].first || !(p.buffers[b].device == spec.device)) continue;
      const size_t size = p.buffers[b].bytes;
      if (size >= spec.bytes && (best < 0 || size < p.buffers[best].bytes)) best = b;
      if (largest < 0 || size > p.buffers[largest].bytes) largest = b;
    }
    if (best < 0) best = largest;
    if (best < 0) {
      p.buffers.push_back({spec.bytes, spec.device});
      busyUntil.push_back(-1);
      best = static_cast<int>(p.buffers.size()) - 1;
    }
    p.buffers[best].bytes = std::max(p.buffers[best].bytes, spec.bytes);
    busyUntil[best] = life[s].last;
    p.slotBuffers[s] = best;
  }
  return p;
}

/// Slots taken largest first (among equal sizes, by first step); each gets
/// the smallest buffer of its device whose slots all live at other steps
/// than it does (before it, after it or in a gap between them), else a new
/// one. Buffers never grow: every slot is at most the size of the first
/// one in its buffer.
Packing packBySize(const runtime::Executable& exe, const std::vector<Lifetime>& life, std::vector<int> order) {
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (exe.slots[a].bytes != exe.slots[b].bytes) return exe.slots[a].bytes > exe.slots[b].bytes;
    return life[a].first < life[b].first;
  });
  Packing p;
  p.slotBuffers.assign(exe.slots.size(), -1);
  std::vector<std::vector<int>> members;  // per buffer: its slots
  for (int s : order) {
    const runtime::SlotSpec& spec = exe.slots[s];
    int best = -1;
    for (int b = 0; b < static_cast<int>(p.buffers.size()); ++b) {
      if (!(p.buffers[b].device == spec.device) || (best >= 0 && p.buffers[b].bytes >= p.buffers[best].bytes)) continue;
      const bool free = std::none_of(members[b].begin(), members[b].end(), [&](int o) {
        return life[o].first <= life[s].last && life[s].first <= life[o].last;
      });
      if (free) best = b;
    }
    if (best < 0) {
      p.buffers.push_back({spec.bytes, spec.device});
      members.emplace_back();
      best = static_cast<int>(p.buffers.size()) - 1;
    }
    members[best].push_back(s);
    p.slotBuffers[s] = best;
  }
  return p;
}
}  // namespace

// Note [Two packings, the smaller kept]
// Which slots share a buffer is a packing problem (interval colouring with
// weights) that no quick rule solves best on every program, so planMemory
// runs two and keeps the plan with fewer bytes, as XLA's heap simulator
// keeps the best of several heuristics (ChooseBestHeapAlgorithm). Taken in
// program order (packInOrder), a slot grabs whatever buffer is free when it
// is born: a small slot that lives long can land in a big buffer and pin it,
// and a big slot then grows another buffer or takes a new one. Taken largest
// first (packBySize), the big slots lay out the buffers and the small ones
// fill the gaps in their lifetimes; that is usually the smaller plan on
// training steps, where big activations and gradients come and go around
// small long-lived ones. On a tie the in-order plan is kept.
MemoryPlanStats planMemory(runtime::Executable& exe) {
  const size_t n = exe.slots.size();
  std::vector<bool> planned(n, true);
  for (int s : exe.inputSlots) planned[s] = false;
  for (int s : exe.outputSlots) planned[s] = false;

  const std::vector<Lifetime> life = lifetimes(exe);
  std::vector<int> order;
  for (size_t s = 0; s < n; ++s)
    if (planned[s] && life[s].last >= 0) order.push_back(static_cast<int>(s));

  Packing inOrder = packInOrder(exe, life, order);
  Packing bySize = packBySize(exe, life, order);
  Packing& kept = bySize.bytes() < inOrder.bytes() ? bySize : inOrder;
  exe.slotBuffers = std::move(kept.slotBuffers);
  exe.buffers = std::move(kept.buffers);

  MemoryPlanStats stats;
  stats.slots = static_cast<int>(order.size());
  for (int s : order) stats.bytesBefore += exe.slots[s].bytes;
  stats.buffers = static_cast<int>(exe.buffers.size());
  for (const runtime::SlotSpec& b : exe.buffers) stats.bytesAfter += b.bytes;
  stats.liveBytes = peakLiveBytes(exe, life);
  return stats;
}

std::string describeMemoryPlan(const runtime::Executable& exe) {
  const std::vector<Lifetime> life = lifetimes(exe);
  auto lived = [&](int s) {
    return life[s].last < 0 ? std::string("no step") : fmt::format("steps {}-{}", life[s].first, life[s].last);
  };
  std::vector<std::string> role(exe.slots.size());
  for (size_t i = 0; i < exe.inputSlots.size(); ++i) role[exe.inputSlots[i]] += fmt::format(" input {}", i);
  for (size_t i = 0; i < exe.outputSlots.size(); ++i) role[exe.outputSlots[i]] += fmt::format(" output {}", i);
  size_t before = 0, planned = 0;
  for (size_t s = 0; s < exe.slots.size(); ++s)
    if (!exe.slotBuffers.empty() && exe.slotBuffers[s] >= 0) before += exe.slots[s].bytes, ++planned;
  size_t after = 0;
  for (const runtime::SlotSpec& b : exe.buffers) after += b.bytes;
  std::string out = fmt::format("memory plan: {} intermediates in {} buffers, {} bytes -> {} bytes (at most {} live)\n",
                                planned, exe.buffers.size(), before, after, peakLiveBytes(exe, life));
  for (size_t b = 0; b < exe.buffers.size(); ++b) {
    std::string slots;
    for (size_t s = 0; s < exe.slots.size(); ++s)
      if (exe.slotBuffers[s] == static_cast<int>(b))
        slots += fmt::format("{}slot {} ({} bytes, {})", slots.empty() ? "" : ", ", s, exe.slots[s].bytes, lived(s));
    out += fmt::format("  buffer {}: {} bytes @{}: {}\n", b, exe.buffers[b].bytes, exe.buffers[b].device.str(), slots);
  }
  for (size_t s = 0; s < exe.slots.size(); ++s) {
    if (!exe.slotBuffers.empty() && exe.slotBuffers[s] >= 0) continue;
    out += fmt::format("  slot {}: {} bytes @{}, {}:{}\n", s, exe.slots[s].bytes, exe.slots[s].device.str(), lived(s),
                       role[s].empty() ? " own buffer" : role[s]);
  }
  for (size_t i = 0; i < exe.steps.size(); ++i) {
    const runtime::Step& step = exe.steps[i];
    const std::string& name = runtime::stepName(step);
    std::string slots;
    const auto* call = std::get_if<runtime::LibraryStep>(&step);
    const size_t epilogueFrom = call && call->epilogue ? call->epilogueFirstSlot : SIZE_MAX;
    const std::vector<int>& named = runtime::stepSlots(step);
    for (size_t k = 0; k < named.size(); ++k)
      slots += fmt::format("{}{}", k == 0 ? "" : k == epilogueFrom ? ", then " : " ", named[k]);
    std::string what = name;
    // Note [Matmul epilogues in compiled programs]: the kernel it runs after
    // each block, with that kernel's slots.
    if (epilogueFrom != SIZE_MAX) what += " with epilogue " + call->epilogue->name();
    if (const auto* c = std::get_if<runtime::CollectiveStep>(&step)) {
      // Note [Scheduling collectives]: what runs while it communicates.
      if (c->phase == runtime::CollectiveStep::Phase::start) {
        what += fmt::format(" start #{}", c->ticket);
      } else {
        size_t start = i;
        while (start > 0) {
          const auto* s = std::get_if<runtime::CollectiveStep>(&exe.steps[--start]);
          if (s && s->ticket == c->ticket) break;
        }
        what += i > start + 1 ? fmt::format(" wait #{} (overlaps steps {}-{})", c->ticket, start + 1, i - 1)
                              : fmt::format(" wait #{} (overlaps nothing)", c->ticket);
      }
    }
    out += fmt::format("step {} {}: slots {}\n", i, what, slots);
  }
  return out;
}

}  // namespace kiln::codegen

// Running an Executable: bind inputs, allocate the rest, launch each step.
#include "runtime/executable.h"

#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

namespace {
std::atomic<int64_t> gLaunches{0};
}

int64_t kernelLaunchCount() { return gLaunches.load(std::memory_order_relaxed); }

int Executable::numLibraryCalls() const {
  int n = 0;
  for (const Step& s : steps) n += std::holds_alternative<LibraryStep>(s) ? 1 : 0;
  return n;
}

size_t Executable::intermediateBytes() const {
  std::vector<bool> mine(slots.size(), true);  // intermediate slots with a buffer of their own
  for (int s : inputSlots) mine[s] = false;
  for (int s : outputSlots) mine[s] = false;
  size_t total = 0;
  for (size_t s = 0; s < slots.size(); ++s)
    if (mine[s] && (slotBuffers.empty() || slotBuffers[s] < 0)) total += slots[s].bytes;
  for (const SlotSpec& b : buffers) total += b.bytes;
  return total;
}

std::vector<std::shared_ptr<Buffer>> Executable::run(const std::vector<std::shared_ptr<Buffer>>& inputs,
                                                     const std::vector<int64_t>& inputOffsets) const {
  KILN_ASSERT(inputs.size() == inputSlots.size(), "executable got {} inputs, expects {}", inputs.size(),
              inputSlots.size());
  KILN_ASSERT(inputOffsets.empty() || inputOffsets.size() == inputs.size(), "executable got {} input offsets for {} inputs",
              inputOffsets.size(), inputs.size());
  std::vector<std::shared_ptr<Buffer>> bound(slots.size());
  std::vector<char*> base(slots.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const SlotSpec& spec = slots[inputSlots[i]];
    const int64_t offset = inputOffsets.empty() ? 0 : inputOffsets[i];
    KILN_ASSERT(inputs[i] && offset >= 0 && inputs[i]->bytes() >= spec.bytes + static_cast<size_t>(offset),
                "input {} is smaller than its slot", i);
    bound[inputSlots[i]] = inputs[i];
    base[inputSlots[i]] = static_cast<char*>(inputs[i]->data()) + offset;
  }
  KILN_ASSERT(slotBuffers.empty() || slotBuffers.size() == slots.size(), "memory plan of {} slots for {} slots",
              slotBuffers.size(), slots.size());
  std::vector<std::shared_ptr<Buffer>> shared(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) shared[b] = allocateBuffer(buffers[b].device, buffers[b].bytes);
  for (size_t s = 0; s < slots.size(); ++s) {
    if (bound[s]) continue;
    const int planned = slotBuffers.empty() ? -1 : slotBuffers[s];
    if (planned >= 0) {
      KILN_ASSERT(shared[planned]->bytes() >= slots[s].bytes && buffers[planned].device == slots[s].device,
                  "slot {} does not fit its planned buffer {}", s, planned);
      bound[s] = shared[planned];
    } else {
      bound[s] = allocateBuffer(slots[s].device, slots[s].bytes);
    }
    base[s] = static_cast<char*>(bound[s]->data());
  }

  std::vector<void*> ptrs;
  auto bind = [&](const std::vector<int>& stepSlots, const std::vector<int64_t>& offsets) {
    ptrs.clear();
    for (size_t p = 0; p < stepSlots.size(); ++p)
      ptrs.push_back(base[stepSlots[p]] + (offsets.empty() ? 0 : offsets[p]));
  };
  for (const Step& s : steps) {
    if (const auto* step = std::get_if<KernelStep>(&s)) {
      bind(step->slots, step->offsets);
      const int64_t* args = step->args.data();
      void* const* bufs = ptrs.data();
      CpuKernelFn fn = step->fn;
      ThreadPool::instance().parallelFor(step->numel, step->grain,
                                         [&](int64_t begin, int64_t end) { fn(bufs, args, begin, end); });
    } else {
      const auto& call = std::get<LibraryStep>(s);
      bind(call.slots, call.offsets);
      call.fn(ptrs, call.args);
    }
    gLaunches.fetch_add(1, std::memory_order_relaxed);
  }
  std::vector<std::shared_ptr<Buffer>> outputs;
  outputs.reserve(outputSlots.size());
  for (int slot : outputSlots) outputs.push_back(bound[slot]);
  return outputs;
}

}  // namespace kiln::runtime

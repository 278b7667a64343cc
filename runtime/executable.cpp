// Running an Executable: bind inputs, allocate the rest, launch each step
// through the device's driver on its current stream.
#include "runtime/executable.h"

#include <algorithm>
#include <atomic>

#include "runtime/error.h"
#include "runtime/executable_collectives.h"
#include "runtime/executable_profile.h"
#include "runtime/executable_replay.h"
#include "runtime/profiler_events.h"
#include "runtime/stream.h"

namespace kiln::runtime {

namespace {
std::atomic<int64_t> gLaunches{0};
}

int64_t kernelLaunchCount() { return gLaunches.load(std::memory_order_relaxed); }
void countLaunches(int64_t n) { gLaunches.fetch_add(n, std::memory_order_relaxed); }

std::shared_ptr<const KernelModule> loadHostKernel(std::string name, CpuKernelFn fn,
                                                   std::shared_ptr<const void> keepAlive) {
  return deviceInterface(Device::cpu())
      .loadModule(KernelImage::hostFunction(std::move(name), fn, std::move(keepAlive)));
}

void Executable::allocateUnbound(std::vector<std::shared_ptr<Buffer>>& bound, std::vector<DevicePtr>& base) const {
  std::vector<std::shared_ptr<Buffer>> shared(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) shared[b] = allocateBuffer(buffers[b].device, buffers[b].bytes);
  for (size_t s = 0; s < slots.size(); ++s) {
    if (bound[s] || std::find(inputSlots.begin(), inputSlots.end(), static_cast<int>(s)) != inputSlots.end()) continue;
    const int planned = slotBuffers.empty() ? -1 : slotBuffers[s];
    if (planned >= 0) {
      KILN_ASSERT(shared[planned]->bytes() >= slots[s].bytes && buffers[planned].device == slots[s].device,
                  "slot {} does not fit its planned buffer {}", s, planned);
      bound[s] = shared[planned];
    } else {
      bound[s] = allocateBuffer(slots[s].device, slots[s].bytes);
    }
    base[s] = bound[s]->ptr();
  }
}

namespace {
void enqueueStep(const Executable& exe, size_t s, std::span<const DevicePtr> bound, DeviceInterface& driver,
                 StreamHandle stream) {
  if (const auto* step = std::get_if<KernelStep>(&exe.steps[s])) {
    driver.launch(*step->kernel, bound, step->args, step->shape, stream);
  } else if (const auto* call = std::get_if<LibraryStep>(&exe.steps[s])) {
    const LibraryEpilogue epilogue{call->epilogue.get(), call->epilogueFirstSlot, call->epilogueArgs};
    call->fn(LibraryCall{exe.device, stream, bound, call->args, call->epilogue ? &epilogue : nullptr});
  } else if (const auto* copy = std::get_if<CopyStep>(&exe.steps[s])) {
    driver.copyDeviceToDevice(bound[1], bound[0], copy->bytes, stream);
  } else {
    KILN_ASSERT(false, "launchStep of collective step {}: run() issues those", stepName(exe.steps[s]));
  }
}
}  // namespace

void Executable::launchStep(size_t s, const std::vector<DevicePtr>& base, DeviceInterface& driver,
                            StreamHandle stream) const {
  DevicePtr local[8];
  std::vector<DevicePtr> heap;
  const std::vector<int>& stepSlots = runtime::stepSlots(steps[s]);
  const std::vector<int64_t>& offsets =
      std::visit([](const auto& x) -> const std::vector<int64_t>& { return x.offsets; }, steps[s]);
  DevicePtr* ptrs = local;
  if (stepSlots.size() > std::size(local)) {
    heap.resize(stepSlots.size());
    ptrs = heap.data();
  }
  for (size_t p = 0; p < stepSlots.size(); ++p) {
    ptrs[p] = base[static_cast<size_t>(stepSlots[p])];
    ptrs[p].offset += static_cast<size_t>(offsets.empty() ? 0 : offsets[p]);
  }
  const std::span<const DevicePtr> bound(ptrs, stepSlots.size());
  // Note [The profiler costs one load when off] (runtime/profiler_events.h)
  if (profiler::enabled()) [[unlikely]]
    profiledStep(*this, s, bound, driver, stream, &enqueueStep);
  else
    enqueueStep(*this, s, bound, driver, stream);
}

int Executable::numCollectiveSteps() const {
  int n = 0;
  for (const Step& s : steps) n += std::holds_alternative<CollectiveStep>(s) ? 1 : 0;
  return n;
}

std::vector<int> Executable::collectiveOverlaps() const {
  std::vector<int> started, overlaps;
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto* c = std::get_if<CollectiveStep>(&steps[s]);
    if (!c) continue;
    const auto t = static_cast<size_t>(c->ticket);
    if (started.size() <= t) started.resize(t + 1, -1), overlaps.resize(t + 1, 0);
    if (c->phase == CollectiveStep::Phase::start) {
      started[t] = static_cast<int>(s);
    } else {
      int between = 0;  // steps between, not counting other collectives' starts and waits
      for (auto k = static_cast<size_t>(started[t] + 1); k < s; ++k)
        between += std::holds_alternative<CollectiveStep>(steps[k]) ? 0 : 1;
      overlaps[t] = between;
    }
  }
  return overlaps;
}

int Executable::numEpilogues() const {
  int n = 0;
  for (const Step& s : steps)
    if (const auto* call = std::get_if<LibraryStep>(&s)) n += call->epilogue ? 1 : 0;
  return n;
}

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
                                                     const std::vector<int64_t>& inputOffsets,
                                                     const std::vector<std::shared_ptr<Buffer>>& outputs,
                                                     const std::vector<int64_t>& outputOffsets) const {
  KILN_ASSERT(inputs.size() == inputSlots.size(), "executable got {} inputs, expects {}", inputs.size(),
              inputSlots.size());
  KILN_ASSERT(inputOffsets.empty() || inputOffsets.size() == inputs.size(),
              "executable got {} input offsets for {} inputs", inputOffsets.size(), inputs.size());
  KILN_ASSERT(outputs.empty() || outputs.size() == outputSlots.size(), "executable got {} outputs, has {}",
              outputs.size(), outputSlots.size());
  KILN_ASSERT(outputOffsets.empty() || outputOffsets.size() == outputs.size(),
              "executable got {} output offsets for {} outputs", outputOffsets.size(), outputs.size());
  std::vector<std::shared_ptr<Buffer>> bound(slots.size());
  std::vector<DevicePtr> base(slots.size());
  const HostInputs host = hostInputs(*this, inputs);
  auto bindCallers = [&](int slot, const std::shared_ptr<Buffer>& buffer, int64_t offset, const char* what, size_t i) {
    const SlotSpec& spec = slots[slot];
    KILN_ASSERT(buffer && offset >= 0 && buffer->bytes() >= spec.bytes + static_cast<size_t>(offset),
                "{} {} is smaller than its slot", what, i);
    if (buffer->device() != spec.device && buffer->device().isCpu() && what[0] == 'i') {
      bound[slot] = buffer;  // uploaded below (HostInputs)
      return;
    }
    KILN_ASSERT(buffer->device() == spec.device, "{} {} on {} bound to a slot on {}", what, i, buffer->device().str(),
                spec.device.str());
    KILN_ASSERT(!bound[slot], "{} {} bound to a slot bound before", what, i);
    bound[slot] = buffer;
    base[slot] = buffer->ptr(static_cast<size_t>(offset));
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    bindCallers(inputSlots[i], inputs[i], inputOffsets.empty() ? 0 : inputOffsets[i], "input", i);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i]) bindCallers(outputSlots[i], outputs[i], outputOffsets.empty() ? 0 : outputOffsets[i], "output", i);
  KILN_ASSERT(slotBuffers.empty() || slotBuffers.size() == slots.size(), "memory plan of {} slots for {} slots",
              slotBuffers.size(), slots.size());
  if (replay != GraphReplay::off && outputs.empty()) {
    std::vector<std::shared_ptr<Buffer>> results;
    if (runReplayed(*this, inputs, inputOffsets, host, base, results)) return results;
  }
  DeviceInterface& driver = deviceInterface(device);
  const StreamHandle stream = currentStream(device).handle();
  if (!host.empty()) {
    // Note [Per-call values are uploaded together]
    std::shared_ptr<Buffer> packed = allocateBuffer(device, host.bytes);
    const int64_t start = profiler::enabled() ? profiler::nowNs() : 0;
    uploadHostInputs(*this, host, inputs, inputOffsets, packed->ptr(), driver, stream);
    if (profiler::enabled()) [[unlikely]]
      profiledUpload(*this, host.bytes, stream, start, profiler::nowNs());
    for (size_t k = 0; k < host.inputs.size(); ++k) {
      const auto slot = static_cast<size_t>(inputSlots[host.inputs[k]]);
      bound[slot] = packed;
      base[slot] = packed->ptr(host.offsets[k]);
    }
  }
  allocateUnbound(bound, base);
  if (numCollectiveSteps() == 0) {
    for (size_t s = 0; s < steps.size(); ++s) launchStep(s, base, driver, stream);
  } else {
    // Note [Collective steps]
    CollectiveRun collectives(*this, bound, base);
    for (size_t s = 0; s < steps.size(); ++s) {
      if (const auto* c = std::get_if<CollectiveStep>(&steps[s]))
        collectives.step(*c);
      else
        launchStep(s, base, driver, stream);
    }
    collectives.finish();
  }
  countLaunches(static_cast<int64_t>(steps.size()) + (host.empty() ? 0 : 1));
  std::vector<std::shared_ptr<Buffer>> results;
  results.reserve(outputSlots.size());
  for (int slot : outputSlots) results.push_back(bound[slot]);
  return results;
}

}  // namespace kiln::runtime

// Graph replay: an Executable recorded once per stream and replayed, so a
// compiled program that runs many times enqueues a few commands per call
// instead of one per step.
//
// Note [Graph replay]
// A recording (Note [Recorded work] in runtime/device_interface.h) bakes in
// every address its launches were given, so a replayed program must find
// its data where it was recorded. As torch.compile's "reduce-overhead"
// mode does with CUDA graphs:
// - Intermediates, the plan's shared buffers and the outputs live in a
//   private pool: buffers the recording allocates and keeps for its life.
//   An output is copied from there into a fresh buffer at every call, so
//   what a call returns is never overwritten by the next (PyTorch's
//   cudagraph trees hand out the pool's memory and fail on a later read;
//   kiln pays one device copy per output instead).
// - An input whose buffer is the same at every call (a parameter, an
//   optimizer's moment, a captured tensor: their storage does not move) is
//   read in place. An input seen at two different addresses (a batch, a
//   per-call scalar) is "staged": the recording reads a private copy, which
//   each call fills with one device copy before the replay.
// - An output the caller will store into an input's tensor (an optimizer
//   update that could not be donated: Executable::writeBack) is copied into
//   that input's buffer by a copy recorded at the end, and that buffer is
//   what the call returns for it; the caller's store then has nothing to
//   do, and the input stays where it is.
// - An input the program writes (a donated parameter, Note [Donated
//   buffers] in codegen/compile_graph.cpp, or a write-back) or returns must
//   be read in place, so a call where such an input moved records again. So does a
//   call where an input read in place moved; that input is staged from
//   then on. After kMaxRecordings recordings on a stream, replay is off
//   there (ReplayInfo::off says why), and the steps run one by one.
// The first call on a stream runs the steps one by one and notes the input
// addresses; the second records and replays. A library call is recorded
// when its function says it can be (cuBLAS into a CUDA graph); others
// (CLBlast, which enqueues on its own terms; gathers, which wait for their
// indices) cut the program into runs of recordable steps, each replayed as
// one command, with those calls run between the replays on the recorded
// addresses. A recording is made only when it enqueues fewer
// commands than the steps. Recordings belong to the stream they were made
// on (an OpenCL command buffer is bound to its queue); a call on another
// stream has its own. Replays of one recording are ordered by the stream,
// and the enqueueing of a call (copies in, replays, copies out) holds the
// cache's lock, so two threads on one stream never interleave theirs.
// Note [Per-call values are uploaded together]
// A compiled program's per-call numbers (an optimizer's step size and bias
// corrections, a dropout draw's seed and offset: Note [Per-call values] in
// frontend/trace.h) are computed on the host at every call. Made as device
// tensors one by one, they would cost a copy each: an AdamW step over N
// parameters 3N + 2 host-to-device copies per call, more commands than the
// program's kernels. So the frontend hands them to Executable::run in host
// memory, and run() packs them into one device buffer with one copy (each
// at a 256-byte boundary); a replayed program copies them into a private
// buffer the recording reads.
#include "runtime/executable_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/profiler_events.h"
#include "runtime/stream.h"

namespace kiln::runtime {

namespace {

constexpr int kMaxRecordings = 4;

bool addressEquals(DevicePtr a, DevicePtr b) { return a.handle == b.handle && a.offset == b.offset; }

/// A piece of a recorded run: a recording of steps, or one step run as is.
struct Piece {
  std::unique_ptr<RecordedWork> work;
  size_t step = 0;  ///< the step, when `work` is null
};

/// An output copied into the buffer of input `input` (Executable::writeBack).
struct WriteBack {
  int output = 0, input = 0;
};

struct Recording {
  std::vector<DevicePtr> base;  ///< every slot's address, as recorded
  std::vector<bool> staged;     ///< per input
  HostInputs host;              ///< uploaded to `hostBuffer` at every call
  std::shared_ptr<Buffer> hostBuffer;
  std::vector<WriteBack> writeBacks;
  std::vector<std::shared_ptr<Buffer>> owned;  ///< the private pool
  std::vector<Piece> pieces;
  int commands = 0;  ///< enqueued per call
};

struct StreamReplay {
  bool seen = false;
  std::vector<DevicePtr> lastInputs;  ///< the input addresses of the last call
  std::vector<bool> moving;           ///< inputs seen at two addresses
  std::unique_ptr<Recording> recording;
  int recordings = 0;
  std::string off;
};

}  // namespace

struct ReplayCache {
  std::mutex mutex;
  std::map<void*, StreamReplay> streams;
  std::atomic<int64_t> recordings{0}, replays{0};
  std::atomic<int> commandsPerRun{0}, stagedInputs{0};
  std::string lastOff;
};

HostInputs hostInputs(const Executable& exe, const std::vector<std::shared_ptr<Buffer>>& inputs) {
  HostInputs host;
  if (exe.device.isCpu()) return host;
  for (size_t i = 0; i < inputs.size() && i < exe.inputSlots.size(); ++i) {
    if (!inputs[i] || !inputs[i]->device().isCpu()) continue;
    host.inputs.push_back(i);
    host.offsets.push_back(host.bytes);
    const size_t bytes = exe.slots[static_cast<size_t>(exe.inputSlots[i])].bytes;
    host.bytes += (bytes + 255) / 256 * 256;
  }
  return host;
}

void uploadHostInputs(const Executable& exe, const HostInputs& host, const std::vector<std::shared_ptr<Buffer>>& inputs,
                      const std::vector<int64_t>& inputOffsets, DevicePtr dst, DeviceInterface& driver,
                      StreamHandle stream) {
  thread_local std::vector<uint8_t> packed;
  packed.assign(host.bytes, 0);
  for (size_t k = 0; k < host.inputs.size(); ++k) {
    const size_t i = host.inputs[k];
    const size_t bytes = exe.slots[static_cast<size_t>(exe.inputSlots[i])].bytes;
    const auto offset = static_cast<size_t>(inputOffsets.empty() ? 0 : inputOffsets[i]);
    std::memcpy(packed.data() + host.offsets[k], static_cast<const uint8_t*>(inputs[i]->hostData()) + offset, bytes);
  }
  driver.copyHostToDevice(dst, packed.data(), host.bytes, stream);  // reads `packed` before it returns
}

std::shared_ptr<ReplayCache> makeReplayCache() { return std::make_shared<ReplayCache>(); }

bool graphReplayEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("KILN_GRAPH_REPLAY");
    return !(v && std::string(v) == "0");
  }();
  return enabled;
}

namespace {

bool recordable(const Step& s) {
  const auto* call = std::get_if<LibraryStep>(&s);
  return !call || call->recordable;
}

/// Whether input i must be read where the caller has it.
std::vector<bool> readInPlace(const Executable& exe) {
  std::vector<bool> fixed(exe.inputSlots.size(), false);
  for (size_t i = 0; i < exe.inputSlots.size(); ++i)
    for (int out : exe.outputSlots)
      if (out == exe.inputSlots[i]) fixed[i] = true;
  for (int in : exe.writeBack)
    if (in >= 0) fixed[static_cast<size_t>(in)] = true;
  return fixed;
}

/// The write-backs a recording makes: an output of the input's size into
/// an input bound at the start of its buffer (so that the buffer is the
/// output's), the output not already computed there.
std::vector<WriteBack> writeBacks(const Executable& exe, const std::vector<std::shared_ptr<Buffer>>& inputs,
                                  const std::vector<DevicePtr>& addresses) {
  std::vector<WriteBack> out;
  for (size_t o = 0; o < exe.writeBack.size() && o < exe.outputSlots.size(); ++o) {
    const int k = exe.writeBack[o];
    if (k < 0) continue;
    const auto in = static_cast<size_t>(k);
    const int outSlot = exe.outputSlots[o], inSlot = exe.inputSlots[in];
    if (outSlot == inSlot ||
        exe.slots[static_cast<size_t>(outSlot)].bytes != exe.slots[static_cast<size_t>(inSlot)].bytes)
      continue;
    if (!addressEquals(addresses[in], inputs[in]->ptr())) continue;
    bool again = false;  // an output returned twice, or an input written twice
    for (const WriteBack& w : out)
      again = again || w.input == k || exe.outputSlots[static_cast<size_t>(w.output)] == outSlot;
    if (!again) out.push_back(WriteBack{static_cast<int>(o), k});
  }
  return out;
}

/// The input bound to `slot`, or -1 when no input is.
int inputOfSlot(const Executable& exe, int slot) {
  const auto it = std::find(exe.inputSlots.begin(), exe.inputSlots.end(), slot);
  return it == exe.inputSlots.end() ? -1 : static_cast<int>(it - exe.inputSlots.begin());
}

/// Whether output `o` is one of `wbs`; its input when it is, else -1.
int writtenBackTo(const std::vector<WriteBack>& wbs, size_t o) {
  for (const WriteBack& w : wbs)
    if (static_cast<size_t>(w.output) == o) return w.input;
  return -1;
}

/// Records `exe` on `stream` with the callers' `inputs` at `addresses`;
/// null with `why` when recording would not enqueue fewer commands.
std::unique_ptr<Recording> record(const Executable& exe, DeviceInterface& driver, StreamHandle stream,
                                  const std::vector<std::shared_ptr<Buffer>>& inputs, const HostInputs& host,
                                  const std::vector<DevicePtr>& addresses, const std::vector<bool>& moving,
                                  std::string& why) {
  auto rec = std::make_unique<Recording>();
  rec->host = host;
  rec->writeBacks = writeBacks(exe, inputs, addresses);
  const std::vector<bool> fixed = readInPlace(exe);
  rec->staged.resize(exe.inputSlots.size());
  std::vector<bool> fromHost(exe.inputSlots.size(), false);
  for (size_t i : host.inputs) fromHost[i] = true;
  int staged = 0;
  for (size_t i = 0; i < exe.inputSlots.size(); ++i) {
    if (fromHost[i]) continue;
    rec->staged[i] = moving[i] && !fixed[i];
    staged += rec->staged[i] ? 1 : 0;
  }
  // Commands per call: the staging copies, one per run of recordable steps
  // (a lone step is launched as is), the library calls, the output copies.
  // The actions: the steps, then the write-back copies (recordable).
  const size_t actions = exe.steps.size() + rec->writeBacks.size();
  auto canRecord = [&](size_t a) { return a >= exe.steps.size() || recordable(exe.steps[a]); };
  int commands = staged + (host.empty() ? 0 : 1);
  for (size_t s = 0; s < actions;) {
    size_t e = s;
    while (e < actions && canRecord(e)) ++e;
    commands += e > s ? 1 : 0;
    if (e == s) ++commands, ++e;  // a library call
    s = e;
  }
  std::vector<bool> outputCopied(exe.slots.size(), false);
  for (size_t o = 0; o < exe.outputSlots.size(); ++o) {
    const int out = exe.outputSlots[o];
    if (inputOfSlot(exe, out) < 0 && writtenBackTo(rec->writeBacks, o) < 0 && !outputCopied[static_cast<size_t>(out)]) {
      outputCopied[static_cast<size_t>(out)] = true;
      ++commands;
    }
  }
  if (exe.replay == GraphReplay::cheaper && commands >= static_cast<int>(exe.steps.size())) {
    why = fmt::format("a replay would enqueue {} commands ({} inputs copied in), the steps are {}", commands, staged,
                      exe.steps.size());
    return nullptr;
  }
  // The private pool: staged inputs, then every slot the callers do not bind.
  std::vector<std::shared_ptr<Buffer>> bound(exe.slots.size());
  rec->base.assign(exe.slots.size(), DevicePtr{});
  if (!host.empty()) rec->hostBuffer = allocateBuffer(exe.device, host.bytes);
  for (size_t k = 0; k < host.inputs.size(); ++k)
    rec->base[static_cast<size_t>(exe.inputSlots[host.inputs[k]])] = rec->hostBuffer->ptr(host.offsets[k]);
  for (size_t i = 0; i < exe.inputSlots.size(); ++i) {
    const auto slot = static_cast<size_t>(exe.inputSlots[i]);
    if (fromHost[i]) continue;
    if (rec->staged[i]) {
      bound[slot] = allocateBuffer(exe.device, exe.slots[slot].bytes);
      rec->base[slot] = bound[slot]->ptr();
    } else {
      rec->base[slot] = addresses[i];  // read in place
    }
  }
  std::vector<DevicePtr> base = rec->base;
  exe.allocateUnbound(bound, base);  // every slot but the inputs
  for (size_t s = 0; s < exe.slots.size(); ++s)
    if (bound[s] && !rec->base[s].handle) rec->base[s] = base[s];
  for (auto& b : bound)
    if (b) rec->owned.push_back(b);
  // The pieces.
  auto enqueue = [&](size_t a) {
    if (a < exe.steps.size()) return exe.launchStep(a, rec->base, driver, stream);
    const WriteBack& w = rec->writeBacks[a - exe.steps.size()];
    const auto outSlot = static_cast<size_t>(exe.outputSlots[static_cast<size_t>(w.output)]);
    driver.copyDeviceToDevice(rec->base[static_cast<size_t>(exe.inputSlots[static_cast<size_t>(w.input)])],
                              rec->base[outSlot], exe.slots[outSlot].bytes, stream);
  };
  for (size_t s = 0; s < actions;) {
    size_t e = s;
    while (e < actions && canRecord(e)) ++e;
    if (e - s >= 2 || (e > s && s >= exe.steps.size())) {
      driver.beginRecording(stream);
      std::unique_ptr<RecordedWork> work;
      try {
        for (size_t k = s; k < e; ++k) enqueue(k);
      } catch (...) {
        try {
          driver.endRecording(stream);
        } catch (...) {  // the first error is the one to report
        }
        throw;
      }
      work = driver.endRecording(stream);
      rec->pieces.push_back(Piece{std::move(work), s});
      s = e;
    } else {
      rec->pieces.push_back(Piece{nullptr, s});
      ++s;
    }
  }
  rec->commands = commands;
  return rec;
}

void replay(const Executable& exe, const Recording& rec, DeviceInterface& driver, StreamHandle stream,
            const std::vector<DevicePtr>& addresses, std::vector<std::shared_ptr<Buffer>>& results,
            const std::vector<std::shared_ptr<Buffer>>& inputs, const std::vector<int64_t>& inputOffsets) {
  if (!rec.host.empty()) uploadHostInputs(exe, rec.host, inputs, inputOffsets, rec.hostBuffer->ptr(), driver, stream);
  for (size_t i = 0; i < exe.inputSlots.size(); ++i) {
    if (!rec.staged[i]) continue;
    const auto slot = static_cast<size_t>(exe.inputSlots[i]);
    driver.copyDeviceToDevice(rec.base[slot], addresses[i], exe.slots[slot].bytes, stream);
  }
  for (const Piece& p : rec.pieces) {
    if (p.work)
      p.work->replay(stream);
    else
      exe.launchStep(p.step, rec.base, driver, stream);
  }
  std::map<int, std::shared_ptr<Buffer>> copied;
  results.clear();
  for (size_t o = 0; o < exe.outputSlots.size(); ++o) {
    const int out = exe.outputSlots[o];
    int input = inputOfSlot(exe, out);
    if (const int k = writtenBackTo(rec.writeBacks, o); k >= 0) input = k;
    if (input >= 0) {
      results.push_back(inputs[static_cast<size_t>(input)]);
      continue;
    }
    auto [it, fresh] = copied.try_emplace(out);
    if (fresh) {
      const auto bytes = exe.slots[static_cast<size_t>(out)].bytes;
      it->second = allocateBuffer(exe.device, bytes);
      driver.copyDeviceToDevice(it->second->ptr(), rec.base[static_cast<size_t>(out)], bytes, stream);
    }
    results.push_back(it->second);
  }
  countLaunches(rec.commands);
}

}  // namespace

bool runReplayed(const Executable& exe, const std::vector<std::shared_ptr<Buffer>>& inputs,
                 const std::vector<int64_t>& inputOffsets, const HostInputs& host, const std::vector<DevicePtr>& base,
                 std::vector<std::shared_ptr<Buffer>>& results) {
  if (!exe.replayCache) return false;
  DeviceInterface& driver = deviceInterface(exe.device);
  ReplayCache& cache = *exe.replayCache;
  std::string why;
  if (!graphReplayEnabled())
    why = "KILN_GRAPH_REPLAY=0";
  else if (profiler::flags() & profiler::kDevice)
    why = "a profile records device activity";  // each step is a kernel of its own (docs/profiler.md)
  else if (exe.steps.size() < 2)
    why = "a program of one step";
  else if (exe.numCollectiveSteps() > 0)
    why = "a program with collectives (Note [Collective steps])";
  if (!why.empty() || !driver.canRecord(&why)) {
    std::lock_guard lock(cache.mutex);
    cache.lastOff = why;
    return false;
  }
  const StreamHandle stream = currentStream(exe.device).handle();
  std::vector<DevicePtr> addresses(exe.inputSlots.size());
  for (size_t i = 0; i < exe.inputSlots.size(); ++i) addresses[i] = base[static_cast<size_t>(exe.inputSlots[i])];

  std::lock_guard lock(cache.mutex);
  StreamReplay& sr = cache.streams[stream.native];
  cache.lastOff = sr.off;
  if (!sr.off.empty()) return false;
  if (sr.recording) {
    bool valid = sr.recording->host.inputs == host.inputs;
    std::vector<bool> fromHost(addresses.size(), false);
    for (size_t i : host.inputs) fromHost[i] = true;
    for (size_t i = 0; i < addresses.size(); ++i) {
      if (sr.recording->staged[i] || fromHost[i]) continue;
      if (!addressEquals(addresses[i], sr.recording->base[static_cast<size_t>(exe.inputSlots[i])])) {
        sr.moving[i] = true;
        valid = false;
      }
    }
    if (valid) {
      replay(exe, *sr.recording, driver, stream, addresses, results, inputs, inputOffsets);
      cache.replays.fetch_add(1);
      return true;
    }
    sr.recording.reset();
  } else if (!sr.seen) {
    sr.seen = true;
    sr.lastInputs = addresses;
    sr.moving.assign(addresses.size(), false);
    return false;
  } else {
    for (size_t i = 0; i < addresses.size(); ++i)
      if (!addressEquals(addresses[i], sr.lastInputs[i])) sr.moving[i] = true;
  }
  sr.lastInputs = addresses;
  if (sr.recordings >= kMaxRecordings) {
    sr.off = fmt::format("inputs read in place moved after {} recordings", kMaxRecordings);
    cache.lastOff = sr.off;
    KILN_LOG_TO(codegen, "graph replay off for a program of {} steps on {}: {}", exe.steps.size(), exe.device.str(),
                sr.off);
    return false;
  }
  try {
    sr.recording = record(exe, driver, stream, inputs, host, addresses, sr.moving, why);
  } catch (const Error& e) {
    // A device that refuses a recording (a library call it cannot capture
    // after all): the steps run one by one from now on.
    why = fmt::format("recording failed: {}", e.what());
    sr.recording.reset();
  }
  if (!sr.recording) {
    sr.off = why;
    cache.lastOff = why;
    return false;
  }
  sr.recordings++;
  cache.recordings.fetch_add(1);
  int staged = 0;
  for (bool s : sr.recording->staged) staged += s ? 1 : 0;
  cache.stagedInputs = staged;
  cache.commandsPerRun = sr.recording->commands;
  replay(exe, *sr.recording, driver, stream, addresses, results, inputs, inputOffsets);
  cache.replays.fetch_add(1);
  return true;
}

ReplayInfo Executable::replayInfo() const {
  ReplayInfo info;
  if (!replayCache) return info;
  std::lock_guard lock(replayCache->mutex);
  info.recordings = replayCache->recordings.load();
  info.replays = replayCache->replays.load();
  info.commandsPerRun = replayCache->commandsPerRun.load();
  info.stagedInputs = replayCache->stagedInputs.load();
  info.off = replayCache->lastOff;
  return info;
}

}  // namespace kiln::runtime

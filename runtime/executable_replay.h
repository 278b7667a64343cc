// Graph replay of an Executable (Note [Graph replay] in
// runtime/executable_replay.cpp), for Executable::run.
#pragma once

#include <memory>
#include <vector>

#include "runtime/executable.h"

namespace kiln::runtime {

/// Inputs given in host memory for slots on the device (a program's
/// per-call numbers: Note [Per-call values are uploaded together]): where
/// each goes in one device buffer, so that one copy uploads them all.
struct HostInputs {
  std::vector<size_t> inputs;   ///< which inputs, in order
  std::vector<size_t> offsets;  ///< bytes into the buffer, per entry of `inputs`
  size_t bytes = 0;             ///< the buffer's size
  bool empty() const { return inputs.empty(); }
};

/// The host inputs of a call of `exe` (none on the CPU).
HostInputs hostInputs(const Executable& exe, const std::vector<std::shared_ptr<Buffer>>& inputs);

/// Packs the host inputs' bytes (each from its input offset) and copies
/// them to `dst` with one copy on `stream`.
void uploadHostInputs(const Executable& exe, const HostInputs& host, const std::vector<std::shared_ptr<Buffer>>& inputs,
                      const std::vector<int64_t>& inputOffsets, DevicePtr dst, DeviceInterface& driver,
                      StreamHandle stream);

/// Runs `exe` by replaying a recording of its steps on the current stream,
/// recording it first when this call is the one to; `base` holds the
/// callers' input addresses (the other slots are unbound). Returns false,
/// having enqueued nothing, when this call is to run the steps one by one
/// (the device does not record, the first call on a stream, replay is off
/// for this executable); otherwise fills `results` as run() returns them.
bool runReplayed(const Executable& exe, const std::vector<std::shared_ptr<Buffer>>& inputs,
                 const std::vector<int64_t>& inputOffsets, const HostInputs& host, const std::vector<DevicePtr>& base,
                 std::vector<std::shared_ptr<Buffer>>& results);

}  // namespace kiln::runtime

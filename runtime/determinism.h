// The process's deterministic-algorithms setting (kiln::setDeterministic in
// frontend/determinism.h, torch.use_deterministic_algorithms): every layer
// that could choose a path whose bits vary from run to run reads it here.
#pragma once

namespace kiln::runtime {

void setDeterministic(bool enabled);
/// One relaxed atomic load.
bool deterministic();

}  // namespace kiln::runtime

// plan-memory (DESIGN.md §5, §7): the memory plan of an Executable.
//
// Intermediates whose lifetimes do not overlap share one buffer, so a
// program allocates about as much as it keeps live at once instead of one
// buffer per value. The plan is made over the Executable's steps, not over
// the graph (Note [The memory plan is made over steps]), and compileGraph()
// applies it to every executable it makes.
//
// A slot's lifetime is the range of steps that name it, from its first to
// its last (a view read by a library call names its input's slot, with an
// offset, so views live as long as what they view; a cat's pieces all name
// the one result slot). Two packings are made and the one with fewer bytes
// kept (Note [Two packings, the smaller kept]): slots in the order of their
// first step, each in the smallest free buffer of its device that is big
// enough (best fit), else the largest free one, grown to fit, else a new
// buffer; and slots largest first, each in the smallest buffer of its
// device whose slots all live at other steps, else a new one. Slots in one
// buffer never live at one step: two slots named by one step never share
// (a kernel's parameters are `noalias`). Program inputs and outputs are
// never planned: inputs are the caller's, outputs are handed back to it.
#pragma once

#include <cstddef>
#include <string>

#include "runtime/executable.h"

namespace kiln::codegen {

struct MemoryPlanStats {
  int slots = 0;           ///< intermediate slots planned
  int buffers = 0;         ///< shared buffers they live in
  size_t bytesBefore = 0;  ///< bytes of those slots, one buffer each
  size_t bytesAfter = 0;   ///< bytes of the shared buffers
  /// The most bytes of planned slots live at one step, summed over devices:
  /// no plan can take less than this (Note [The lower bound of a plan]).
  size_t liveBytes = 0;
};

/// Fills exe.slotBuffers and exe.buffers (replacing any plan). An
/// intermediate slot that no step names is left out of the plan (a buffer
/// of its own).
MemoryPlanStats planMemory(runtime::Executable& exe);

/// The plan of `exe` as text, for `irdump --emit=memory-plan`: each shared
/// buffer with its size, device and the slots in it (with the steps each
/// lives over), the inputs, outputs and slots outside the plan, then each
/// step with the slots it names. Slots are numbered as compileGraph lays
/// them out: the graph's inputs, then each node's results in order.
std::string describeMemoryPlan(const runtime::Executable& exe);

}  // namespace kiln::codegen

// data::collate: examples into a batch, as torch.utils.data's
// default_collate: tensor k of the batch is tensor k of every example
// stacked along a new leading dimension (scalars become a vector).
//
// Examples of contiguous CPU tensors (what data sets make) are copied with
// memcpy into one new tensor, in pinned memory when asked: one copy per
// element, where kiln::stack would compile a kernel for each batch size and
// pinMemory() would copy a second time. Other tensors go through
// kiln::stack.
#pragma once

#include <functional>
#include <vector>

#include "frontend/data/example.h"

namespace kiln::data {

/// Every example holds the same number of tensors; tensor k has one shape
/// and dtype across examples (an error naming the example otherwise). With
/// `pinned`, the batch's CPU tensors are in pinned memory.
Batch collate(const std::vector<Example>& examples, bool pinned = false);

/// A collate step the loader calls on a batch's examples. The loader pins
/// what it returns when pinMemory is set.
using CollateFn = std::function<Batch(const std::vector<Example>&)>;

}  // namespace kiln::data

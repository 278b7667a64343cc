// Keeps the CPU's measured convolution algorithms in the disk kernel cache
// (Note [Choosing a convolution algorithm] in runtime/conv.cpp): the runtime
// measures, codegen stores.
#pragma once

namespace kiln::codegen {

/// Installs the disk kernel cache (codegen/disk_cache.h) as
/// runtime::setConvChoiceStore's store, keyed by the CPU target's
/// description; once per process (CpuTarget::libraries() calls it).
void installConvChoiceStore();

}  // namespace kiln::codegen

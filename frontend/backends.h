// Backend settings, as torch.backends' (docs/convolution.md, "Choosing an
// algorithm"): kiln::backends::setBenchmark(true) is
// torch.backends.cudnn.benchmark = True for kiln's convolutions on every
// device — the first call of each distinct convolution times the
// algorithms available for it and keeps the fastest (for the process and in
// the disk kernel cache). Reproducibility is kiln::setDeterministic(true)'s
// (frontend/determinism.h): under it nothing is measured and each
// convolution runs its device's default algorithm.
#pragma once

namespace kiln::backends {

void setBenchmark(bool enabled);
bool benchmark();

}  // namespace kiln::backends

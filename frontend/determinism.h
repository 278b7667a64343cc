// Reproducible runs, as torch.manual_seed and
// torch.use_deterministic_algorithms.
//
//   kiln::manualSeed(0);              // frontend/random.h: every device's draws
//   kiln::setDeterministic(true);
//
// Note [Determinism]
// Seeding: kiln has one default generator, and a draw is a function of its
// seed and offset on every device (Philox counters, DESIGN.md §8), so
// manualSeed(seed) seeds the draws of every device at once and a cpu and an
// opencl tensor draw the same masks.
// Deterministic algorithms: kiln's own kernels are deterministic on every
// device by construction: a reduction adds in a fixed order at any thread
// count, index_add gives each output column to one work-item walking the
// indices in order (no atomics), attention runs one head per thread. What
// can vary is outside them, and setDeterministic(true) pins or refuses it:
// - the CPU BLAS chosen by measurement (KILN_BLAS unset or auto: OpenBLAS or
//   oneDNN, whichever was faster when measured, Note [Choosing the BLAS])
//   becomes OpenBLAS, not measured, so a fresh cache cannot flip a run's
//   bits (an explicit KILN_BLAS=openblas|onednn is kept); likewise bf16
//   products convert to f32 instead of a measured choice of oneDNN's bf16
//   matmul (an explicit KILN_BF16_MATMUL is kept);
// - a library call on CUDA whose library is not deterministic as configured
//   is an error naming the op, the device and the fix: cuBLAS (matmul) is
//   deterministic only with CUBLAS_WORKSPACE_CONFIG=:4096:8 or :16:8 set
//   before it loads, as PyTorch requires.
// The (op, device) paths that are not deterministic are listed once, in
// frontend/determinism.cpp, and every op checks them in dispatch().
#pragma once

#include "frontend/tensor.h"

namespace kiln {

/// Makes every op take a deterministic path, or fail with an error naming
/// the op, the device and this setting (Note [Determinism]).
void setDeterministic(bool enabled);
bool isDeterministic();

namespace detail {
/// With the setting on: a kiln::Error when `op` on `device` has no
/// deterministic path as configured. Called by dispatch().
void checkDeterministic(ir::Op op, Device device);
}  // namespace detail

}  // namespace kiln

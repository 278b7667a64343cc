// kiln::dropout, the first op that draws random numbers: like
// torch.nn.functional.dropout, with kiln's counter-based Philox4x32-10
// generator (DESIGN.md §8). Each element is kept with probability 1 - p and
// scaled by 1 / (1 - p), or zeroed; which ones is a pure function of the
// generator's seed, the draw's offset and the element's index
// (ir/scalar_formulas_random.h, Note [Dropout draws]), so eager, compiled,
// CPU and CUDA kernels give the same mask for the same generator state.
#pragma once

#include "frontend/tensor.h"

namespace kiln {

/// x with each element zeroed with probability p, the others scaled by
/// 1 / (1 - p). One call draws once from `generator`: it reads its seed and
/// offset and advances the offset by one (inside kiln::compile the draw is
/// made at each call of the compiled function, Note [Traced draws]). With
/// training false or p = 0 it returns x itself and draws nothing; p = 1
/// gives zeros. x must be floating-point (f32, f64, f16, bf16) and p in
/// [0, 1], else kiln::Error. Unlike PyTorch, a dropped element is +0 even
/// where x is NaN, inf or -0 (kiln selects, PyTorch multiplies by 0).
Tensor dropout(const Tensor& x, double p, bool training = true, Generator& generator = defaultGenerator());

namespace detail {
/// One draw from `generator` as dropout's seed and offset (0-d i64 on the
/// host), per call (Note [Traced draws]): for the ops that draw as dropout
/// does (attention's dropout on its weights).
std::vector<Tensor> dropoutDraw(Generator& generator, Device device);
}  // namespace detail

}  // namespace kiln

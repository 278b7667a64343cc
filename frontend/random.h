// kiln's random numbers: the Generator (a handle on a Philox4x32-10 stream's
// seed and offset, DESIGN.md §8), the default generator, and the random
// fills rand and randn. A fill is one `rand` or `randn` op (ir/Ops.def), a
// kernel like any other whose formula (ir/scalar_formulas_random.h, Note
// [Random fills]) every renderer and the C++ evaluator share, so a device
// fills the same values as the CPU for the same generator state. dropout
// (frontend/dropout.h) draws from the same generators.
#pragma once

#include <cstdint>
#include <memory>

#include "frontend/tensor.h"

namespace kiln {

/// The state of a counter-based Philox4x32-10 stream (DESIGN.md §8): every
/// draw advances offset by one, whatever its size, under key `seed`, so a
/// seed and an offset name a draw exactly. Dropout's draw of n elements
/// uses one block per four elements, counters (0..ceil(n/4), offset), one
/// word each (ir/scalar_formulas_random.h, Note [Dropout draws]); randn and
/// rand use one block per element, counters (0..n, offset) (Note [Random
/// fills]).
///
/// A Generator is a handle, like libtorch's at::Generator: copies share one
/// state, so a compiled function that traced a draw from a generator keeps
/// drawing from that same state at every call, even after the caller's
/// Generator object is gone.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_(std::make_shared<State>(State{seed, 0})) {}
  /// Sets the seed and restarts the offset at 0.
  void manualSeed(uint64_t seed) { *state_ = {seed, 0}; }
  uint64_t seed() const { return state_->seed; }
  uint64_t offset() const { return state_->offset; }
  /// Sets the offset of the next draw (to replay a draw, or skip ahead).
  void setOffset(uint64_t offset) { state_->offset = offset; }
  /// Returns the offset of the next draw and advances past it.
  uint64_t advance() { return state_->offset++; }

 private:
  struct State {
    uint64_t seed;
    uint64_t offset;
  };
  std::shared_ptr<State> state_;
};

/// The process-wide default generator.
Generator& defaultGenerator();
/// Seeds the default generator.
void manualSeed(uint64_t seed);

/// Standard normal samples of `dtype` (f32, f64, f16 or bf16; another is an
/// error), one draw of the generator: element i is Box-Muller, sqrt(-2
/// log(u1)) cos(2 pi u2), of uniforms from the Philox block of counter
/// {lo(i), hi(i), lo(offset), hi(offset)} under key {lo(seed), hi(seed)},
/// the counter and key dropout uses, computed in f64 with kiln's own log and
/// cos and rounded once (Note [Random fills]; docs/ops.md, "Random fills").
/// randn runs eagerly even inside kiln::compile: its result is captured as
/// a constant input of the program.
Tensor randn(const Shape& shape, Generator& generator = defaultGenerator(), Device device = defaultDevice(),
             DType dtype = DType::f32);
Tensor randn(const Shape& shape, DType dtype, Generator& generator = defaultGenerator(), Device device = defaultDevice());
/// Uniform samples in [0, 1) of `dtype`, drawn as randn draws: element i is
/// the top bits of word 0 of its Philox block, as many as the dtype holds
/// (f32: (w >> 8) 2^-24, a multiple of 2^-24 as torch.rand's f32 values;
/// f16 11 bits, bf16 8; f64 53 bits of words 0 and 1), so every value is
/// exact and below 1.
Tensor rand(const Shape& shape, Generator& generator = defaultGenerator(), Device device = defaultDevice(),
            DType dtype = DType::f32);
Tensor rand(const Shape& shape, DType dtype, Generator& generator = defaultGenerator(), Device device = defaultDevice());

}  // namespace kiln

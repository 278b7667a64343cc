// kiln::dropout: checks, then one `dropout` node whose seed and offset come
// from the generator: eagerly as 0-d i64 tensors of its current state, traced
// as inputs of the program bound at every call (frontend/trace.h).
#include "frontend/dropout.h"

#include "frontend/dispatch.h"
#include "frontend/draw_replay.h"
#include "frontend/per_call.h"
#include "runtime/error.h"

namespace kiln {

Tensor dropout(const Tensor& x, double p, bool training, Generator& generator) {
  KILN_CHECK(x.defined(), "dropout: argument 0 is an undefined tensor");
  KILN_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got {}", p);  // NaN fails too
  KILN_CHECK(isFloatingPoint(x.dtype()), "dropout: expected a floating-point dtype (f32, f64, f16, bf16), got {}",
             x.str());
  if (!training || p == 0.0) return x;
  const std::vector<Tensor> draw = detail::dropoutDraw(generator, x.device());
  return detail::dispatch(ir::Op::dropout, {x, draw[0], draw[1]}, {{"p", p}});
}

std::vector<Tensor> detail::dropoutDraw(Generator& generator, Device device) {
  // The draw's seed and offset are per-call values, so that a compiled
  // program draws afresh at every call (Note [Traced draws] in frontend/trace.h).
  // A checkpoint's recomputation replays its forward's draws instead
  // (Note [Replayed draws] in frontend/draw_replay.h).
  const ir::TensorType i64{DType::i64, {}, device};
  return detail::draw("dropout", device, [&] {
    return detail::perCall({{"seed", i64}, {"offset", i64}}, [generator]() mutable {
      const auto seed = static_cast<int64_t>(generator.seed());
      const auto offset = static_cast<int64_t>(generator.advance());
      // On the host: moved or uploaded by perCall (frontend/per_call.h).
      return std::vector<Tensor>{fromVector(std::vector<int64_t>{seed}, Shape{}, Device::cpu()),
                                 fromVector(std::vector<int64_t>{offset}, Shape{}, Device::cpu())};
    });
  });
}

}  // namespace kiln

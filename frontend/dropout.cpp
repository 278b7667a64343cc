// kiln::dropout: checks, then one `dropout` node whose seed and offset come
// from the generator: eagerly as 0-d i64 tensors of its current state, traced
// as inputs of the program bound at every call (frontend/trace.h).
#include "frontend/dropout.h"

#include "frontend/dispatch.h"
#include "frontend/trace.h"
#include "runtime/error.h"

namespace kiln {

Tensor dropout(const Tensor& x, double p, bool training, Generator& generator) {
  KILN_CHECK(x.defined(), "dropout: argument 0 is an undefined tensor");
  KILN_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got {}", p);  // NaN fails too
  KILN_CHECK(isFloatingPoint(x.dtype()), "dropout: expected a floating-point dtype (f32, f64, f16, bf16), got {}",
             x.str());
  if (!training || p == 0.0) return x;
  Tensor seed, offset;
  if (detail::TraceState* trace = detail::TraceState::current()) {
    std::tie(seed, offset) = trace->draw(generator, x.device());
  } else {
    seed = fromVector(std::vector<int64_t>{static_cast<int64_t>(generator.seed())}, Shape{}, x.device());
    offset = fromVector(std::vector<int64_t>{static_cast<int64_t>(generator.advance())}, Shape{}, x.device());
  }
  return detail::dispatch(ir::Op::dropout, {x, seed, offset}, {{"p", p}});
}

}  // namespace kiln

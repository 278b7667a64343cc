// The default generator and the random fills (frontend/random.h): each fill
// is one `rand` or `randn` op whose seed and offset are 0-d i64 tensors of
// the generator's state, run eagerly even while tracing.
#include "frontend/random.h"

#include "frontend/dispatch.h"
#include "frontend/draw_replay.h"
#include "frontend/per_call.h"
#include "runtime/error.h"

namespace kiln {

Generator& defaultGenerator() {
  static Generator generator(0);
  return generator;
}

void manualSeed(uint64_t seed) { defaultGenerator().manualSeed(seed); }

namespace {
/// One fill of `op` (rand or randn): checked first, so that a bad call
/// leaves the generator as it was; then one draw.
Tensor fill(ir::Op op, const Shape& shape, Generator& generator, Device device, DType dtype) {
  const std::string_view name = ir::opName(op);
  for (int64_t d : shape) KILN_CHECK(d >= 0, "{}: negative dimension in shape {}", name, ir::shapeStr(shape));
  KILN_CHECK(isFloatingPoint(dtype), "{}: expected a floating-point dtype (f32, f64, f16, bf16), got {}", name,
             dtypeName(dtype));
  // Made eagerly inside kiln::compile too: the values are the program's
  // constant input, as a weight initialized in the function would be.
  detail::EagerScope eager;
  // Replayed in a checkpoint's recomputation (Note [Replayed draws]).
  const detail::Draw d = detail::draw(name, device, [&] {
    const auto seed = static_cast<int64_t>(generator.seed());
    const auto offset = static_cast<int64_t>(generator.advance());
    return detail::Draw{fromVector(std::vector<int64_t>{seed}, Shape{}, device),
                        fromVector(std::vector<int64_t>{offset}, Shape{}, device)};
  });
  return detail::dispatch(op, {d[0], d[1]}, {{"shape", shape}, {"dtype", dtype}});
}
}  // namespace

Tensor randn(const Shape& shape, Generator& generator, Device device, DType dtype) {
  return fill(ir::Op::randn, shape, generator, device, dtype);
}
Tensor randn(const Shape& shape, DType dtype, Generator& generator, Device device) {
  return fill(ir::Op::randn, shape, generator, device, dtype);
}
Tensor rand(const Shape& shape, Generator& generator, Device device, DType dtype) {
  return fill(ir::Op::rand, shape, generator, device, dtype);
}
Tensor rand(const Shape& shape, DType dtype, Generator& generator, Device device) {
  return fill(ir::Op::rand, shape, generator, device, dtype);
}

}  // namespace kiln

// The float builder for ir/scalar_formulas.h. Built with -ffp-contract=off so
// that no multiply-add is fused behind the formulas' back.
#include "ir/scalar_eval.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "ir/scalar_formulas.h"

namespace kiln::ir {

namespace {
struct FloatBuilder {
  using V = float;
  using M = bool;
  V c(double v) { return static_cast<float>(v); }
  V add(V a, V b) { return a + b; }
  V sub(V a, V b) { return a - b; }
  V mul(V a, V b) { return a * b; }
  V div(V a, V b) { return a / b; }
  V neg(V a) { return -a; }
  V sqrt(V a) { return std::sqrt(a); }
  V rint(V a) { return std::nearbyint(a); }  // the default rounding mode: half to even
  M lt(V a, V b) { return a < b; }
  M gt(V a, V b) { return a > b; }
  M le(V a, V b) { return a <= b; }
  M isNan(V a) { return a != a; }
  M orM(M a, M b) { return a || b; }
  V select(M m, V a, V b) { return m ? a : b; }
  V pow2(V n) { return std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23); }
  V mantissa(V x) { return std::bit_cast<float>((std::bit_cast<uint32_t>(x) & 0x807fffffu) | 0x3f000000u); }
  V exponent(V x) { return static_cast<float>(static_cast<int32_t>((std::bit_cast<uint32_t>(x) >> 23) & 0xff) - 126); }
};
}  // namespace

float evalScalarF32(Op op, std::span<const float> inputs, const Attributes& attrs) {
  FloatBuilder b;
  return formulas::emitScalar(b, op, inputs, attrs);
}

}  // namespace kiln::ir

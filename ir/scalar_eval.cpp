// The C++ builder for ir/scalar_formulas.h. Built with -ffp-contract=off so
// that no multiply-add is fused behind the formulas' back. Values carry
// their compute dtype (f32, f64, i32, i64, bool); f32 arithmetic is done in
// float and stored in a double, which holds every float exactly.
#include "ir/scalar_eval.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ir/scalar_formulas.h"
#include "runtime/numeric.h"

namespace kiln::ir {

namespace {
using formulas::computeDType;

int64_t wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

struct CppBuilder {
  using V = ScalarValue;
  using M = bool;
  DType dtype = DType::f32;

  static V fl(DType t, double v) { return {t, t == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v, 0}; }
  static V in(DType t, int64_t v) { return {t, 0, t == DType::i32 ? wrap32(v) : t == DType::boolean ? (v != 0) : v}; }
  static bool isFloat(const V& a) { return a.dtype == DType::f32 || a.dtype == DType::f64; }
  static float f32(const V& a) { return static_cast<float>(a.f); }

  V c(double v) { return constant(v, dtype); }
  V constant(double v, DType t) {
    switch (t) {
      case DType::f32:
      case DType::f64: return fl(t, v);
      case DType::i32:
      case DType::i64: return in(t, floatToIntSaturating(v, t));
      case DType::boolean: return in(t, v != 0);
      case DType::f16:
      case DType::bf16: break;
    }
    KILN_ASSERT(false, "constant of {}, which is not a compute dtype", dtypeName(t));
    return {};
  }
  V intConstant(int64_t v, DType t) { return in(t, v); }
  // Integer arithmetic in uint64_t, which wraps; in() wraps i32 to 32 bits.
  static uint64_t u(const V& a) { return static_cast<uint64_t>(a.i); }
  V add(V a, V b) {
    if (a.dtype == DType::f32) return fl(a.dtype, f32(a) + f32(b));
    if (a.dtype == DType::f64) return fl(a.dtype, a.f + b.f);
    return in(a.dtype, static_cast<int64_t>(u(a) + u(b)));
  }
  V sub(V a, V b) {
    if (a.dtype == DType::f32) return fl(a.dtype, f32(a) - f32(b));
    if (a.dtype == DType::f64) return fl(a.dtype, a.f - b.f);
    return in(a.dtype, static_cast<int64_t>(u(a) - u(b)));
  }
  V mul(V a, V b) {
    if (a.dtype == DType::f32) return fl(a.dtype, f32(a) * f32(b));
    if (a.dtype == DType::f64) return fl(a.dtype, a.f * b.f);
    return in(a.dtype, static_cast<int64_t>(u(a) * u(b)));
  }
  V div(V a, V b) { return a.dtype == DType::f32 ? fl(a.dtype, f32(a) / f32(b)) : fl(a.dtype, a.f / b.f); }
  V neg(V a) {
    if (a.dtype == DType::f32) return fl(a.dtype, -f32(a));
    if (a.dtype == DType::f64) return fl(a.dtype, -a.f);
    return in(a.dtype, static_cast<int64_t>(0 - u(a)));
  }
  V sqrt(V a) { return a.dtype == DType::f32 ? fl(a.dtype, std::sqrt(f32(a))) : fl(a.dtype, std::sqrt(a.f)); }
  // The default rounding mode: half to even.
  V rint(V a) { return a.dtype == DType::f32 ? fl(a.dtype, std::nearbyint(f32(a))) : fl(a.dtype, std::nearbyint(a.f)); }
  // Floats compare as doubles (exact for f32), ordered except !=; integers
  // and bool compare their i.
  M lt(V a, V b) { return isFloat(a) ? a.f < b.f : a.i < b.i; }
  M gt(V a, V b) { return isFloat(a) ? a.f > b.f : a.i > b.i; }
  M le(V a, V b) { return isFloat(a) ? a.f <= b.f : a.i <= b.i; }
  M ge(V a, V b) { return isFloat(a) ? a.f >= b.f : a.i >= b.i; }
  M eq(V a, V b) { return isFloat(a) ? a.f == b.f : a.i == b.i; }
  M ne(V a, V b) { return isFloat(a) ? a.f != b.f : a.i != b.i; }
  M isNan(V a) { return isFloat(a) && a.f != a.f; }
  M orM(M a, M b) { return a || b; }
  M andM(M a, M b) { return a && b; }
  M notM(M a) { return !a; }
  V select(M m, V a, V b) { return m ? a : b; }
  // A NaN n (only in lanes the formulas select away) is taken as 0, which
  // keeps the conversion defined in C++.
  V pow2(V n) {
    const double k = n.f == n.f ? n.f : 0.0;
    if (n.dtype == DType::f32)
      return fl(n.dtype, std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23));
    return fl(n.dtype, std::bit_cast<double>(static_cast<uint64_t>(static_cast<int64_t>(k) + 1023) << 52));
  }
  V mantissa(V x) {
    if (x.dtype == DType::f32)
      return fl(x.dtype, std::bit_cast<float>((std::bit_cast<uint32_t>(f32(x)) & 0x807fffffu) | 0x3f000000u));
    return fl(x.dtype,
              std::bit_cast<double>((std::bit_cast<uint64_t>(x.f) & 0x800fffffffffffffull) | 0x3fe0000000000000ull));
  }
  V exponent(V x) {
    if (x.dtype == DType::f32)
      return fl(x.dtype, static_cast<int32_t>((std::bit_cast<uint32_t>(f32(x)) >> 23) & 0xff) - 126);
    return fl(x.dtype, static_cast<int64_t>((std::bit_cast<uint64_t>(x.f) >> 52) & 0x7ff) - 1022);
  }
  V bitcast(V x, DType t) {
    switch (t) {
      case DType::i32: return in(t, static_cast<int32_t>(std::bit_cast<uint32_t>(f32(x))));
      case DType::f32: return fl(t, std::bit_cast<float>(static_cast<uint32_t>(u(x))));
      case DType::i64: return in(t, std::bit_cast<int64_t>(x.f));
      case DType::f64: return fl(t, std::bit_cast<double>(x.i));
      case DType::f16:
      case DType::bf16:
      case DType::boolean: break;
    }
    KILN_ASSERT(false, "bitcast to {}", dtypeName(t));
    return x;
  }
  V band(V a, V b) { return in(a.dtype, a.i & b.i); }
  V bor(V a, V b) { return in(a.dtype, a.i | b.i); }
  V bxor(V a, V b) { return in(a.dtype, a.i ^ b.i); }
  V shl(V a, int n) { return in(a.dtype, static_cast<int64_t>(u(a) << n)); }
  V lshr(V a, int n) {
    const uint64_t bits = a.dtype == DType::i32 ? (u(a) & 0xffffffffu) : u(a);
    return in(a.dtype, static_cast<int64_t>(bits >> n));
  }
  V convert(V x, DType t) {
    if (x.dtype == t) return x;
    if (isFloat(x)) {
      switch (t) {
        case DType::f32:
        case DType::f64: return fl(t, x.f);  // f64 -> f32 rounds to nearest even in fl()
        case DType::i32:
        case DType::i64: return in(t, floatToIntSaturating(x.f, t));
        case DType::boolean: return in(t, x.f != 0);  // NaN != 0
        case DType::f16:
        case DType::bf16: break;
      }
    } else {
      switch (t) {
        case DType::f32: return fl(t, static_cast<float>(x.i));  // one rounding, from the integer
        case DType::f64: return fl(t, static_cast<double>(x.i));
        case DType::i32:
        case DType::i64:
        case DType::boolean: return in(t, x.i);
        case DType::f16:
        case DType::bf16: break;
      }
    }
    KILN_ASSERT(false, "convert from {} to {}", dtypeName(x.dtype), dtypeName(t));
    return x;
  }
  V fromM(M m) { return in(DType::boolean, m); }
  M toM(V v) { return v.i != 0; }
};

/// The register form of `v`: its compute dtype, floats rounded to its dtype.
ScalarValue toCompute(const ScalarValue& v) {
  if (isFloatingPoint(v.dtype)) return {computeDType(v.dtype), roundToDType(v.f, v.dtype), 0};
  return CppBuilder::in(v.dtype, v.i);
}

ScalarValue run(Op op, std::span<const ScalarValue> inputs, DType outType, const Attributes& attrs) {
  std::vector<DType> types;
  std::vector<ScalarValue> values;
  for (const ScalarValue& v : inputs) {
    types.push_back(v.dtype);
    values.push_back(toCompute(v));
  }
  CppBuilder b;
  ScalarValue r =
      formulas::emitScalar(b, op, std::span<const DType>(types), outType, std::span<const ScalarValue>(values), attrs);
  r.dtype = outType;  // f16 and bf16 results are their f32, already rounded
  return r;
}
}  // namespace

ScalarValue ScalarValue::of(DType dtype, double v) {
  if (isFloatingPoint(dtype)) return {dtype, roundToDType(v, dtype), 0};
  return {dtype, 0, dtype == DType::boolean ? (v != 0) : floatToIntSaturating(v, dtype)};
}

ScalarValue ScalarValue::ofInt(DType dtype, int64_t v) {
  switch (dtype) {
    case DType::f32: return {dtype, static_cast<float>(v), 0};
    case DType::f64: return {dtype, static_cast<double>(v), 0};
    case DType::f16:
    case DType::bf16: return {dtype, roundToDType(static_cast<float>(v), dtype), 0};
    case DType::i32:
    case DType::i64:
    case DType::boolean: break;
  }
  return CppBuilder::in(dtype, v);
}

double ScalarValue::toDouble() const { return isFloatingPoint(dtype) ? f : static_cast<double>(i); }

ScalarValue evalScalar(Op op, std::span<const ScalarValue> inputs, const Attributes& attrs) {
  if (op == Op::constant) return run(op, inputs, DType::f32, attrs);
  std::span<const ScalarValue> operands = inputs;
  if (usesElementIndex(op)) {
    const int arity = opInfo(op).arity;
    KILN_CHECK(static_cast<int>(inputs.size()) == arity + 1 && inputs.back().dtype == DType::i64,
               "{}: expected {} inputs and the element's index (i64), got {} values", opName(op), arity, inputs.size());
    operands = inputs.first(inputs.size() - 1);
  }
  std::vector<TensorType> types;
  for (const ScalarValue& v : operands) types.push_back({v.dtype, {}, Device::cpu()});
  return run(op, inputs, inferType(op, types, attrs).dtype, attrs);
}

double evalScalar(Op op, DType dtype, std::span<const double> inputs, const Attributes& attrs) {
  std::vector<ScalarValue> values;
  for (size_t k = 0; k < inputs.size(); ++k)
    values.push_back(ScalarValue::of(op == Op::where && k == 0 ? DType::boolean
                                     : usesElementIndex(op) && k + 3 >= inputs.size()
                                         ? DType::i64  // a draw's seed, offset and index
                                         : dtype,
                                     inputs[k]));
  if (op == Op::constant) return run(op, values, dtype, attrs).toDouble();
  return evalScalar(op, values, attrs).toDouble();
}

float evalScalarF32(Op op, std::span<const float> inputs, const Attributes& attrs) {
  std::vector<ScalarValue> values;
  for (float x : inputs) values.push_back({DType::f32, x, 0});
  // The result dtype comes from the registry's rule (inferType), like evalScalar's.
  return static_cast<float>(evalScalar(op, values, attrs).toDouble());
}

}  // namespace kiln::ir

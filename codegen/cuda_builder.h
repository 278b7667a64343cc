// Internal to the CUDA backend: the builder that instantiates
// ir/scalar_formulas.h as CUDA C text, with the literals and C types it
// writes, shared by the elementwise renderer (codegen/cuda_renderer.cpp)
// and the reduction renderer (codegen/cuda_reduction.cpp), so that both
// spell every op the same way.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "ir/scalar_formulas.h"
#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::codegen::cudacg {

/// `f` as a CUDA C expression of exactly its bits. Finite values are hex float
/// literals, which every compiler reads exactly (a decimal literal relies on
/// correctly rounded parsing); inf and NaN have no literal without
/// <math.h>, so they are spelled as bit patterns.
inline std::string floatLiteral(float f) {
  if (!std::isfinite(f)) return fmt::format("__uint_as_float(0x{:08x}u)", std::bit_cast<uint32_t>(f));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  // A negative literal is parenthesized so that `-` in front of it is never `--`.
  return std::signbit(f) ? fmt::format("({}f)", buf) : fmt::format("{}f", buf);
}

inline std::string doubleLiteral(double d) {
  if (!std::isfinite(d)) return fmt::format("__longlong_as_double(0x{:016x}ll)", std::bit_cast<uint64_t>(d));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", d);
  return std::signbit(d) ? fmt::format("({})", buf) : std::string(buf);
}

/// Integer literals of exactly their type; negative ones are spelled through
/// unsigned so that no literal overflows.
inline std::string intLiteral(int64_t v, DType t) {
  if (t == DType::i32) return v < 0 ? fmt::format("(int)0x{:08x}u", static_cast<uint32_t>(v)) : fmt::format("{}", v);
  return v < 0 ? fmt::format("(long long)0x{:016x}ull", static_cast<uint64_t>(v)) : fmt::format("{}ll", v);
}

/// The C type a value of compute dtype `t` is held in.
inline const char* cType(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return "int";
    case DType::i64: return "long long";
    case DType::boolean: return "bool";
    case DType::f16:
    case DType::bf16: break;
  }
  KILN_ASSERT(false, "{} is not a compute dtype", dtypeName(t));
  return "";
}

/// The C type an element of `dtype` has in memory: f16 and bf16 are their
/// bits, bool a byte holding 0 or 1.
inline const char* storageCType(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return "unsigned short";
    case DType::boolean: return "unsigned char";
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64: return cType(t);
  }
  return "";
}

/// A value of the CUDA builder: the name of a `const` local and its compute dtype.
struct CudaValue {
  std::string name;
  DType dtype;
};

/// The builder B of ir/scalar_formulas.h for CUDA C. Values are the names of
/// `const` locals; since the body is straight-line code, a local defined once
/// is visible to every later line, which lets constants be shared. Integer
/// arithmetic goes through the unsigned type of the same width, which wraps
/// (signed overflow would be undefined), and converts back.
struct CudaBuilder {
  using V = CudaValue;
  using M = std::string;

  explicit CudaBuilder(std::string& text) : out(text) {}

  std::string& out;
  std::string indent = "    ";  ///< what each line starts with
  DType dtype = DType::f32;
  int nextValue = 0;
  int nextPredicate = 0;
  std::map<std::pair<DType, uint64_t>, V> constants;  // by bits: +0 and -0 stay apart

  V def(const std::string& expr, DType t, const std::string& comment = {}) {
    V v{fmt::format("v{}", nextValue++), t};
    out += fmt::format("{}const {} {} = {};{}\n", indent, cType(t), v.name, expr,
                       comment.empty() ? "" : "  // " + comment);
    return v;
  }
  M defM(const std::string& expr) {
    M name = fmt::format("m{}", nextPredicate++);
    out += fmt::format("{}const bool {} = {};\n", indent, name, expr);
    return name;
  }
  static bool isFloat(const V& a) { return a.dtype == DType::f32 || a.dtype == DType::f64; }
  static const char* unsignedType(const V& a) { return a.dtype == DType::i32 ? "unsigned" : "unsigned long long"; }
  /// `a op b` for integers, in the unsigned type of their width.
  V wrapping(const V& a, const char* op, const V& b) {
    const char* u = unsignedType(a);
    return def(fmt::format("({})(({}){} {} ({}){})", cType(a.dtype), u, a.name, op, u, b.name), a.dtype);
  }

  V c(double value) { return constant(value, dtype); }
  // f32 constants are doubles rounded to f32, as the C++ evaluator
  // (ir/scalar_eval.cpp) rounds them; integers saturate as there.
  V constant(double value, DType t) {
    std::string text, comment;
    uint64_t bits = 0;
    switch (t) {
      case DType::f32: {
        const float f = static_cast<float>(value);
        bits = std::bit_cast<uint32_t>(f);
        text = floatLiteral(f);
        comment = fmt::format("{}", f);
        break;
      }
      case DType::f64:
        bits = std::bit_cast<uint64_t>(value);
        text = doubleLiteral(value);
        comment = fmt::format("{}", value);
        break;
      case DType::i32:
      case DType::i64: {
        const int64_t v = floatToIntSaturating(value, t);
        bits = static_cast<uint64_t>(v);
        text = intLiteral(v, t);
        break;
      }
      case DType::boolean:
        bits = value != 0;
        text = bits ? "true" : "false";
        break;
      case DType::f16:
      case DType::bf16: KILN_ASSERT(false, "constant of {}, which is not a compute dtype", dtypeName(t));
    }
    auto it = constants.find({t, bits});
    if (it != constants.end()) return it->second;
    V v = def(text, t, comment);
    constants.emplace(std::make_pair(t, bits), v);
    return v;
  }
  // Plain C operators on floats: NVRTC runs with --fmad=false, so none is contracted.
  V add(const V& a, const V& b) { return isFloat(a) ? def(a.name + " + " + b.name, a.dtype) : wrapping(a, "+", b); }
  V sub(const V& a, const V& b) { return isFloat(a) ? def(a.name + " - " + b.name, a.dtype) : wrapping(a, "-", b); }
  V mul(const V& a, const V& b) { return isFloat(a) ? def(a.name + " * " + b.name, a.dtype) : wrapping(a, "*", b); }
  V div(const V& a, const V& b) { return def(a.name + " / " + b.name, a.dtype); }
  V neg(const V& a) {
    if (isFloat(a)) return def("-" + a.name, a.dtype);
    return def(fmt::format("({})(0 - ({}){})", cType(a.dtype), unsignedType(a), a.name), a.dtype);
  }
  // Correctly rounded (f32 with -prec-sqrt=true; f64 always), like std::sqrt.
  V sqrt(const V& a) { return def((a.dtype == DType::f32 ? "sqrtf(" : "sqrt(") + a.name + ")", a.dtype); }
  // cvt.rni: round half to even, like std::nearbyint in the default mode.
  V rint(const V& a) { return def((a.dtype == DType::f32 ? "rintf(" : "rint(") + a.name + ")", a.dtype); }
  // C compares: ordered for floats except !=, signed for int and long long,
  // false < true for bool.
  M lt(const V& a, const V& b) { return defM(a.name + " < " + b.name); }
  M gt(const V& a, const V& b) { return defM(a.name + " > " + b.name); }
  M le(const V& a, const V& b) { return defM(a.name + " <= " + b.name); }
  M ge(const V& a, const V& b) { return defM(a.name + " >= " + b.name); }
  M eq(const V& a, const V& b) { return defM(a.name + " == " + b.name); }
  M ne(const V& a, const V& b) { return defM(a.name + " != " + b.name); }
  M isNan(const V& a) { return isFloat(a) ? defM(a.name + " != " + a.name) : M("false"); }
  M orM(const M& a, const M& b) { return defM(a + " || " + b); }
  M andM(const M& a, const M& b) { return defM(a + " && " + b); }
  M notM(const M& a) { return defM("!" + a); }
  V select(const M& m, const V& a, const V& b) { return def(m + " ? " + a.name + " : " + b.name, a.dtype); }
  // The same bit tricks as ir/scalar_eval.cpp. The shift is done unsigned so
  // that it is defined whatever n is (a NaN n converts to 0 on the GPU, and
  // its result is selected away by the formulas).
  V pow2(const V& n) {
    if (n.dtype == DType::f64)
      return def("__longlong_as_double((long long)((unsigned long long)((long long)" + n.name + " + 1023) << 52))",
                 n.dtype);
    return def("__uint_as_float((unsigned)((int)" + n.name + " + 127) << 23)", n.dtype);
  }
  V mantissa(const V& x) {
    if (x.dtype == DType::f64)
      return def("__longlong_as_double((__double_as_longlong(" + x.name +
                     ") & (long long)0x800fffffffffffffull) | 0x3fe0000000000000ll)",
                 x.dtype);
    return def("__uint_as_float((__float_as_uint(" + x.name + ") & 0x807fffffu) | 0x3f000000u)", x.dtype);
  }
  V exponent(const V& x) {
    if (x.dtype == DType::f64)
      return def("(double)((int)((__double_as_longlong(" + x.name + ") >> 52) & 0x7ff) - 1022)", x.dtype);
    return def("(float)((int)((__float_as_uint(" + x.name + ") >> 23) & 0xffu) - 126)", x.dtype);
  }
  V bitcast(const V& x, DType t) {
    switch (t) {
      case DType::i32: return def("__float_as_int(" + x.name + ")", t);
      case DType::f32: return def("__int_as_float(" + x.name + ")", t);
      case DType::i64: return def("__double_as_longlong(" + x.name + ")", t);
      case DType::f64: return def("__longlong_as_double(" + x.name + ")", t);
      case DType::f16:
      case DType::bf16:
      case DType::boolean: break;
    }
    KILN_ASSERT(false, "bitcast to {}", dtypeName(t));
    return x;
  }
  V band(const V& a, const V& b) { return def(a.name + " & " + b.name, a.dtype); }
  V bor(const V& a, const V& b) { return def(a.name + " | " + b.name, a.dtype); }
  V bxor(const V& a, const V& b) { return def(a.name + " ^ " + b.name, a.dtype); }
  V shl(const V& a, int n) {
    return def(fmt::format("({})(({}){} << {})", cType(a.dtype), unsignedType(a), a.name, n), a.dtype);
  }
  V lshr(const V& a, int n) {
    return def(fmt::format("({})(({}){} >> {})", cType(a.dtype), unsignedType(a), a.name, n), a.dtype);
  }
  V convert(const V& x, DType t) {
    if (x.dtype == t) return x;
    if (t == DType::boolean) return def(x.name + (isFloat(x) ? " != 0.0" : " != 0"), t);  // NaN != 0
    if (isFloat(x) && (t == DType::i32 || t == DType::i64)) {
      // Truncate toward zero, saturate, NaN -> 0: a C cast alone is
      // undefined out of range. 2^31 and 2^63 are exact in f32 and f64.
      const std::string limit = std::string(t == DType::i32 ? "0x1p31" : "0x1p63") + (x.dtype == DType::f32 ? "f" : "");
      const std::string max = intLiteral(t == DType::i32 ? INT32_MAX : INT64_MAX, t);
      const std::string min = intLiteral(t == DType::i32 ? INT32_MIN : INT64_MIN, t);
      return def(fmt::format("{0} != {0} ? {1} : {0} >= {2} ? {3} : {0} <= -{2} ? {4} : ({5}){0}", x.name,
                             intLiteral(0, t), limit, max, min, cType(t)),
                 t);
    }
    // The rest are C conversions with the semantics of `cast`: int -> float
    // and f64 -> f32 round to nearest even (cvt.rn), f32 -> f64 and
    // bool -> number are exact, i64 -> i32 keeps the low bits.
    return def(fmt::format("({}){}", cType(t), x.name), t);
  }
  V fromM(const M& m) { return def(m, DType::boolean); }
  M toM(const V& v) { return v.name; }
};

/// Instruction `at` of `kernel`, a load of `element` (a C lvalue), in
/// compute form (ir::formulas::loadValue): f16 and bf16 bits widen to f32.
inline CudaValue emitLoad(CudaBuilder& b, const Kernel& kernel, size_t at, const std::string& element) {
  const ScalarInstr& instr = kernel.body[at];
  const DType d = instr.dtype;
  b.out += fmt::format("{}// %{} = load p{} : {}\n", b.indent, at, instr.param, dtypeName(d));
  CudaValue raw = d == DType::f16 || d == DType::bf16 ? b.def("(int)" + element, DType::i32)
                  : d == DType::boolean               ? b.def(element + " != 0", DType::boolean)
                                                      : b.def(element, d);
  return ir::formulas::loadValue(b, raw, d);
}

/// Instruction `at` of `kernel`, an op on `values`.
inline CudaValue emitOp(CudaBuilder& b, const Kernel& kernel, size_t at, const std::vector<CudaValue>& values) {
  const ScalarInstr& instr = kernel.body[at];
  std::vector<CudaValue> in;
  std::vector<DType> types;
  std::string listing;
  for (int index : instr.operands) {
    in.push_back(values[static_cast<size_t>(index)]);
    types.push_back(kernel.body[static_cast<size_t>(index)].dtype);
    listing += fmt::format("{}%{}", listing.empty() ? "" : ", ", index);
  }
  b.out += fmt::format("{}// %{} = {}({}) : {}\n", b.indent, at, ir::opName(instr.op), listing, dtypeName(instr.dtype));
  return ir::formulas::emitScalar(b, instr.op, std::span<const DType>(types), instr.dtype,
                                  std::span<const CudaValue>(in), instr.attrs);
}

/// Instruction `at` of `kernel`, a store of `v` into `element`, as a
/// statement (without indent) after the conversion lines it needs.
inline std::string emitStore(CudaBuilder& b, const Kernel& kernel, size_t at, const std::string& element,
                             const CudaValue& value) {
  const ScalarInstr& instr = kernel.body[at];
  const DType d = kernel.params[static_cast<size_t>(instr.param)].dtype;
  const CudaValue v = ir::formulas::storeValue(b, value, d);
  return fmt::format("{} = {}{};  // %{}", element,
                     d == DType::f16 || d == DType::bf16 ? "(unsigned short)"
                     : d == DType::boolean               ? "(unsigned char)"
                                                         : "",
                     v.name, at);
}

/// The CUDA C source of reduction kernel `kernel` (codegen/cuda_reduction.cpp).
std::string renderReduction(const Kernel& kernel);

}  // namespace kiln::codegen::cudacg

// Internal to the C-family GPU renderer: the builder that instantiates
// ir/scalar_formulas.h as C text in a dialect (codegen/c_dialect.h), with the
// literals and C types it writes, shared by the elementwise renderer
// (codegen/c_renderer.cpp) and the reduction renderer
// (codegen/c_reduction.cpp), so that both spell every op the same way in
// every dialect.
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

#include "codegen/c_dialect.h"
#include "codegen/kernel.h"
#include "ir/scalar_formulas.h"
#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::codegen::ccg {

/// `f` as a C expression of exactly its bits. Finite values are hex float
/// literals, which every compiler reads exactly (a decimal literal relies on
/// correctly rounded parsing); inf and NaN have no literal without
/// <math.h>, so they are spelled as bit patterns.
inline std::string floatLiteral(float f, const CDialect& d) {
  if (!std::isfinite(f)) return d.bitcast(CBits::u32, CBits::f32, fmt::format("0x{:08x}u", std::bit_cast<uint32_t>(f)));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  // A negative literal is parenthesized so that `-` in front of it is never `--`.
  return std::signbit(f) ? fmt::format("({}f)", buf) : fmt::format("{}f", buf);
}

inline std::string doubleLiteral(double v, const CDialect& d) {
  if (!std::isfinite(v))
    return d.bitcast(CBits::i64, CBits::f64, fmt::format("0x{:016x}{}", std::bit_cast<uint64_t>(v), d.i64Suffix()));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return std::signbit(v) ? fmt::format("({})", buf) : std::string(buf);
}

/// Integer literals of exactly their type; negative ones are spelled through
/// unsigned so that no literal overflows.
inline std::string intLiteral(int64_t v, DType t, const CDialect& d) {
  if (t == DType::i32) return v < 0 ? fmt::format("(int)0x{:08x}u", static_cast<uint32_t>(v)) : fmt::format("{}", v);
  return v < 0 ? fmt::format("({})0x{:016x}{}", d.i64(), static_cast<uint64_t>(v), d.u64Suffix())
               : fmt::format("{}{}", v, d.i64Suffix());
}

/// The C type a value of compute dtype `t` is held in.
inline std::string cType(DType t, const CDialect& d) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return "int";
    case DType::i64: return d.i64();
    case DType::boolean: return "bool";
    case DType::f16:
    case DType::bf16: break;
  }
  KILN_ASSERT(false, "{} is not a compute dtype", dtypeName(t));
  return "";
}

/// The C type an element of `dtype` has in memory: f16 and bf16 are their
/// bits, bool a byte holding 0 or 1.
inline std::string storageCType(DType t, const CDialect& d) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return d.u16();
    case DType::boolean: return d.u8();
    case DType::f32:
    case DType::f64:
    case DType::i32:
    case DType::i64: return cType(t, d);
  }
  return "";
}

/// A value of the C builder: the name of a `const` local and its compute dtype.
struct CValue {
  std::string name;
  DType dtype;
};

/// The builder B of ir/scalar_formulas.h for C. Values are the names of
/// `const` locals; since the body is straight-line code, a local defined once
/// is visible to every later line, which lets constants be shared. Integer
/// arithmetic goes through the unsigned type of the same width, which wraps
/// (signed overflow would be undefined), and converts back.
struct CBuilder {
  using V = CValue;
  using M = std::string;

  CBuilder(std::string& text, const CDialect& dialect) : out(text), d(dialect) {}

  std::string& out;
  const CDialect& d;
  std::string indent = "    ";  ///< what each line starts with
  DType dtype = DType::f32;
  int nextValue = 0;
  int nextPredicate = 0;
  std::map<std::pair<DType, uint64_t>, V> constants;  // by bits: +0 and -0 stay apart

  V def(const std::string& expr, DType t, const std::string& comment = {}) {
    V v{fmt::format("v{}", nextValue++), t};
    out += fmt::format("{}const {} {} = {};{}\n", indent, cType(t, d), v.name, expr,
                       comment.empty() ? "" : "  // " + comment);
    return v;
  }
  M defM(const std::string& expr) {
    M name = fmt::format("m{}", nextPredicate++);
    out += fmt::format("{}const bool {} = {};\n", indent, name, expr);
    return name;
  }
  static bool isFloat(const V& a) { return a.dtype == DType::f32 || a.dtype == DType::f64; }
  const char* unsignedType(const V& a) const { return a.dtype == DType::i32 ? d.u32() : d.u64(); }
  /// `a op b` for integers, in the unsigned type of their width.
  V wrapping(const V& a, const char* op, const V& b) {
    const char* u = unsignedType(a);
    return def(fmt::format("({})(({}){} {} ({}){})", cType(a.dtype, d), u, a.name, op, u, b.name), a.dtype);
  }

  V c(double value) { return constant(value, dtype); }
  // The one place constants are spelled (with intConstant below). f32
  // constants are doubles rounded to f32, as the C++ evaluator
  // (ir/scalar_eval.cpp) rounds them; integers saturate as there.
  V constant(double value, DType t) {
    std::string text, comment;
    uint64_t bits = 0;
    switch (t) {
      case DType::f32: {
        const float f = static_cast<float>(value);
        bits = std::bit_cast<uint32_t>(f);
        text = floatLiteral(f, d);
        comment = fmt::format("{}", f);
        break;
      }
      case DType::f64:
        bits = std::bit_cast<uint64_t>(value);
        text = doubleLiteral(value, d);
        comment = fmt::format("{}", value);
        break;
      case DType::i32:
      case DType::i64: return intConstant(floatToIntSaturating(value, t), t);
      case DType::boolean: return intConstant(value != 0, t);
      case DType::f16:
      case DType::bf16: KILN_ASSERT(false, "constant of {}, which is not a compute dtype", dtypeName(t));
    }
    return shared(t, bits, text, comment);
  }
  // Integers as exact literals, never through a double (Note [Integer
  // constants are exact]).
  V intConstant(int64_t v, DType t) {
    if (t == DType::boolean) return shared(t, v != 0, v != 0 ? "true" : "false", {});
    return shared(t, static_cast<uint64_t>(v), intLiteral(v, t, d), {});
  }
  /// The local holding constant `text` of dtype t with these bits, defined
  /// once per kernel.
  V shared(DType t, uint64_t bits, const std::string& text, const std::string& comment) {
    auto it = constants.find({t, bits});
    if (it != constants.end()) return it->second;
    V v = def(text, t, comment);
    constants.emplace(std::make_pair(t, bits), v);
    return v;
  }
  // Plain C operators on floats: no dialect contracts them (NVRTC runs with
  // --fmad=false, OpenCL kernels say FP_CONTRACT OFF).
  V add(const V& a, const V& b) { return isFloat(a) ? def(a.name + " + " + b.name, a.dtype) : wrapping(a, "+", b); }
  V sub(const V& a, const V& b) { return isFloat(a) ? def(a.name + " - " + b.name, a.dtype) : wrapping(a, "-", b); }
  V mul(const V& a, const V& b) { return isFloat(a) ? def(a.name + " * " + b.name, a.dtype) : wrapping(a, "*", b); }
  V div(const V& a, const V& b) { return def(a.name + " / " + b.name, a.dtype); }
  V neg(const V& a) {
    if (isFloat(a)) return def("-" + a.name, a.dtype);
    return def(fmt::format("({})(0 - ({}){})", cType(a.dtype, d), unsignedType(a), a.name), a.dtype);
  }
  // Correctly rounded (CUDA: f32 with -prec-sqrt=true; OpenCL: with
  // -cl-fp32-correctly-rounded-divide-sqrt; f64 always), like std::sqrt.
  V sqrt(const V& a) { return def(d.sqrt(a.dtype, a.name), a.dtype); }
  // Round half to even, like std::nearbyint in the default mode.
  V rint(const V& a) { return def(d.rint(a.dtype, a.name), a.dtype); }
  // C compares: ordered for floats except !=, signed for int and 64-bit
  // ints, false < true for bool.
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
      return def(d.bitcast(CBits::i64, CBits::f64,
                           fmt::format("({0})(({1})(({0}){2} + 1023) << 52)", d.i64(), d.u64(), n.name)),
                 n.dtype);
    return def(d.bitcast(CBits::u32, CBits::f32, fmt::format("({})((int){} + 127) << 23", d.u32(), n.name)), n.dtype);
  }
  V mantissa(const V& x) {
    if (x.dtype == DType::f64)
      return def(
          d.bitcast(CBits::i64, CBits::f64,
                    fmt::format("({} & ({})0x800fffffffffffff{}) | 0x3fe0000000000000{}",
                                d.bitcast(CBits::f64, CBits::i64, x.name), d.i64(), d.u64Suffix(), d.i64Suffix())),
          x.dtype);
    return def(d.bitcast(CBits::u32, CBits::f32,
                         fmt::format("({} & 0x807fffffu) | 0x3f000000u", d.bitcast(CBits::f32, CBits::u32, x.name))),
               x.dtype);
  }
  V exponent(const V& x) {
    if (x.dtype == DType::f64)
      return def(fmt::format("(double)((int)(({} >> 52) & 0x7ff) - 1022)", d.bitcast(CBits::f64, CBits::i64, x.name)),
                 x.dtype);
    return def(fmt::format("(float)((int)(({} >> 23) & 0xffu) - 126)", d.bitcast(CBits::f32, CBits::u32, x.name)),
               x.dtype);
  }
  V bitcast(const V& x, DType t) {
    switch (t) {
      case DType::i32: return def(d.bitcast(CBits::f32, CBits::i32, x.name), t);
      case DType::f32: return def(d.bitcast(CBits::i32, CBits::f32, x.name), t);
      case DType::i64: return def(d.bitcast(CBits::f64, CBits::i64, x.name), t);
      case DType::f64: return def(d.bitcast(CBits::i64, CBits::f64, x.name), t);
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
    return def(fmt::format("({})(({}){} << {})", cType(a.dtype, d), unsignedType(a), a.name, n), a.dtype);
  }
  V lshr(const V& a, int n) {
    return def(fmt::format("({})(({}){} >> {})", cType(a.dtype, d), unsignedType(a), a.name, n), a.dtype);
  }
  V convert(const V& x, DType t) {
    if (x.dtype == t) return x;
    if (t == DType::boolean)  // NaN != 0
      return def(x.name + (x.dtype == DType::f32 ? " != 0.0f" : x.dtype == DType::f64 ? " != 0.0" : " != 0"), t);
    if (isFloat(x) && (t == DType::i32 || t == DType::i64)) return saturatingToInt(x, t);
    // The rest are C conversions with the semantics of `cast`: int -> float
    // and f64 -> f32 round to nearest even (cvt.rn; OpenCL's default for
    // conversions to floating point), f32 -> f64 and bool -> number are
    // exact, i64 -> i32 keeps the low bits.
    return def(fmt::format("({}){}", cType(t, d), x.name), t);
  }
  /// Truncate toward zero, saturate, NaN -> 0: a C cast alone is undefined
  /// out of range. 2^31 and 2^63 are exact in f32 and f64.
  V saturatingToInt(const V& x, DType t) {
    const std::string limit = std::string(t == DType::i32 ? "0x1p31" : "0x1p63") + (x.dtype == DType::f32 ? "f" : "");
    const std::string max = intLiteral(t == DType::i32 ? INT32_MAX : INT64_MAX, t, d);
    const std::string min = intLiteral(t == DType::i32 ? INT32_MIN : INT64_MIN, t, d);
    return def(fmt::format("{0} != {0} ? {1} : {0} >= {2} ? {3} : {0} <= -{2} ? {4} : ({5}){0}", x.name,
                           intLiteral(0, t, d), limit, max, min, cType(t, d)),
               t);
  }
  V fromM(const M& m) { return def(m, DType::boolean); }
  M toM(const V& v) { return v.name; }
};

/// Instruction `at` of `kernel`, a load of `element` (a C lvalue), in
/// compute form (ir::formulas::loadValue): f16 and bf16 bits widen to f32.
inline CValue emitLoad(CBuilder& b, const Kernel& kernel, size_t at, const std::string& element) {
  const ScalarInstr& instr = kernel.body[at];
  const DType d = instr.dtype;
  b.out += fmt::format("{}// %{} = load p{} : {}\n", b.indent, at, instr.param, dtypeName(d));
  CValue raw = d == DType::f16 || d == DType::bf16 ? b.def("(int)" + element, DType::i32)
               : d == DType::boolean               ? b.def(element + " != 0", DType::boolean)
                                                   : b.def(element, d);
  return ir::formulas::loadValue(b, raw, d);
}

/// Instruction `at` of `kernel`, an op on `values`.
inline CValue emitOp(CBuilder& b, const Kernel& kernel, size_t at, const std::vector<CValue>& values) {
  const ScalarInstr& instr = kernel.body[at];
  std::vector<CValue> in;
  std::vector<DType> types;
  std::string listing;
  for (int index : instr.operands) {
    in.push_back(values[static_cast<size_t>(index)]);
    types.push_back(kernel.body[static_cast<size_t>(index)].dtype);
    listing += fmt::format("{}%{}", listing.empty() ? "" : ", ", index);
  }
  b.out += fmt::format("{}// %{} = {}({}) : {}\n", b.indent, at, ir::opName(instr.op), listing, dtypeName(instr.dtype));
  return ir::formulas::emitScalar(b, instr.op, std::span<const DType>(types), instr.dtype, std::span<const CValue>(in),
                                  instr.attrs);
}

/// Instruction `at` of `kernel`, a store of `v` into `element`, as a
/// statement (without indent) after the conversion lines it needs.
inline std::string emitStore(CBuilder& b, const Kernel& kernel, size_t at, const std::string& element,
                             const CValue& value) {
  const ScalarInstr& instr = kernel.body[at];
  const DType d = kernel.params[static_cast<size_t>(instr.param)].dtype;
  const CValue v = ir::formulas::storeValue(b, value, d);
  const bool narrow = d == DType::f16 || d == DType::bf16 || d == DType::boolean;
  return fmt::format("{} = {}{};  // %{}", element, narrow ? "(" + storageCType(d, b.d) + ")" : "", v.name, at);
}

/// The declaration of kernel `kernel`'s args struct, `KilnArgs_<name>`
/// (codegen/kernel.h, "GPU ABI"): LaunchArgs::args, numel and, where the
/// dialect offsets buffers in the kernel, one element offset per buffer.
std::string argsStruct(const Kernel& kernel, const CDialect& d, const char* numelComment);
/// The kernel's head: `<qualifiers> <name>(<buffers>, struct KilnArgs_<name> a) {`
/// and, where the dialect needs it, the lines that offset each buffer.
std::string kernelOpening(const Kernel& kernel, const CDialect& d, int requiredLocalSize);
/// Lines that split linear index `linear` into i<first>..i<last>,
/// innermost first, over a.sizes (`rest` the scratch variable).
std::string splitIndex(const CDialect& d, const std::string& indent, const std::string& linear, int first, int last,
                       const std::string& prefix, const std::string& rest);

/// The source of reduction kernel `kernel` in dialect `d`, and the bytes of
/// shared/local memory it declares (codegen/c_reduction.cpp).
std::string renderReduction(const Kernel& kernel, const CDialect& d, int64_t& sharedBytes);

}  // namespace kiln::codegen::ccg

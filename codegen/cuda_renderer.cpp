// The CUDA C renderer (see codegen/cuda_renderer.h): a builder for
// ir/scalar_formulas.h that writes one `const float vN = ...;` line per value,
// wrapped in a grid-stride loop that turns the linear index into one offset
// per parameter.
#include "codegen/cuda_renderer.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ir/scalar_formulas.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {

/// `f` as a CUDA C expression of exactly its bits. Finite values are hex float
/// literals, which every compiler reads exactly (a decimal literal relies on
/// correctly rounded parsing); inf and NaN have no literal without
/// <math.h>, so they are spelled as bit patterns.
std::string floatLiteral(float f) {
  if (!std::isfinite(f)) return fmt::format("__uint_as_float(0x{:08x}u)", std::bit_cast<uint32_t>(f));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(f));
  // A negative literal is parenthesized so that `-` in front of it is never `--`.
  return std::signbit(f) ? fmt::format("({}f)", buf) : fmt::format("{}f", buf);
}

/// The builder B of ir/scalar_formulas.h for CUDA C. Values are the names of
/// `const` locals; since the body is straight-line code, a local defined once
/// is visible to every later line, which lets constants be shared.
struct CudaBuilder {
  using V = std::string;
  using M = std::string;

  explicit CudaBuilder(std::string& text) : out(text) {}

  std::string& out;
  int nextValue = 0;
  int nextPredicate = 0;
  std::map<uint32_t, std::string> constants;  // by bits: +0 and -0 stay apart

  V def(const std::string& expr, const std::string& comment = {}) {
    V name = fmt::format("v{}", nextValue++);
    out += fmt::format("    const float {} = {};{}\n", name, expr, comment.empty() ? "" : "  // " + comment);
    return name;
  }
  M defM(const std::string& expr) {
    M name = fmt::format("m{}", nextPredicate++);
    out += fmt::format("    const bool {} = {};\n", name, expr);
    return name;
  }

  // The formulas' constants are doubles rounded to f32, as the C++ evaluator
  // (ir/scalar_eval.cpp) rounds them.
  V c(double value) {
    const float f = static_cast<float>(value);
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    auto it = constants.find(bits);
    if (it != constants.end()) return it->second;
    V name = def(floatLiteral(f), fmt::format("{}", f));
    constants.emplace(bits, name);
    return name;
  }
  // Plain C operators: NVRTC runs with --fmad=false, so none is contracted.
  V add(const V& a, const V& b) { return def(a + " + " + b); }
  V sub(const V& a, const V& b) { return def(a + " - " + b); }
  V mul(const V& a, const V& b) { return def(a + " * " + b); }
  V div(const V& a, const V& b) { return def(a + " / " + b); }
  V neg(const V& a) { return def("-" + a); }
  // Correctly rounded with -prec-sqrt=true, like std::sqrt.
  V sqrt(const V& a) { return def("sqrtf(" + a + ")"); }
  // cvt.rni: round half to even, like std::nearbyint in the default mode.
  V rint(const V& a) { return def("rintf(" + a + ")"); }
  M lt(const V& a, const V& b) { return defM(a + " < " + b); }
  M gt(const V& a, const V& b) { return defM(a + " > " + b); }
  M le(const V& a, const V& b) { return defM(a + " <= " + b); }
  M isNan(const V& a) { return defM(a + " != " + a); }
  M orM(const M& a, const M& b) { return defM(a + " || " + b); }
  V select(const M& m, const V& a, const V& b) { return def(m + " ? " + a + " : " + b); }
  // The same bit tricks as ir/scalar_eval.cpp. The shift is done unsigned so
  // that it is defined whatever n is (a NaN n converts to 0 on the GPU, and
  // its result is selected away by the formulas).
  V pow2(const V& n) { return def("__uint_as_float((unsigned)((int)" + n + " + 127) << 23)"); }
  V mantissa(const V& x) { return def("__uint_as_float((__float_as_uint(" + x + ") & 0x807fffffu) | 0x3f000000u)"); }
  V exponent(const V& x) { return def("(float)((int)((__float_as_uint(" + x + ") >> 23) & 0xffu) - 126)"); }
};

bool isIdentifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
    if (!ok) return false;
  }
  return true;
}

void checkSupported(const Kernel& kernel) {
  for (int p = 0; p < kernel.numParams(); ++p) {
    const DType dtype = kernel.params[p].dtype;
    KILN_CHECK(dtype == DType::f32, "cuda renderer: kernel {}: parameter p{} has dtype {}, only f32 is supported",
               kernel.name, p, dtypeName(dtype));
  }
  for (size_t i = 0; i < kernel.body.size(); ++i) {
    const ScalarInstr& instr = kernel.body[i];
    if (instr.kind == ScalarInstr::Kind::store) continue;
    KILN_CHECK(instr.dtype == DType::f32,
               "cuda renderer: kernel {}: instruction %{} has dtype {}, only f32 is supported", kernel.name, i,
               dtypeName(instr.dtype));
  }
}

/// The offset expression of parameter `p` from the per-dimension indices
/// i0..i{rank-1}. The innermost stride is the compile-time class the kernel
/// was specialized for; the outer ones are arguments.
std::string offsetExpr(const Kernel& kernel, int p) {
  std::vector<std::string> terms;
  const int inner = kernel.rank - 1;
  for (int d = 0; d < inner; ++d) terms.push_back(fmt::format("i{} * a.strides[{}][{}]", d, p, d));
  switch (kernel.params[p].inner) {
    case InnerStride::zero: break;
    case InnerStride::one: terms.push_back(fmt::format("i{}", inner)); break;
    case InnerStride::any: terms.push_back(fmt::format("i{} * a.strides[{}][{}]", inner, p, inner)); break;
  }
  if (terms.empty()) return "0";
  std::string expr = terms[0];
  for (size_t t = 1; t < terms.size(); ++t) expr += " + " + terms[t];
  return expr;
}

std::string innerStrideName(InnerStride s) {
  switch (s) {
    case InnerStride::zero: return "0";
    case InnerStride::one: return "1";
    case InnerStride::any: return "any";
  }
  return "?";
}

}  // namespace

std::string renderCudaC(const Kernel& kernel) {
  KILN_ASSERT(isIdentifier(kernel.name), "kernel name '{}' is not a C identifier", kernel.name);
  KILN_ASSERT(kernel.rank >= 1, "kernel {} has rank {}", kernel.name, kernel.rank);
  KILN_ASSERT(kernel.numParams() >= 1, "kernel {} has no parameters", kernel.name);
  checkSupported(kernel);

  const int rank = kernel.rank;
  const int numParams = kernel.numParams();
  const std::string argsType = "KilnArgs_" + kernel.name;
  std::string out;
  out += fmt::format("// kiln kernel {}: rank {}, {} parameters. Generated by codegen/cuda_renderer.cpp;\n",
                     kernel.name, rank, numParams);
  out += "// compile with --fmad=false -prec-div=true -prec-sqrt=true -ftz=false for eager-equal results.\n";
  // The layout is LaunchArgs::args followed by numel (codegen/kernel.h).
  out += fmt::format("struct {} {{\n  long long sizes[{}];\n  long long strides[{}][{}];\n  long long numel;\n}};\n\n",
                     argsType, rank, numParams, rank);

  out += fmt::format("extern \"C\" __global__ void {}(", kernel.name);
  for (int p = 0; p < numParams; ++p) {
    const KernelParam& param = kernel.params[p];
    // __restrict__ on every pointer: the runtime never passes aliasing
    // buffers, and it lets the read-only ones go through the texture cache.
    out += fmt::format("{}float* __restrict__ p{}, ", param.output ? "" : "const ", p);
  }
  out += fmt::format("{} a) {{\n", argsType);
  out += "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  out += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.numel; i += step) {\n";

  // Row-major decomposition of i, innermost dimension first. 64-bit
  // throughout: numel and offsets may pass 2^31.
  if (rank == 1) {
    out += "    const long long i0 = i;\n";
  } else {
    out += "    long long rest = i;\n";
    for (int d = rank - 1; d >= 1; --d) {
      out += fmt::format("    const long long i{} = rest % a.sizes[{}];\n", d, d);
      out += fmt::format("    rest /= a.sizes[{}];\n", d);
    }
    out += "    const long long i0 = rest;\n";
  }
  std::vector<bool> used(numParams, false);
  for (const ScalarInstr& instr : kernel.body) {
    if (instr.kind == ScalarInstr::Kind::load || instr.kind == ScalarInstr::Kind::store) {
      KILN_ASSERT(instr.param >= 0 && instr.param < numParams, "kernel {}: parameter {} out of range", kernel.name,
                  instr.param);
      used[instr.param] = true;
    }
  }
  for (int p = 0; p < numParams; ++p) {
    if (!used[p]) continue;
    out += fmt::format("    const long long o{} = {};  // inner stride {}\n", p, offsetExpr(kernel, p),
                       innerStrideName(kernel.params[p].inner));
  }

  CudaBuilder b(out);
  std::vector<std::string> values(kernel.body.size());
  auto operand = [&](size_t at, int index) -> const std::string& {
    KILN_ASSERT(index >= 0 && static_cast<size_t>(index) < at,
                "kernel {}: instruction %{} uses %{}, not an earlier value", kernel.name, at, index);
    KILN_ASSERT(kernel.body[index].kind != ScalarInstr::Kind::store, "kernel {}: instruction %{} uses store %{}",
                kernel.name, at, index);
    return values[index];
  };
  for (size_t at = 0; at < kernel.body.size(); ++at) {
    const ScalarInstr& instr = kernel.body[at];
    switch (instr.kind) {
      case ScalarInstr::Kind::load:
        KILN_ASSERT(!kernel.params[instr.param].output, "kernel {}: %{} loads output p{}", kernel.name, at,
                    instr.param);
        out += fmt::format("    // %{} = load p{}\n", at, instr.param);
        values[at] = b.def(fmt::format("p{}[o{}]", instr.param, instr.param));
        break;
      case ScalarInstr::Kind::constant: values[at] = b.c(instr.value); break;
      case ScalarInstr::Kind::op: {
        const int arity = ir::opInfo(instr.op).arity;
        KILN_ASSERT(arity < 0 || static_cast<size_t>(arity) == instr.operands.size(),
                    "kernel {}: %{} = {} has {} operands, expected {}", kernel.name, at, ir::opName(instr.op),
                    instr.operands.size(), arity);
        std::vector<std::string> in;
        std::string listing;
        for (int index : instr.operands) {
          in.push_back(operand(at, index));
          listing += fmt::format("{}%{}", listing.empty() ? "" : ", ", index);
        }
        out += fmt::format("    // %{} = {}({})\n", at, ir::opName(instr.op), listing);
        values[at] = ir::formulas::emitScalar(b, instr.op, std::span<const std::string>(in), instr.attrs);
        break;
      }
      case ScalarInstr::Kind::store:
        KILN_ASSERT(instr.operands.size() == 1, "kernel {}: store %{} needs one operand", kernel.name, at);
        KILN_ASSERT(kernel.params[instr.param].output, "kernel {}: %{} stores to input p{}", kernel.name, at,
                    instr.param);
        out +=
            fmt::format("    p{}[o{}] = {};  // %{}\n", instr.param, instr.param, operand(at, instr.operands[0]), at);
        break;
    }
  }
  out += "  }\n}\n";
  return out;
}

}  // namespace kiln::codegen

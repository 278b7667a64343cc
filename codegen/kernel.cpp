// Kernel signatures (what the kernel cache keys on) and listings.
#include "codegen/kernel.h"

#include <fmt/format.h>

#include <cstring>

namespace kiln::codegen {

namespace {
const char* innerName(InnerStride s) {
  switch (s) {
    case InnerStride::zero: return "0";
    case InnerStride::one: return "1";
    case InnerStride::any: return "n";
  }
  return "?";
}

std::string instrStr(const ScalarInstr& in, int index) {
  switch (in.kind) {
    case ScalarInstr::Kind::load: return fmt::format("v{} = load p{} : {}", index, in.param, dtypeName(in.dtype));
    case ScalarInstr::Kind::constant: {
      // Exact bits, so that signatures of different constants never collide.
      uint64_t bits;
      std::memcpy(&bits, &in.value, sizeof bits);
      return fmt::format("v{} = constant {} (0x{:016x}) : {}", index, in.value, bits, dtypeName(in.dtype));
    }
    case ScalarInstr::Kind::op: {
      std::string s = fmt::format("v{} = {}(", index, ir::opName(in.op));
      for (size_t i = 0; i < in.operands.size(); ++i) s += fmt::format("{}v{}", i ? ", " : "", in.operands[i]);
      s += ")";
      for (const auto& [key, value] : in.attrs) s += fmt::format(" {}={}", key, ir::attrStr(value));
      return s + fmt::format(" : {}", dtypeName(in.dtype));
    }
    case ScalarInstr::Kind::store: return fmt::format("store p{}, v{}", in.param, in.operands.at(0));
  }
  return "?";
}
}  // namespace

namespace instr {
ScalarInstr load(int param, DType dtype) {
  ScalarInstr s;
  s.kind = ScalarInstr::Kind::load;
  s.param = param;
  s.dtype = dtype;
  return s;
}

ScalarInstr constant(double value, DType dtype) {
  ScalarInstr s;
  s.kind = ScalarInstr::Kind::constant;
  s.value = value;
  s.dtype = dtype;
  return s;
}

ScalarInstr op(ir::Op op, std::vector<int> operands, ir::Attributes attrs, DType dtype) {
  ScalarInstr s;
  s.kind = ScalarInstr::Kind::op;
  s.op = op;
  s.operands = std::move(operands);
  s.attrs = std::move(attrs);
  s.dtype = dtype;
  return s;
}

ScalarInstr store(int param, int value, DType dtype) {
  ScalarInstr s;
  s.kind = ScalarInstr::Kind::store;
  s.param = param;
  s.operands = {value};
  s.dtype = dtype;
  return s;
}
}  // namespace instr

std::string Kernel::signature() const {
  std::string s = fmt::format("rank {}\n", rank);
  for (const KernelParam& p : params)
    s += fmt::format("param {} {} inner {}\n", p.output ? "out" : "in", dtypeName(p.dtype), innerName(p.inner));
  for (size_t i = 0; i < body.size(); ++i) s += instrStr(body[i], static_cast<int>(i)) + "\n";
  return s;
}

uint64_t Kernel::hash() const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : signature()) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string Kernel::str() const { return fmt::format("kernel {}\n{}", name, signature()); }

}  // namespace kiln::codegen

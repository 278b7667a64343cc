// Kernel signatures (what the kernel cache keys on) and listings.
#include "codegen/kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <string_view>

#include "runtime/error.h"

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
      // An int is exact as printed; a float adds its bits, so that signatures
      // of different constants never collide.
      if (const int64_t* i = std::get_if<int64_t>(&in.value))
        return fmt::format("v{} = constant {} : {}", index, *i, dtypeName(in.dtype));
      const double value = std::get<double>(in.value);
      return fmt::format("v{} = constant {} (0x{:016x}) : {}", index, value, std::bit_cast<uint64_t>(value),
                         dtypeName(in.dtype));
    }
    case ScalarInstr::Kind::op: {
      std::string s = fmt::format("v{} = {}(", index, ir::opName(in.op));
      for (size_t i = 0; i < in.operands.size(); ++i) s += fmt::format("{}v{}", i ? ", " : "", in.operands[i]);
      s += ")";
      for (const auto& [key, value] : in.attrs) s += fmt::format(" {}={}", key, ir::attrStr(value));
      return s + fmt::format(" : {}", dtypeName(in.dtype));
    }
    case ScalarInstr::Kind::store: return fmt::format("store p{}, v{}", in.param, in.operands.at(0));
    case ScalarInstr::Kind::reduce:
      return fmt::format("v{} = reduce.{}(v{}) : {}", index, reduceOpName(in.reduceOp), in.operands.at(0),
                         dtypeName(in.dtype));
    case ScalarInstr::Kind::extent: return fmt::format("v{} = extent : {}", index, dtypeName(in.dtype));
    case ScalarInstr::Kind::index: return fmt::format("v{} = index i{} : {}", index, in.param, dtypeName(in.dtype));
  }
  return "?";
}
}  // namespace

std::string_view reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
    case ReduceOp::argmax: return "argmax";
  }
  return "?";
}

namespace instr {
namespace {
using Kind = ScalarInstr::Kind;

/// An instruction of `kind` and `dtype` on `operands`; `param` is a load's
/// or store's parameter, an index's space.
ScalarInstr make(Kind kind, DType dtype, std::vector<int> operands = {}, int param = -1) {
  ScalarInstr s;
  s.kind = kind;
  s.dtype = dtype;
  s.operands = std::move(operands);
  s.param = param;
  return s;
}
}  // namespace

ScalarInstr load(int param, DType dtype) { return make(Kind::load, dtype, {}, param); }

ScalarInstr constant(ir::Number value, DType dtype) {
  ScalarInstr s = make(Kind::constant, dtype);
  s.value = ir::constantValue(value, dtype);
  return s;
}

ScalarInstr op(ir::Op op, std::vector<int> operands, ir::Attributes attrs, DType dtype) {
  ScalarInstr s = make(Kind::op, dtype, std::move(operands));
  s.op = op;
  s.attrs = std::move(attrs);
  return s;
}

ScalarInstr store(int param, int value, DType dtype) { return make(Kind::store, dtype, {value}, param); }

ScalarInstr reduce(ReduceOp op, int value, DType dtype) {
  ScalarInstr s = make(Kind::reduce, dtype, {value});
  s.reduceOp = op;
  return s;
}

ScalarInstr extent(DType dtype) { return make(Kind::extent, dtype); }

ScalarInstr index(int space) { return make(Kind::index, DType::i64, {}, space); }
}  // namespace instr

namespace {
bool isIdentifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

/// The registry's result dtype for `op` on operands of `types`, or nullopt
/// when the registry rejects them.
std::optional<DType> registryDType(ir::Op op, const std::vector<DType>& types, const ir::Attributes& attrs) {
  std::vector<ir::TensorType> in;
  for (DType t : types) in.push_back({t, {}, Device::cpu()});
  try {
    return ir::inferType(op, in, attrs).dtype;
  } catch (const Error&) {
    return std::nullopt;
  }
}
}  // namespace

void checkKernel(const Kernel& k) {
  KILN_ASSERT(isIdentifier(k.name), "kernel name '{}' is not a C identifier", k.name);
  KILN_ASSERT(k.rank >= 1, "kernel {}: rank {} < 1", k.name, k.rank);
  KILN_ASSERT(k.reduceRank >= 0 && k.reduceRank < k.rank, "kernel {}: reduceRank {} outside [0, rank {})", k.name,
              k.reduceRank, k.rank);
  for (int p = 0; p < k.numParams(); ++p) {
    KILN_ASSERT(!k.params[p].outer || k.isReduction(), "kernel {}: param {} is outer in an elementwise kernel", k.name,
                p);
    KILN_ASSERT(!k.params[p].inout || (!k.params[p].output && !k.isReduction()),
                "kernel {}: param {} is inout in a reduction kernel or as an output", k.name, p);
  }
  const int count = static_cast<int>(k.body.size());
  for (int i = 0; i < count; ++i) {
    const ScalarInstr& in = k.body[i];
    auto checkOperand = [&](int o) {
      KILN_ASSERT(o >= 0 && o < i, "kernel {}: instruction {} uses %{}, which is not an earlier instruction", k.name, i,
                  o);
      KILN_ASSERT(k.body[o].kind != ScalarInstr::Kind::store, "kernel {}: instruction {} uses store %{} as a value",
                  k.name, i, o);
    };
    switch (in.kind) {
      case ScalarInstr::Kind::load:
        KILN_ASSERT(in.param >= 0 && in.param < k.numParams() && !k.params[in.param].output,
                    "kernel {}: instruction {} loads param {}, which is not an input", k.name, i, in.param);
        KILN_ASSERT(in.dtype == k.params[in.param].dtype, "kernel {}: instruction {} loads {} from param {} of {}",
                    k.name, i, dtypeName(in.dtype), in.param, dtypeName(k.params[in.param].dtype));
        break;
      case ScalarInstr::Kind::constant: break;
      case ScalarInstr::Kind::op: {
        const ir::OpInfo& info = ir::opInfo(in.op);
        KILN_ASSERT(info.kind == ir::OpKind::elementwise || info.kind == ir::OpKind::constant,
                    "kernel {}: instruction {} is {}, which has no scalar formula", k.name, i, info.name);
        KILN_ASSERT(info.arity < 0 ||
                        static_cast<int>(in.operands.size()) == info.arity + (ir::usesElementIndex(in.op) ? 1 : 0),
                    "kernel {}: instruction {} ({}) has {} operands, expected {}", k.name, i, info.name,
                    in.operands.size(), info.arity + (ir::usesElementIndex(in.op) ? 1 : 0));
        for (int o : in.operands) checkOperand(o);
        if (in.op == ir::Op::constant) break;
        // An op that reads the element's index takes an index instruction
        // as one more operand; no other op reads one.
        std::vector<int> operands = in.operands;
        if (ir::usesElementIndex(in.op)) {
          KILN_ASSERT(!operands.empty() && k.body[operands.back()].kind == ScalarInstr::Kind::index,
                      "kernel {}: instruction {} ({}) does not end with an index operand", k.name, i, info.name);
          operands.pop_back();
        }
        for (int o : operands)
          KILN_ASSERT(k.body[o].kind != ScalarInstr::Kind::index,
                      "kernel {}: instruction {} ({}) reads index v{} as a value", k.name, i, info.name, o);
        std::vector<DType> types;
        for (int o : operands) types.push_back(k.body[o].dtype);
        const std::optional<DType> want = registryDType(in.op, types, in.attrs);
        KILN_ASSERT(want == in.dtype, "kernel {}: instruction {} ({}) has dtype {}, but its operands give {}", k.name,
                    i, info.name, dtypeName(in.dtype), want ? dtypeName(*want) : "an error");
        break;
      }
      case ScalarInstr::Kind::store:
        KILN_ASSERT(
            in.param >= 0 && in.param < k.numParams() && (k.params[in.param].output || k.params[in.param].inout),
            "kernel {}: instruction {} stores to param {}, which is not an output", k.name, i, in.param);
        KILN_ASSERT(in.operands.size() == 1, "kernel {}: store {} has {} operands, expected 1", k.name, i,
                    in.operands.size());
        checkOperand(in.operands[0]);
        KILN_ASSERT(k.body[in.operands[0]].dtype == k.params[in.param].dtype,
                    "kernel {}: instruction {} stores a {} value to param {} of {}", k.name, i,
                    dtypeName(k.body[in.operands[0]].dtype), in.param, dtypeName(k.params[in.param].dtype));
        break;
      case ScalarInstr::Kind::reduce: {
        KILN_ASSERT(k.isReduction(), "kernel {}: instruction {} is a reduce in an elementwise kernel", k.name, i);
        KILN_ASSERT(in.operands.size() == 1, "kernel {}: reduce {} has {} operands, expected 1", k.name, i,
                    in.operands.size());
        checkOperand(in.operands[0]);
        const DType from = k.body[in.operands[0]].dtype;
        const bool sumType = from == DType::f32 || from == DType::f64 || from == DType::i32 || from == DType::i64;
        const bool ok = in.reduceOp == ReduceOp::argmax ? in.dtype == DType::i64 && from != DType::boolean
                        : in.reduceOp == ReduceOp::sum  ? in.dtype == from && sumType
                                                        : in.dtype == from;
        KILN_ASSERT(ok, "kernel {}: instruction {} is reduce.{} of a {} value to {}", k.name, i,
                    reduceOpName(in.reduceOp), dtypeName(from), dtypeName(in.dtype));
        break;
      }
      case ScalarInstr::Kind::extent:
        KILN_ASSERT(k.isReduction(), "kernel {}: instruction {} is an extent in an elementwise kernel", k.name, i);
        KILN_ASSERT(in.dtype != DType::boolean, "kernel {}: instruction {} is an extent of bool", k.name, i);
        break;
      case ScalarInstr::Kind::index:
        KILN_ASSERT(in.param >= 0 && in.param < k.numIndexSpaces(),
                    "kernel {}: instruction {} reads index space {} of {}", k.name, i, in.param, k.numIndexSpaces());
        KILN_ASSERT(in.dtype == DType::i64, "kernel {}: instruction {} is an index of {}", k.name, i,
                    dtypeName(in.dtype));
        break;
    }
  }
  KILN_ASSERT(k.maxRowLength == 0 || (k.isReduction() && std::has_single_bit(static_cast<uint64_t>(k.maxRowLength))),
              "kernel {}: a row bound of {}", k.name, k.maxRowLength);
  if (!k.isReduction()) return;
  // Where each value lives: the schedule asserts what it cannot place.
  const KernelStages stages = kernelStages(k);
  bool anyReduce = false;
  for (int i = 0; i < count; ++i) {
    const ScalarInstr& in = k.body[i];
    if (in.kind == ScalarInstr::Kind::reduce) {
      anyReduce = true;
      KILN_ASSERT(stages.row[in.operands[0]], "kernel {}: instruction {} reduces v{}, which is not a row value", k.name,
                  i, in.operands[0]);
    }
    if (in.kind == ScalarInstr::Kind::store && k.params[in.param].outer)
      KILN_ASSERT(!stages.row[in.operands[0]], "kernel {}: instruction {} stores row value v{} to outer param {}",
                  k.name, i, in.operands[0], in.param);
  }
  KILN_ASSERT(anyReduce, "kernel {}: a reduction kernel without a reduce", k.name);
}

KernelStages kernelStages(const Kernel& k) {
  KILN_ASSERT(k.isReduction(), "kernelStages of elementwise kernel {}", k.name);
  const int count = static_cast<int>(k.body.size());
  KernelStages st;
  st.row.assign(static_cast<size_t>(count), false);
  st.stage.assign(static_cast<size_t>(count), 0);
  int passes = 0;
  for (int i = 0; i < count; ++i) {
    const ScalarInstr& in = k.body[i];
    switch (in.kind) {
      case ScalarInstr::Kind::load: st.row[i] = !k.params[in.param].outer; break;
      case ScalarInstr::Kind::constant:
      case ScalarInstr::Kind::extent: break;
      case ScalarInstr::Kind::index: st.row[i] = true; break;  // an index along the row (a row value)
      case ScalarInstr::Kind::op:
        for (int o : in.operands) {
          st.row[i] = st.row[i] || st.row[o];
          st.stage[i] = std::max(st.stage[i], st.stage[o]);
        }
        break;
      case ScalarInstr::Kind::reduce:
        st.stage[i] = st.stage[in.operands[0]] + 1;
        passes = std::max(passes, st.stage[i]);
        break;
      case ScalarInstr::Kind::store:
        st.stage[i] = st.stage[in.operands[0]];
        // A store into a row param writes the whole row, in a pass.
        st.row[i] = !k.params[in.param].outer;
        if (st.row[i]) passes = std::max(passes, st.stage[i] + 1);
        break;
    }
  }
  st.numPasses = passes;
  st.pass.resize(static_cast<size_t>(passes));
  st.before.resize(static_cast<size_t>(passes) + 1);
  // A pass evaluates its reduces and row stores and the row values they
  // need, found by walking operands backwards.
  for (int l = 0; l < passes; ++l) {
    std::vector<bool> need(static_cast<size_t>(count), false);
    for (int i = count - 1; i >= 0; --i) {
      const ScalarInstr& in = k.body[i];
      const bool root = (in.kind == ScalarInstr::Kind::reduce && st.stage[in.operands[0]] == l) ||
                        (in.kind == ScalarInstr::Kind::store && st.row[i] && st.stage[i] == l);
      if (!root && !need[i]) continue;
      need[i] = true;
      if (in.kind == ScalarInstr::Kind::reduce) {
        need[in.operands[0]] = true;
        continue;
      }
      for (int o : in.operands)
        if (st.row[o]) need[o] = true;
    }
    for (int i = 0; i < count; ++i)
      if (need[i]) st.pass[l].push_back(i);
  }
  // Note [Stashed row values]: every pass recomputes the row values it
  // needs from the loads, which costs nothing for x - mean but a lot for
  // dropout's Philox draws or softmax's exp. A row value that a later pass
  // needs again and that costs at least kStashCost to recompute (the sum of
  // its ops' ir::recomputeCost, roughly vector instructions, a column of
  // ir/Ops.def) is marked, so that a renderer can keep it for the row (the
  // CPU's stash, codegen/llvm_reduction.cpp) instead. It changes where a
  // value comes from, never what it is.
  constexpr int kStashCost = 6;
  auto cost = [&](int v) {
    std::vector<bool> seen(static_cast<size_t>(count), false);
    std::vector<int> stack{v};
    int total = 0;
    while (!stack.empty()) {
      const int i = stack.back();
      stack.pop_back();
      if (seen[i] || !st.row[i] || k.body[i].kind != ScalarInstr::Kind::op) continue;
      seen[i] = true;
      total += ir::recomputeCost(k.body[i].op);
      for (int o : k.body[i].operands) stack.push_back(o);
    }
    return total;
  };
  st.firstPass.assign(static_cast<size_t>(count), -1);
  st.stashed.assign(static_cast<size_t>(count), false);
  for (int l = 0; l < passes; ++l)
    for (int i : st.pass[l])
      if (st.firstPass[i] < 0) st.firstPass[i] = l;
  for (int l = 1; l < passes; ++l)
    for (int i : st.pass[l]) {
      if (st.firstPass[i] < l) continue;
      for (int o : k.body[i].operands)
        if (st.row[o] && st.firstPass[o] >= 0 && st.firstPass[o] < l && !st.stashed[o] && cost(o) >= kStashCost)
          st.stashed[o] = true;
    }
  for (int i = 0; i < count; ++i) {
    const ScalarInstr& in = k.body[i];
    if (st.row[i]) continue;
    if (in.kind == ScalarInstr::Kind::store) {
      st.before[passes].push_back(i);
    } else {
      KILN_ASSERT(st.stage[i] <= passes, "kernel {}: instruction {} is of stage {} after {} passes", k.name, i,
                  st.stage[i], passes);
      st.before[st.stage[i]].push_back(i);
    }
  }
  return st;
}

std::string Kernel::signature() const {
  std::string s = fmt::format("rank {}\n", rank);
  if (reduceRank > 0) s += fmt::format("reduce {}\n", reduceRank);
  if (maxRowLength > 0) s += fmt::format("rows <= {}\n", maxRowLength);
  for (const KernelParam& p : params)
    s += fmt::format("param {} {} inner {}{}\n",
                     p.output  ? "out"
                     : p.inout ? "inout"
                               : "in",
                     dtypeName(p.dtype), innerName(p.inner), p.outer ? " outer" : "");
  for (InnerStride inner : indexSpaces) s += fmt::format("index inner {}\n", innerName(inner));
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

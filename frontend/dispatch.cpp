// dispatch(): operand checks, type promotion, then the eager path or the trace.
//
// Promotion: the op's dtype comes from frontend/promotion.h; tensor
// operands of another dtype get a `cast` node in front of the op, scalars
// are made in the op's dtype directly. The casts are part of what runs, in
// eager and traced code alike, so both compute the same bits.
//
// Eager: the casts and the op become a small graph, fused (a fusion of the
// casts and the op where they share a domain) and compiled like any other
// graph, so eager and compiled share every formula (Note [Eager equals
// compiled]). The executable is cached by op, attributes and input types
// (and the dtypes they are cast to) and strides (a view's kernel reads
// it through them: an op on a transposed or sliced view is one kernel, no
// copy); the kernel under it is cached by signature (codegen::KernelCache:
// rank after coalescing, inner-stride classes, dtypes, body; never sizes), so
// a new shape with the same pattern only lowers again and never recompiles.
// A view's offset is not part of any key: the executable is run on the
// storage from the view's first element.
#include "frontend/dispatch.h"

#include "frontend/determinism.h"

#include <fmt/format.h>

#include <limits>
#include <mutex>
#include <unordered_map>

#include "codegen/compile_graph.h"
#include "frontend/amp/autocast_policy.h"
#include "frontend/autograd/formulas.h"
#include "frontend/promotion.h"
#include "frontend/trace.h"
#include "passes/pass_manager.h"
#include "runtime/error.h"
#include "runtime/numeric.h"
#include "runtime/profiler_events.h"

namespace kiln::detail {

namespace {
class EagerCache {
 public:
  std::shared_ptr<const runtime::Executable> get(const std::string& key) {
    std::lock_guard lock(mutex_);
    stats_.calls++;
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void put(const std::string& key, std::shared_ptr<const runtime::Executable> exe) {
    std::lock_guard lock(mutex_);
    if (map_.size() >= kCapacity) map_.clear();  // shapes churn: start over
    map_.emplace(key, std::move(exe));
    stats_.graphsBuilt++;
  }
  EagerStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  static constexpr size_t kCapacity = 4096;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const runtime::Executable>> map_;
  EagerStats stats_;
};

EagerCache& eagerCache() {
  static auto* cache = new EagerCache();
  return *cache;
}

/// The dtype a scalar takes part in promotion with (PyTorch's wrapped numbers).
DType scalarCategoryDType(const Operand& o) {
  switch (o.kind) {
    case Operand::Kind::boolean: return DType::boolean;
    case Operand::Kind::integer: return DType::i64;
    case Operand::Kind::floating:
    case Operand::Kind::tensor: break;
  }
  return DType::f32;
}

/// The dtype each operand enters the op with.
std::vector<DType> operandDTypes(ir::Op op, std::span<const Operand> operands) {
  std::vector<DType> want(operands.size());
  // Library calls take their operands as they are (matmul of f32 and f64 is
  // an error in PyTorch too, and an index stays an integer); the registry
  // checks their dtypes. So do cast and the draws: dropout's x a float
  // tensor, seed and offset i64 (kiln::dropout makes them), with no
  // promotion between them (ir::promotesOperands).
  if (!ir::promotesOperands(op)) {
    for (size_t i = 0; i < operands.size(); ++i)
      want[i] = operands[i].isScalar ? scalarCategoryDType(operands[i]) : operands[i].tensor.dtype();
    return want;
  }
  const DType common = promotedDType(op, operands);
  for (size_t i = 0; i < operands.size(); ++i) {
    const bool condition = op == ir::Op::where && i == 0;  // not promoted: it must be bool
    want[i] = !condition             ? common
              : operands[i].isScalar ? scalarCategoryDType(operands[i])
                                     : operands[i].tensor.dtype();
  }
  return want;
}

/// An integer scalar must fit the dtype it becomes, as in PyTorch.
void checkScalarFits(std::string_view name, const Operand& o, DType dtype) {
  if (o.kind != Operand::Kind::integer || dtype != DType::i32) return;
  KILN_CHECK(o.intScalar >= std::numeric_limits<int32_t>::min() && o.intScalar <= std::numeric_limits<int32_t>::max(),
             "{}: scalar {} cannot be converted to i32 without overflow", name, o.intScalar);
}

/// A 0-d tensor holding scalar `o` as `dtype` (integers exactly).
Tensor scalarTensor(const Operand& o, DType dtype, Device device) {
  unsigned char element[8];
  if (o.kind == Operand::Kind::integer || o.kind == Operand::Kind::boolean)
    storeIntAs(element, dtype, o.intScalar);
  else
    storeAs(element, dtype, o.scalar);
  return fromElements(element, 1, dtype, {}, device);
}

/// `v` as `dtype`: itself, or a new cast node.
ir::Value* castTo(ir::Graph& g, ir::Value* v, DType dtype) {
  if (v->type().dtype == dtype) return v;
  return g.create(ir::Op::cast, std::vector<ir::Value*>{v}, {{"dtype", dtype}})->output();
}

std::unique_ptr<ir::Graph> buildEager(ir::Op op, const std::vector<ir::TensorType>& types,
                                      const std::vector<DType>& want, const ir::Attributes& attrs) {
  auto g = std::make_unique<ir::Graph>(fmt::format("eager_{}", ir::opName(op)));
  std::vector<ir::Value*> inputs;
  for (size_t i = 0; i < types.size(); ++i) inputs.push_back(castTo(*g, g->addInput(types[i]), want[i]));
  ir::Node* node = g->create(op, inputs, attrs);
  g->setOutputs({node->outputs().begin(), node->outputs().end()});
  passes::PassManager("fuse-elementwise").run(*g);
  return g;
}

/// What an eager executable depends on besides the op: each input's type
/// and strides (its kernels are compiled for them; sizes are only their
/// arguments). The offset is not part of it: inputs are bound where they start.
// An op's inputs as a profile records them (recordShapes): a scalar is a
// 0-d input of dtype "scalar", as torch.profiler's "Scalar".
void recordInputs(profiler::TraceEvent& e, const std::vector<Operand>& operands) {
  for (const Operand& o : operands) {
    if (o.isScalar || !o.tensor.defined()) {
      e.shapes.emplace_back();
      e.dtypes.emplace_back("scalar");
    } else {
      e.shapes.push_back(o.tensor.shape());
      e.dtypes.emplace_back(dtypeName(o.tensor.dtype()));
    }
  }
}

std::string inputKey(const Tensor& t) { return t.type().str() + ir::shapeStr(t.strides()); }
}  // namespace

Tensor runEagerGraph(const std::string& key, const std::vector<Tensor>& inputs, const ir::TensorType& out,
                     const std::function<std::unique_ptr<ir::Graph>()>& build, const Tensor& into) {
  std::string full = key;
  for (const Tensor& t : inputs) full += "|" + inputKey(t);
  if (into.defined()) full += "|into" + ir::shapeStr(into.strides());
  auto exe = eagerCache().get(full);
  if (!exe) {
    std::unique_ptr<ir::Graph> g = build();
    std::vector<ir::Strides> strides, outStrides;
    for (const Tensor& t : inputs) strides.push_back(t.strides());
    if (into.defined()) outStrides.push_back(into.strides());
    exe = std::make_shared<const runtime::Executable>(codegen::compileGraph(*g, out.device, strides, {}, outStrides));
    eagerCache().put(full, exe);
  }
  std::vector<std::shared_ptr<runtime::Buffer>> buffers;
  std::vector<int64_t> offsets;
  for (const Tensor& t : inputs) {
    buffers.push_back(t.impl()->storage);
    offsets.push_back(t.storageOffset() * itemSize(t.dtype()));
  }
  if (into.defined()) {
    KILN_ASSERT(into.type() == out, "eager {} written into {}", out.str(), into.str());
    exe->run(buffers, offsets, {into.impl()->storage}, {into.storageOffset() * itemSize(into.dtype())});
    return into;
  }
  auto outputs = exe->run(buffers, offsets);
  return contiguousTensor(out, std::move(outputs.at(0)));
}

namespace {
Tensor runEager(ir::Op op, std::vector<Operand>& operands, const std::vector<DType>& want, const ir::Attributes& attrs,
                const ir::TensorType& out) {
  std::vector<ir::TensorType> types;
  std::vector<Tensor> inputs;
  std::string key = fmt::format("{}", static_cast<int>(op));
  for (const auto& [name, value] : attrs) key += fmt::format("|{}={}", name, ir::attrStr(value));
  for (size_t i = 0; i < operands.size(); ++i) {
    types.push_back(operands[i].tensor.type());
    inputs.push_back(operands[i].tensor);
    key += fmt::format("|>{}", dtypeName(want[i]));
  }
  return runEagerGraph(key, inputs, out, [&] { return buildEager(op, types, want, attrs); });
}
}  // namespace

DType promotedDType(ir::Op op, std::span<const Operand> operands) {
  std::vector<PromotionOperand> participants;
  for (size_t i = op == ir::Op::where ? 1 : 0; i < operands.size(); ++i) {
    const Operand& o = operands[i];
    if (o.isScalar)
      participants.push_back({scalarCategoryDType(o), Participant::scalar});
    else
      participants.push_back({o.tensor.dtype(), o.tensor.dim() == 0 ? Participant::zeroDim : Participant::dimensioned});
  }
  const DType common = resultType(participants);
  return isFloatOnly(op) && !isFloatingPoint(common) ? DType::f32 : common;
}

EagerStats eagerStats() { return eagerCache().stats(); }

Tensor dispatch(ir::Op op, std::vector<Operand> operands, const ir::Attributes& attrs) {
  const std::string_view name = ir::opName(op);
  profiler::RecordFunction range("op", name);
  if (range.event() && (profiler::flags() & profiler::kShapes)) [[unlikely]]
    recordInputs(*range.event(), operands);
  const Tensor* first = nullptr;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i].isScalar) continue;
    KILN_CHECK(operands[i].tensor.defined(), "{}: argument {} is an undefined tensor", name, i);
    if (!first) first = &operands[i].tensor;
  }
  KILN_ASSERT(first, "{} called with scalars only", name);
  checkDeterministic(op, first->device());  // Note [Determinism]
  // Autocast (frontend/amp/autocast.h): an op on its lists takes its
  // floating-point operands cast first, by ordinary `cast` ops that record
  // their gradient and trace like any other.
  if (anyAutocast())
    if (const CastPolicy policy = castPolicy(op); policy != CastPolicy::none)
      for (Operand& o : operands)
        if (!o.isScalar) o.tensor = autocastArg(o.tensor, policy);
  TraceState* trace = TraceState::current();
  for (const Operand& o : operands)
    KILN_CHECK(o.isScalar || trace || !o.tensor.isTraced(),
               "{}: {} was produced while tracing (kiln::compile) and has no value outside the trace", name,
               o.tensor.str());
  const std::vector<DType> want = operandDTypes(op, operands);
  // The op's rules on the promoted types, checked before anything is built
  // or traced, so that a failed op leaves no trace behind.
  std::vector<ir::TensorType> promoted;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i].isScalar) checkScalarFits(name, operands[i], want[i]);
    promoted.push_back(operands[i].isScalar ? ir::TensorType{want[i], {}, first->device()} : operands[i].tensor.type());
    promoted.back().dtype = want[i];
  }
  const ir::TensorType out = ir::inferType(op, promoted, attrs);

  if (trace) {
    std::vector<ir::Value*> inputs;
    for (size_t i = 0; i < operands.size(); ++i) {
      const Operand& o = operands[i];
      if (o.isScalar) {
        // An integer scalar stays an integer (Note [Integer constants are
        // exact]): exact in an integer op, rounded once in a float one, as
        // scalarTensor() stores it eagerly.
        const ir::Number value = o.kind == Operand::Kind::floating ? ir::Number(o.scalar) : ir::Number(o.intScalar);
        inputs.push_back(trace->graph->createConstant(value, {want[i], {}, first->device()})->output());
      } else {
        inputs.push_back(castTo(*trace->graph, trace->valueOf(o.tensor, name.data()), want[i]));
      }
    }
    ir::Node* node = trace->graph->create(op, inputs, attrs);
    Tensor result = trace->wrap(node->output());
    autograd::recordOp(op, operands, attrs, result);
    return result;
  }

  // Scalars become 0-d tensors so that one kernel serves every scalar value.
  for (size_t i = 0; i < operands.size(); ++i)
    if (operands[i].isScalar) operands[i].tensor = scalarTensor(operands[i], want[i], first->device());
  Tensor result = runEager(op, operands, want, attrs, out);
  autograd::recordOp(op, operands, attrs, result);
  return result;
}

}  // namespace kiln::detail

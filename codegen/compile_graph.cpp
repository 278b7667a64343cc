// compileGraph: fusion nodes to kernel steps over buffer slots; graph inputs
// keep the layouts the caller gives, every other slot is contiguous.
#include "codegen/compile_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "codegen/codegen_log.h"
#include "codegen/kernel_cache.h"
#include "codegen/lowering.h"
#include "codegen/lowering_collective.h"
#include "codegen/lowering_library.h"
#include "codegen/lowering_reduction.h"
#include "codegen/plan_memory.h"
#include "codegen/target.h"
#include "runtime/blas.h"
#include "runtime/error.h"
#include "runtime/profiler_events.h"

namespace kiln::codegen {

namespace {

/// Whether `v` is read only by library calls, directly or through more
/// views, and is not returned.
bool readByLibraryCallsOnly(const ir::Value* v) {
  if (v->graph()->isOutput(v)) return false;
  for (const ir::Use& use : v->uses()) {
    const ir::Node* user = use.user;
    if (user->info().kind == ir::OpKind::library) continue;
    if (ir::isViewOp(user->op()) && readByLibraryCallsOnly(user->output())) continue;
    return false;
  }
  return true;
}
// Note [Donated buffers]
// A compiled training step returns each parameter's new value, which the
// frontend writes back into the parameter (Note [Writes into eager state]
// in frontend/trace.h). Given a fresh buffer, every parameter and moment
// would be held twice at the end of a call. So the frontend donates the
// input buffer (the parameter, as captured) to the output (its new value),
// and the output is computed into it, in place, when all of this holds:
// - the output is computed by an elementwise kernel (not a reduction, a
//   library call or a cat), of the input's dtype and shape;
// - that kernel reads the input through exactly one parameter, with the
//   output's strides and no offset, so each element is loaded, then stored
//   where it was loaded, in one iteration (the parameter becomes `inout`:
//   one pointer, loaded and stored, so no two noalias pointers alias);
// - the input, and any view of it, is read by no node after that kernel;
// - neither is a graph output, and the output is returned once;
// - no node that can fail on its data (index_select and index_add check
//   their indices when they run) comes after that kernel: a call that
//   fails must leave its inputs as they were. Steps run in node order and
//   a check throws before the steps after it are enqueued (an asynchronous
//   device's gather waits for its indices and checks them on the host), so
//   every donated write comes after every check has passed. (A training
//   step's cross-entropy gather comes in the forward pass; its optimizer
//   updates, which take their parameters' buffers, at the end.)
// Otherwise the output gets a buffer of its own, as without the donation.
bool readAfter(const ir::Value* v, const std::unordered_map<const ir::Node*, size_t>& position, size_t at) {
  for (const ir::Use& use : v->uses()) {
    if (position.at(use.user) > at) return true;
    if (ir::isViewOp(use.user->op()) && readAfter(use.user->output(), position, at)) return true;
  }
  return false;
}

/// Makes `lowered`'s output param for fusion result `result` store into its
/// one param reading fusion input `input`, if their strides match (Note
/// [Donated buffers]); returns whether it did.
bool donateInPlace(LoweredKernel& lowered, int input, int result) {
  Kernel& k = lowered.kernel;
  int in = -1, out = -1;
  for (int p = 0; p < k.numParams(); ++p) {
    const ParamBinding& b = lowered.bindings[static_cast<size_t>(p)];
    if (!b.output && b.index == input) {
      if (in >= 0) return false;  // read through two parameters (x + x.t())
      in = p;
    }
    if (b.output && b.index == result) out = p;
  }
  if (in < 0 || out < 0 || lowered.bindings[static_cast<size_t>(in)].offset != 0) return false;
  if (k.params[in].dtype != k.params[out].dtype || k.params[in].inner != k.params[out].inner) return false;
  const auto rank = static_cast<size_t>(k.rank);
  std::vector<int64_t>& args = lowered.launch.args;
  auto strides = [&](int p) {
    return args.begin() + static_cast<std::ptrdiff_t>(rank + static_cast<size_t>(p) * rank);
  };
  if (!std::equal(strides(in), strides(in) + static_cast<std::ptrdiff_t>(rank), strides(out))) return false;
  // Stores to `out` go to `in`; `out` goes away, with its strides.
  k.params[in].inout = true;
  for (ScalarInstr& s : k.body) {
    if ((s.kind == ScalarInstr::Kind::store || s.kind == ScalarInstr::Kind::load) && s.param == out) s.param = in;
    if ((s.kind == ScalarInstr::Kind::store || s.kind == ScalarInstr::Kind::load) && s.param > out) s.param--;
  }
  args.erase(strides(out), strides(out) + static_cast<std::ptrdiff_t>(rank));
  k.params.erase(k.params.begin() + out);
  lowered.bindings.erase(lowered.bindings.begin() + out);
  const std::string prefix = k.name.substr(0, k.name.rfind('_'));
  k.name = fmt::format("{}_{:08x}", prefix, k.hash() & 0xffffffffu);
  return true;
}

// Note [Contiguous copies are copy steps]
// A kernel that only copies elements of one dtype from a contiguous run to
// a contiguous run (clone() of a contiguous tensor, a copy of a compiled
// program's input, the pieces of a cat along the outermost dim) is a
// CopyStep instead: the device's own copy (a memcpy over the thread pool on
// the CPU, cuMemcpyDtoDAsync, clEnqueueCopyBuffer), with nothing to compile.
// Lowering has coalesced such a kernel to rank 1 with unit strides.

/// The bytes `lowered` copies when it is such a plain copy, else -1.
int64_t plainCopyBytes(const LoweredKernel& lowered) {
  const Kernel& k = lowered.kernel;
  if (k.isReduction() || k.rank != 1 || k.numIndexSpaces() != 0 || k.numParams() != 2 || k.body.size() != 2) return -1;
  const KernelParam &in = k.params[0], &out = k.params[1];
  if (in.output || !out.output || in.inout || in.dtype != out.dtype) return -1;
  const ScalarInstr &load = k.body[0], &store = k.body[1];
  if (load.kind != ScalarInstr::Kind::load || load.param != 0 || store.kind != ScalarInstr::Kind::store ||
      store.param != 1 || store.operands != std::vector<int>{0})
    return -1;
  const std::vector<int64_t>& args = lowered.launch.args;  // size, then each param's stride
  if (args.size() != 3 || (args[0] > 1 && (args[1] != 1 || args[2] != 1))) return -1;
  return args[0] * itemSize(in.dtype);
}

/// The layouts node `n`'s results are written with: empty (all contiguous)
/// unless one of them is a graph output given strides in `outputStrides`.
std::vector<ir::Layout> outputLayouts(const ir::Graph& graph, const ir::Node& n,
                                      std::span<const ir::Strides> outputStrides) {
  if (outputStrides.empty()) return {};
  KILN_ASSERT(outputStrides.size() == graph.outputs().size(), "{} output layouts for a graph of {} outputs",
              outputStrides.size(), graph.outputs().size());
  std::vector<ir::Layout> layouts;
  bool given = false;
  for (const ir::Value* out : n.outputs()) {
    ir::Layout l = ir::contiguousLayout(out->type().shape);
    bool returned = false;
    for (size_t k = 0; k < graph.outputs().size(); ++k) {
      if (graph.outputs()[k] != out) continue;
      KILN_ASSERT(outputStrides[k].size() == out->type().shape.size(), "strides {} for output {}",
                  ir::shapeStr(outputStrides[k]), out->type().str());
      KILN_ASSERT(!returned || l.strides == outputStrides[k], "one value returned with two layouts");
      l.strides = outputStrides[k];
      returned = true;
    }
    given = given || !ir::isContiguous(out->type().shape, l.strides);
    layouts.push_back(std::move(l));
  }
  if (!given) return {};
  KILN_CHECK(n.op() == ir::Op::fusion && !isReductionNode(n),
             "codegen: only an elementwise fusion can write a result through given strides, not {}",
             ir::opName(n.op()));
  return layouts;
}
}  // namespace

bool supports(const ir::Node& node, Device device, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (!node.owner()) return no("node without a graph");
  for (const ir::Value* v : node.inputs())
    if (v->type().device != device) return no(fmt::format("input on {}", v->type().device.str()));
  if (!targetFor(device).supports(node, why)) return false;
  switch (node.info().kind) {
    case ir::OpKind::control: return true;   // fusion
    case ir::OpKind::constant: return true;  // folded into the kernels that read it
    case ir::OpKind::elementwise: return no("elementwise ops run inside fusion nodes (run fuse-elementwise first)");
    case ir::OpKind::movement:
      // Note [Library calls read views]: a view read only by library calls
      // is an alias of its input's slot with other strides.
      if (!ir::isViewOp(node.op())) return no("movement ops run inside fusion nodes (run fuse-elementwise first)");
      if (readByLibraryCallsOnly(node.output())) return true;
      return no(
          "movement ops run inside fusion nodes, unless only library calls read them (run fuse-elementwise first)");
    case ir::OpKind::reduction: return true;   // a kernel of one reduction (codegen/lowering_reduction.cpp)
    case ir::OpKind::library: return true;     // a library call (codegen/lowering_library.cpp)
    case ir::OpKind::collective: return true;  // a start and a wait (codegen/lowering_collective.cpp)
  }
  return no("unknown op");
}

Device graphDevice(const ir::Graph& graph) {
  if (graph.numInputs() > 0) return graph.input(0)->type().device;
  if (!graph.outputs().empty()) return graph.outputs()[0]->type().device;
  return Device::cpu();
}

namespace {

// Note [Matmul epilogues in compiled programs]
// (And convolutions': a CPU forward conv2d takes an epilogue the same way,
// LibraryFunction::withEpilogue says which calls do; Note [Convolution
// epilogues] in runtime/conv.cpp.)
// A fusion node right after a CPU matmul that reads the matmul's result
// element for element, and nothing else does, becomes the matmul step's
// epilogue (Note [Matmul epilogues] in runtime/blas.cpp): the bias, the
// activation and the residual add of a linear layer run on each block of
// the result while it is in cache, and the program has one step less.
// Right after, in graph order: every other input of the fusion is then
// computed already. It must be one elementwise kernel (no reduction, no
// copy) over the matmul's shape, with contiguous results, reading the
// matmul's result at its own element (inner stride one, no offset), and
// writing none of the matmul's operands (a donated buffer could be one).
// Where the fusion has one result of the matmul's type, the kernel computes
// it in place, into the matmul's result (donateInPlace: each element is
// read, then written, by the thread that computed it), so the epilogue
// costs no buffer; else its results get slots of their own.
// Note [Epilogue inputs first]
// An epilogue must be the step right after its matmul or convolution, but
// the graph may hold nodes between the two that the epilogue reads and
// that do not depend on the product: batch norm's rsqrt(var + eps) before
// its affine. As the product's one use is the epilogue's fusion, nothing
// between the two can depend on the product, so the program runs them
// before it: the steps' order is the graph's with each such producer moved
// down to just before its fusion.
std::vector<const ir::Node*> stepOrder(const ir::Graph& graph, Device device) {
  std::vector<const ir::Node*> nodes;
  for (const ir::Node* n : graph.nodes()) nodes.push_back(n);
  if (!device.isCpu()) return nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node* p = nodes[i];
    if (p->op() != ir::Op::matmul && p->op() != ir::Op::conv2d) continue;
    const ir::Value* out = p->output();
    if (graph.isOutput(out) || out->uses().size() != 1 || out->uses()[0].user->op() != ir::Op::fusion) continue;
    const auto f = std::find(nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, nodes.end(), out->uses()[0].user);
    if (f == nodes.end()) continue;
    std::rotate(nodes.begin() + static_cast<std::ptrdiff_t>(i), nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, f);
    i = static_cast<size_t>(f - nodes.begin()) - 1;
  }
  return nodes;
}

bool asEpilogue(const ir::Graph& graph, const ir::Node& matmul, runtime::LibraryFn withEpilogue, const ir::Node& n,
                const LoweredKernel& lowered, const runtime::KernelStep& step, runtime::LibraryStep& call) {
  const ir::Value* product = matmul.output();
  if (call.epilogue || call.epilogueFirstSlot != 0 || graph.isOutput(product) || product->uses().size() != 1 ||
      product->uses()[0].user != &n || lowered.kernel.isReduction())
    return false;
  if (step.shape.numel != product->type().numel()) return false;
  for (const ir::Value* out : n.outputs())
    if (out->type().shape != product->type().shape) return false;
  int reads = 0;
  for (size_t p = 0; p < lowered.bindings.size(); ++p) {
    const ParamBinding& b = lowered.bindings[p];
    const int slot = step.slots[p];
    if (b.output) {
      if (slot == call.slots[0] || slot == call.slots[1]) return false;
      if (b.offset != 0) return false;
      continue;
    }
    if (n.input(b.index) != product) continue;
    if (lowered.kernel.params[p].inner != InnerStride::one || b.offset != 0) return false;
    ++reads;
  }
  if (reads != 1) return false;
  call.fn = withEpilogue;
  call.recordable = false;
  call.epilogueFirstSlot = call.slots.size();
  if (!step.offsets.empty() && call.offsets.empty()) call.offsets.assign(call.slots.size(), 0);
  call.slots.insert(call.slots.end(), step.slots.begin(), step.slots.end());
  if (!call.offsets.empty()) {
    if (step.offsets.empty())
      call.offsets.insert(call.offsets.end(), step.slots.size(), 0);
    else
      call.offsets.insert(call.offsets.end(), step.offsets.begin(), step.offsets.end());
  }
  call.epilogueArgs = step.args;
  return true;
}

}  // namespace

runtime::Executable compileGraph(const ir::Graph& graph, Device device, std::span<const ir::Strides> inputStrides,
                                 std::span<const Donation> donations, std::span<const ir::Strides> outputStrides) {
  profiler::RecordFunction range("codegen", "compile_graph");
  std::optional<profiler::RecordFunction> lowering(std::in_place, "codegen", "lowering");
  const Target& target = targetFor(device);
  struct PendingKernel {
    size_t step;  ///< its KernelStep in exe.steps, or the LibraryStep whose epilogue it is
    Kernel kernel;
  };
  // The last library node whose step may take an epilogue (a CPU matmul
  // or forward convolution), and its function with one (Note [Matmul
  // epilogues in compiled programs]).
  const ir::Node* lastProducer = nullptr;
  runtime::LibraryFn lastWithEpilogue = nullptr;
  std::vector<PendingKernel> pending;
  for (const ir::Node* n : graph.nodes()) {
    std::string why;
    KILN_CHECK(supports(*n, device, &why), "codegen: cannot run {} on {}: {}", ir::opName(n->op()), device.str(), why);
  }
  KILN_ASSERT(inputStrides.empty() || static_cast<int>(inputStrides.size()) == graph.numInputs(),
              "{} input layouts for a graph of {} inputs", inputStrides.size(), graph.numInputs());
  runtime::Executable exe;
  exe.device = device;
  std::unordered_map<const ir::Value*, int> slot;
  std::unordered_map<const ir::Value*, ir::Layout> layout;  // of graph inputs; everything else is contiguous
  auto newSlot = [&](const ir::Value* v, int64_t elements) {
    exe.slots.push_back({static_cast<size_t>(elements * itemSize(v->type().dtype)), v->type().device});
    return slot[v] = static_cast<int>(exe.slots.size()) - 1;
  };
  for (int i = 0; i < graph.numInputs(); ++i) {
    const ir::Value* in = graph.input(i);
    ir::Layout l = inputStrides.empty() ? ir::contiguousLayout(in->type().shape) : ir::Layout{inputStrides[i], 0};
    KILN_ASSERT(l.strides.size() == in->type().shape.size(), "strides {} for input {}", ir::shapeStr(l.strides),
                in->type().str());
    exe.inputSlots.push_back(newSlot(in, ir::extent(in->type().shape, l.strides)));
    if (graph.isOutput(in))
      KILN_CHECK(ir::isContiguous(in->type().shape, l.strides),
                 "codegen: a graph that returns a non-contiguous input ({} with strides {}) is not supported",
                 in->type().str(), ir::shapeStr(l.strides));
    layout.emplace(in, std::move(l));
  }

  // Note [Epilogue inputs first]: the order the steps run in.
  const std::vector<const ir::Node*> order = stepOrder(graph, device);
  // Note [Donated buffers]: which results may take which input's buffer.
  std::unordered_map<const ir::Node*, size_t> position;
  std::optional<size_t> lastCheck;  // of the nodes that may fail on their data
  for (const ir::Node* n : order) {
    if (ir::checksData(n->op())) lastCheck = position.size();
    position.emplace(n, position.size());
  }
  std::unordered_map<const ir::Value*, const ir::Value*> donor;  // result -> graph input
  for (const Donation& d : donations) {
    KILN_ASSERT(d.input >= 0 && d.input < graph.numInputs() && d.output >= 0 &&
                    d.output < static_cast<int>(graph.outputs().size()),
                "donation of input {} to output {} in a graph of {} inputs and {} outputs", d.input, d.output,
                graph.numInputs(), graph.outputs().size());
    const ir::Value* in = graph.input(d.input);
    const ir::Value* out = graph.outputs()[static_cast<size_t>(d.output)];
    const ir::Node* producer = out->node();
    if (!producer || producer->op() != ir::Op::fusion || graph.isOutput(in) || donor.count(out)) continue;
    if (lastCheck && position.at(producer) < *lastCheck) continue;
    if (std::count(graph.outputs().begin(), graph.outputs().end(), out) != 1) continue;
    if (std::count(producer->inputs().begin(), producer->inputs().end(), in) != 1) continue;
    if (in->type() != out->type() || readAfter(in, position, position.at(producer))) continue;
    if (!inputStrides.empty() && !ir::isContiguous(in->type().shape, inputStrides[static_cast<size_t>(d.input)]))
      continue;
    donor.emplace(out, in);
  }

  int collectives = 0;
  std::vector<int> donatedSlots;  // inputs updated in place
  for (const ir::Node* n : order) {
    // The matmul or convolution whose step is the last one, if any (it may
    // take the next kernel as its epilogue): constants and views
    // make no step.
    const ir::Node* producerBefore = lastProducer;
    if (n->op() != ir::Op::constant && !ir::isViewOp(n->op())) lastProducer = nullptr;
    if (n->op() == ir::Op::constant) {
      for (const ir::Use& use : n->output()->uses())
        KILN_ASSERT(use.user->op() == ir::Op::fusion, "top-level constant read by {}", ir::opName(use.user->op()));
      KILN_CHECK(!graph.isOutput(n->output()), "codegen: a graph that returns a constant is not supported yet");
      continue;
    }
    std::vector<ir::Layout> inputs;
    for (const ir::Value* in : n->inputs()) {
      auto it = layout.find(in);
      inputs.push_back(it != layout.end() ? it->second : ir::contiguousLayout(in->type().shape));
    }
    if (ir::isViewOp(n->op())) {
      // Note [Library calls read views]: no step, the same slot seen
      // through the view's strides and offset.
      std::optional<ir::Layout> moved = ir::movedLayout(n->op(), n->attrs(), n->input(0)->type().shape, inputs[0]);
      KILN_CHECK(moved.has_value(), "codegen: {} of {} cannot be read as a view (run fuse-elementwise first)",
                 ir::opName(n->op()), n->input(0)->type().str());
      slot[n->output()] = slot.at(n->input(0));
      layout[n->output()] = std::move(*moved);
      continue;
    }
    if (n->info().kind == ir::OpKind::library) {
      LoweredCall lowered = lowerLibrary(*n, inputs, target.libraries());
      runtime::LibraryStep step;
      step.name = std::move(lowered.name);
      step.fn = lowered.fn;
      step.recordable = lowered.recordable;
      step.args = std::move(lowered.args);
      bool offsets = false;
      for (int i = 0; i < n->numInputs(); ++i) {
        step.slots.push_back(slot.at(n->input(i)));
        step.offsets.push_back(inputs[i].offset * itemSize(n->input(i)->type().dtype));
        offsets = offsets || inputs[i].offset != 0;
      }
      step.slots.push_back(newSlot(n->output(), n->output()->type().numel()));
      step.offsets.push_back(0);
      if (!offsets) step.offsets.clear();
      logLibraryStep(step.name, step.args);
      lastProducer = device.isCpu() && lowered.withEpilogue ? n : nullptr;
      lastWithEpilogue = lowered.withEpilogue;
      exe.steps.emplace_back(std::move(step));
      continue;
    }
    if (n->info().kind == ir::OpKind::collective) {
      // In place in its operand's slot when nothing else reads that (Note
      // [Collective steps] in runtime/executable_collectives.cpp), else in
      // a copy of it.
      const ir::Value* in = n->input(0);
      const int inSlot = slot.at(in);
      KILN_CHECK(ir::isContiguous(in->type().shape, inputs[0].strides),
                 "codegen: {} of a non-contiguous operand ({} with strides {}) is not supported", ir::opName(n->op()),
                 in->type().str(), ir::shapeStr(inputs[0].strides));
      const bool inPlace = !graph.isOutput(in) && in->uses().size() == 1 && inputs[0].offset == 0 &&
                           std::find(exe.inputSlots.begin(), exe.inputSlots.end(), inSlot) == exe.inputSlots.end();
      int outSlot = inSlot;
      if (inPlace) {
        slot[n->output()] = inSlot;
      } else {
        outSlot = newSlot(n->output(), n->output()->type().numel());
        const int64_t offset = inputs[0].offset * itemSize(in->type().dtype);
        runtime::CopyStep copy{fmt::format("copy_{}", ir::opName(n->op())),
                               {inSlot, outSlot},
                               static_cast<size_t>(n->output()->type().numel() * itemSize(in->type().dtype)),
                               {}};
        if (offset != 0) copy.offsets = {offset, 0};
        logCopyStep(copy.name, copy.bytes, copy.offsets);
        exe.steps.emplace_back(std::move(copy));
      }
      exe.steps.emplace_back(lowerCollective(*n, outSlot, collectives++));
      continue;
    }
    const std::vector<ir::Layout> outputs = outputLayouts(graph, *n, outputStrides);
    std::vector<LoweredKernel> kernels = lowerKernels(*n, inputs, outputs);
    // Note [Matmul epilogues in compiled programs]: a kernel that may run as
    // the last matmul's epilogue writes its result into the matmul's.
    const ir::Value* product = producerBefore ? producerBefore->output() : nullptr;
    const bool epilogueInPlace = product && outputs.empty() && n->numOutputs() == 1 && kernels.size() == 1 &&
                                 !kernels[0].kernel.isReduction() && plainCopyBytes(kernels[0]) < 0 &&
                                 !graph.isOutput(product) && product->uses().size() == 1 &&
                                 n->output()->type() == product->type() && !donor.count(n->output());
    std::vector<int> outSlots;
    for (int j = 0; j < n->numOutputs(); ++j) {
      const ir::Value* out = n->output(j);
      if (!outputs.empty()) {
        outSlots.push_back(newSlot(out, ir::extent(out->type().shape, outputs[static_cast<size_t>(j)].strides)));
        continue;
      }
      if (epilogueInPlace) {
        const auto it = std::find(n->inputs().begin(), n->inputs().end(), product);
        if (donateInPlace(kernels[0], static_cast<int>(it - n->inputs().begin()), j)) {
          outSlots.push_back(slot[out] = slot.at(product));
          continue;
        }
      }
      auto d = donor.find(out);
      if (d != donor.end() && kernels.size() == 1 && !kernels[0].kernel.isReduction()) {
        const auto it = std::find(n->inputs().begin(), n->inputs().end(), d->second);
        if (donateInPlace(kernels[0], static_cast<int>(it - n->inputs().begin()), j)) {
          donatedSlots.push_back(slot.at(d->second));
          outSlots.push_back(slot[out] = slot.at(d->second));
          continue;
        }
      }
      outSlots.push_back(newSlot(out, out->type().numel()));
    }
    for (LoweredKernel& lowered : kernels) {
      if (const int64_t bytes = plainCopyBytes(lowered); bytes >= 0) {
        // Note [Contiguous copies are copy steps]
        runtime::CopyStep copy{lowered.kernel.name, {}, static_cast<size_t>(bytes), {}};
        for (const ParamBinding& b : lowered.bindings) {
          copy.slots.push_back(b.output ? outSlots.at(b.index) : slot.at(n->input(b.index)));
          copy.offsets.push_back(b.offset * itemSize(lowered.kernel.params[0].dtype));
        }
        if (copy.offsets[0] == 0 && copy.offsets[1] == 0) copy.offsets.clear();
        logCopyStep(copy.name, copy.bytes, copy.offsets);
        exe.steps.emplace_back(std::move(copy));
        continue;
      }
      runtime::KernelStep step;
      step.name = lowered.kernel.name;
      // Its kernel is compiled below, with the program's others (Note
      // [Kernels compile in parallel]).
      bool offsets = false;
      for (size_t p = 0; p < lowered.bindings.size(); ++p) {
        const ParamBinding& b = lowered.bindings[p];
        step.slots.push_back(b.output ? outSlots.at(b.index) : slot.at(n->input(b.index)));
        step.offsets.push_back(b.offset * itemSize(lowered.kernel.params[p].dtype));
        offsets = offsets || b.offset != 0;
      }
      if (!offsets) step.offsets.clear();
      step.shape = target.launchShape(lowered.kernel, lowered.launch);
      logKernelStep(lowered, step.shape);
      step.args = std::move(lowered.launch.args);
      if (producerBefore && kernels.size() == 1 &&
          asEpilogue(graph, *producerBefore, lastWithEpilogue, *n, lowered, step,
                     std::get<runtime::LibraryStep>(exe.steps.back()))) {
        logEpilogue(std::get<runtime::LibraryStep>(exe.steps.back()).name, step.name);
        pending.push_back({exe.steps.size() - 1, std::move(lowered.kernel)});
        continue;
      }
      pending.push_back({exe.steps.size(), std::move(lowered.kernel)});
      exe.steps.emplace_back(std::move(step));
    }
  }
  for (const ir::Value* out : graph.outputs()) exe.outputSlots.push_back(slot.at(out));
  // Note [Kernels compile in parallel]: the program's kernels at once.
  std::vector<const Kernel*> kernels;
  for (const PendingKernel& p : pending) kernels.push_back(&p.kernel);
  lowering.reset();
  const std::vector<std::shared_ptr<const CompiledKernel>> compiled = KernelCache::instance().getAll(kernels, device);
  for (size_t i = 0; i < pending.size(); ++i) {
    if (auto* call = std::get_if<runtime::LibraryStep>(&exe.steps[pending[i].step]))
      call->epilogue = compiled[i]->module;
    else
      std::get<runtime::KernelStep>(exe.steps[pending[i].step]).kernel = compiled[i]->module;
  }
  if (collectives > 0) scheduleCollectives(exe, donatedSlots);  // Note [Scheduling collectives]
  planMemory(exe);                                              // Note [The memory plan is made over steps]
  return exe;
}

}  // namespace kiln::codegen

// Kernel: the target-independent form of a fused group (DESIGN.md §6).
//
// A Kernel is an iteration domain of `rank` dimensions, parameters (buffers:
// inputs first, then outputs) and a straight-line body of scalar
// instructions run once per element of the domain: loads of the parameters
// at the current index, constants, elementwise ops (whose meaning is
// ir/scalar_formulas.h) and stores. Renderers map it onto a target:
// codegen/llvm_renderer.cpp (CPU) and codegen/c_renderer.h (CUDA C and
// OpenCL C, dialects of one C renderer).
//
// Sizes are never part of a kernel: they and the strides are integer
// arguments, so one compiled kernel serves every shape with the same
// signature (ops, dtypes, rank, inner-stride pattern). Argument layout:
//
//   args[0 .. rank)                          sizes of the domain, outermost first
//   args[rank + p*rank .. rank + (p+1)*rank) strides of parameter p, in elements
//                                            (0 where p is broadcast)
//   args[rank + (P+s)*rank .. )              strides of index space s (P params)
//
// An index space gives the body a linear index instead of a buffer: the
// `index` instruction is sum(i_d * stride_d) over the domain's multi-index,
// computed like a parameter's offset. Lowering makes one for each shape
// whose row-major element index an op reads (dropout: Note [Dropout
// draws]), with the contiguous strides of that shape taken over the domain,
// so the index is the element's position in the op's result whatever
// coalescing and broadcasting did to the domain.
//
// The innermost stride of each parameter (and index space) is also a compile-time class
// (zero, one, any): with zero or one the renderer uses the constant and the
// inner loop vectorizes; with any it reads the argument.
//
// CPU ABI (runtime::CpuKernelFn): `void name(void* const* buffers,
// const int64_t* args, int64_t begin, int64_t end)` computes the elements
// [begin, end) of the row-major flattened domain; any split is valid (the
// runtime splits across threads), including one that starts or ends mid-row.
//
// GPU ABI (codegen/c_renderer.h), the same in both dialects: the buffers,
// one pointer per parameter in order, then one struct passed by value,
//
//   struct KilnArgs_<name> { I sizes[rank]; I strides[P][rank];
//                            [I indexStrides[S][rank];]   // only when S > 0
//                            I numel;
//                            [I offsets[P];] };           // OpenCL only
//
// (I a 64-bit integer), so its words are LaunchArgs::args, then numel, then
// for OpenCL one element offset per buffer (codegen::packGpuArgs):
//   CUDA C:   extern "C" __global__ void name(const T0* __restrict__ p0, ...,
//             Tk* __restrict__ pk, struct KilnArgs_<name> a)
//             The runtime offsets each pointer itself (a device pointer plus
//             bytes is a device pointer).
//   OpenCL C: __kernel void name(__global const T0* restrict p0, ...,
//             __global Tk* restrict pk, struct KilnArgs_<name> a)
//             Each pk is a whole cl_mem (a cl_mem cannot be offset on the
//             host without an aligned sub-buffer); the kernel adds
//             a.offsets[k] (elements) to pk first.
// Every kernel loops with the stride of the whole launch, so any number of
// work-groups is valid, and records the launch shape it expects
// (codegen::GpuLaunch: work-items per group, what a work-item or group
// takes per step, shared memory). Elementwise kernels: a grid-stride loop
// over [0, numel).
//
// Reductions. A kernel with reduceRank > 0 splits its domain into outer
// dims (the first rank - reduceRank, at least one) and reduced dims (the
// last reduceRank, at least one): it computes one output row per element of
// the outer domain, reducing over the reduced domain (the "row"). Lowering
// (codegen/lowering_reduction.cpp, through codegen/kernel_builder.h) moves
// the reduced dims innermost and coalesces the two groups separately. Each value of the body is either
// outer (the same for the whole row: constants, `extent`, loads of `outer`
// params, results of `reduce`, and ops on those) or a row value (varies
// along the row: loads of the other params and ops on them). A `reduce`
// instruction folds a row value over the row into an outer one: sum, max,
// min (IEEE maximum/minimum: NaN propagates) or argmax (the row index, i64,
// of the first maximum or first NaN). The body reads as
//
//   prologue (row values) -> reduce -> epilogue (outer values) -> stores
//
// and may chain: a row value that uses a reduction's result (x - max(x))
// is computed by a further pass over the row (stages, see KernelStages
// below). So the form holds softmax, log-softmax and layer norm as one
// kernel each, as the fuse-reductions pass builds them (docs/fusion.md).
// Stores of outer values write the output row's element; stores of row
// values write along the row. For a reduction kernel numel is the number
// of output rows, and the CPU ABI's [begin, end) is a range of output
// rows: a thread computes whole rows. On a GPU one work-group computes a
// row (groups stride over rows): its work-items stride the row and their
// partial results meet in a tree (CUDA: warp shuffles, then shared memory
// across warps; OpenCL: the same tree in local memory: Note [One reduction
// tree] in codegen/c_reduction.cpp); the group size is codegen::kGpuLocalSize.
// docs/ops.md, "Reductions", states the accumulation order and the bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attributes.h"
#include "ir/op_registry.h"
#include "runtime/dtype.h"

namespace kiln::codegen {

enum class InnerStride : uint8_t { zero, one, any };

struct KernelParam {
  DType dtype = DType::f32;
  bool output = false;
  InnerStride inner = InnerStride::one;
  /// Reduction kernels: indexed by the outer dims only (stride 0 along the
  /// row), read or written once per output row.
  bool outer = false;
  /// An input the kernel also stores into, each element where it loaded it
  /// (a buffer donated to a result: Note [Donated buffers] in
  /// codegen/compile_graph.cpp). Elementwise kernels only.
  bool inout = false;
};

/// How a `reduce` instruction folds a row: IEEE add (floats) or wrapping
/// add (integers); IEEE 754-2019 maximum/minimum (NaN propagates, -0 < +0;
/// or/and on bool); argmax (the index of the first maximum or first NaN).
enum class ReduceOp : uint8_t { sum, max, min, argmax };
std::string_view reduceOpName(ReduceOp op);

/// One scalar instruction; operands name earlier instructions by index.
struct ScalarInstr {
  /// extent: the number of elements of a row (reduction kernels), as dtype.
  /// index: the linear index (i64) of the element in index space `param`
  /// (Kernel::indexSpaces); an op that reads the element's index
  /// (ir::usesElementIndex) takes one as its last operand. In a reduction
  /// kernel an index space is walked like a row parameter (outer, then
  /// reduced dims), and its index is a row value.
  enum class Kind : uint8_t { load, constant, op, store, reduce, extent, index };
  Kind kind = Kind::op;
  ir::Op op = ir::Op::add;            ///< for Kind::op
  ReduceOp reduceOp = ReduceOp::sum;  ///< for Kind::reduce
  std::vector<int> operands;          ///< for Kind::op: inputs; Kind::store, Kind::reduce: {value}
  int param = -1;                     ///< for load and store; for index, the index space
  /// For Kind::constant: the value in the form of its dtype (an int for
  /// integers and bool, kept exact; a double for floats: ir::constantValue).
  ir::Number value = 0.0;
  ir::Attributes attrs;  ///< for Kind::op: the node's attributes
  /// Result dtype (load: the param's; constant, op; store: the param's;
  /// reduce: the accumulator's, its operand's except argmax's i64).
  DType dtype = DType::f32;
};

/// Builders for kernel bodies: `using namespace kiln::codegen::instr;`, then
/// `body = {load(0), constant(2.0), op(ir::Op::mul, {0, 1}), store(1, 2)}`.
namespace instr {
ScalarInstr load(int param, DType dtype = DType::f32);
/// A constant of `dtype`, `value` converted to the form of that dtype
/// (ir::constantValue: integers stay exact).
ScalarInstr constant(ir::Number value, DType dtype = DType::f32);
ScalarInstr op(ir::Op op, std::vector<int> operands, ir::Attributes attrs = {}, DType dtype = DType::f32);
ScalarInstr store(int param, int value, DType dtype = DType::f32);
ScalarInstr reduce(ReduceOp op, int value, DType dtype = DType::f32);
ScalarInstr extent(DType dtype = DType::f32);
ScalarInstr index(int space);
}  // namespace instr

struct Kernel {
  std::string name;  ///< a C identifier, unique per signature
  int rank = 1;      ///< >= 1
  /// The innermost dims reduced (0: an elementwise kernel); < rank.
  int reduceRank = 0;
  std::vector<KernelParam> params;  ///< inputs first, then outputs
  /// Index spaces (see above): the inner stride class of each; their
  /// strides follow the params' in the arguments.
  std::vector<InnerStride> indexSpaces;
  std::vector<ScalarInstr> body;
  /// Reduction kernels with stashed row values (KernelStages::stashed): a
  /// bound on the row length of every launch, a power of two that sizes
  /// the CPU renderer's stash; 0 when there is none (no stash, or rows too
  /// long for one: every pass recomputes).
  int64_t maxRowLength = 0;

  int numParams() const { return static_cast<int>(params.size()); }
  int numIndexSpaces() const { return static_cast<int>(indexSpaces.size()); }
  /// Params and index spaces: the number of stride rows in the arguments.
  int numStrided() const { return numParams() + numIndexSpaces(); }
  bool isReduction() const { return reduceRank > 0; }
  int outerRank() const { return rank - reduceRank; }
  /// A text form of everything the generated code depends on; equal
  /// signatures give identical code. The kernel cache keys on its hash.
  std::string signature() const;
  /// FNV-1a 64 of signature(): stable across processes and machines.
  uint64_t hash() const;
  /// Human-readable listing, for irdump and failure messages.
  std::string str() const;
};

/// Checks what every renderer relies on: a C identifier for a name, rank
/// >= 1, operands that are earlier values, loads from inputs and stores to
/// outputs of their dtypes, arities, and op dtypes that are the registry's
/// (ir::inferType) for the operands'; an index instruction as the last
/// operand of each op that reads the element's index, and only there; for reductions, at least one reduce,
/// of a row value, of a dtype it takes, and outer params only where a row
/// value is not needed (no row value stored into an outer param). Throws kiln::InternalError naming the
/// kernel otherwise: a malformed kernel is a kiln bug.
void checkKernel(const Kernel& kernel);

/// The schedule of a reduction kernel's body, which both renderers follow.
/// A value's stage is the number of passes over the row that must finish
/// before it exists: loads, constants and `extent` are stage 0, an op takes
/// its operands' largest stage, a `reduce` is its operand's stage + 1. Pass
/// l computes the reductions of stage-l row values and stores the stage-l
/// row values; outer values of stage l are computed before pass l (after
/// the last pass when l == numPasses), and stores of outer values after
/// the last pass. Every pass reloads and recomputes the row values it needs.
struct KernelStages {
  std::vector<bool> row;   ///< per instruction: a row value (or a store of one into a row param)
  std::vector<int> stage;  ///< per instruction
  int numPasses = 0;
  /// Per pass: the row instructions it evaluates (loads, ops, its reduces
  /// and row stores), in body order.
  std::vector<std::vector<int>> pass;
  /// Per pass, and one more for after the last: the outer instructions
  /// computed before it (constants, extents, outer loads, ops on outer
  /// values; after the last pass also the outer stores), in body order.
  std::vector<std::vector<int>> before;
  /// Per instruction: a row value that a later pass than its first needs
  /// again and that costs enough to recompute (dropout's draws, exp, ...)
  /// that a renderer may keep it for the row instead (Note [Stashed row
  /// values] in codegen/kernel.cpp).
  std::vector<bool> stashed;
  /// Per instruction: the first pass that evaluates it, or -1.
  std::vector<int> firstPass;
};
/// The stages of reduction kernel `kernel` (which checkKernel accepted).
KernelStages kernelStages(const Kernel& kernel);

/// Launch arguments for a kernel over concrete shapes (see the layout above).
struct LaunchArgs {
  std::vector<int64_t> args;
  int64_t numel = 0;
};

}  // namespace kiln::codegen

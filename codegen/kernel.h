// Kernel: the target-independent form of a fused group (DESIGN.md §6).
//
// A Kernel is an iteration domain of `rank` dimensions, parameters (buffers:
// inputs first, then outputs) and a straight-line body of scalar
// instructions run once per element of the domain: loads of the parameters
// at the current index, constants, elementwise ops (whose meaning is
// ir/scalar_formulas.h) and stores. Renderers map it onto a target:
// codegen/llvm_renderer.cpp (CPU) and codegen/cuda_renderer.cpp (CUDA C).
//
// Sizes are never part of a kernel: they and the strides are integer
// arguments, so one compiled kernel serves every shape with the same
// signature (ops, dtypes, rank, inner-stride pattern). Argument layout:
//
//   args[0 .. rank)                          sizes of the domain, outermost first
//   args[rank + p*rank .. rank + (p+1)*rank) strides of parameter p, in elements
//                                            (0 where p is broadcast)
//
// The innermost stride of each parameter is also a compile-time class
// (zero, one, any): with zero or one the renderer uses the constant and the
// inner loop vectorizes; with any it reads the argument.
//
// CPU ABI (runtime::CpuKernelFn): `void name(void* const* buffers,
// const int64_t* args, int64_t begin, int64_t end)` computes the elements
// [begin, end) of the row-major flattened domain; any split is valid (the
// runtime splits across threads), including one that starts or ends mid-row.
//
// CUDA ABI: `extern "C" __global__ void name(T0* p0, ..., Tk* pk, KilnArgs a)`
// with `struct KilnArgs { long long sizes[rank]; long long strides[P][rank];
// long long numel; }` passed by value: a grid-stride loop over [0, numel).
#pragma once

#include <cstdint>
#include <string>
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
};

/// One scalar instruction; operands name earlier instructions by index.
struct ScalarInstr {
  enum class Kind : uint8_t { load, constant, op, store };
  Kind kind = Kind::op;
  ir::Op op = ir::Op::add;    ///< for Kind::op
  std::vector<int> operands;  ///< for Kind::op: inputs; Kind::store: {value}
  int param = -1;             ///< for load and store
  double value = 0.0;         ///< for Kind::constant
  ir::Attributes attrs;       ///< for Kind::op: the node's attributes
  DType dtype = DType::f32;   ///< result dtype (load: the param's; constant, op; store: the param's)
};

/// Builders for kernel bodies: `using namespace kiln::codegen::instr;`, then
/// `body = {load(0), constant(2.0), op(ir::Op::mul, {0, 1}), store(1, 2)}`.
namespace instr {
ScalarInstr load(int param, DType dtype = DType::f32);
ScalarInstr constant(double value, DType dtype = DType::f32);
ScalarInstr op(ir::Op op, std::vector<int> operands, ir::Attributes attrs = {}, DType dtype = DType::f32);
ScalarInstr store(int param, int value, DType dtype = DType::f32);
}  // namespace instr

struct Kernel {
  std::string name;                 ///< a C identifier, unique per signature
  int rank = 1;                     ///< >= 1
  std::vector<KernelParam> params;  ///< inputs first, then outputs
  std::vector<ScalarInstr> body;

  int numParams() const { return static_cast<int>(params.size()); }
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
/// (ir::inferType) for the operands'. Throws kiln::InternalError naming the
/// kernel otherwise: a malformed kernel is a kiln bug.
void checkKernel(const Kernel& kernel);

/// Launch arguments for a kernel over concrete shapes (see the layout above).
struct LaunchArgs {
  std::vector<int64_t> args;
  int64_t numel = 0;
};

}  // namespace kiln::codegen

// Kernels of every kind the GPU renderer must handle, and launches of them
// over concrete buffers, shared by the tests that build the rendered source
// (gpu_build_test.cpp: NVRTC and PoCL), that run it on PoCL
// (opencl_run_test.cpp) and that run it on an NVIDIA GPU (tests/gpu/): every
// elementwise op on every dtype, broadcasts with each inner-stride class,
// strided ranks, dropout's index spaces, rand and randn, vectorized
// accesses, integer constants beyond 2^53 (Note [Integer constants are
// exact]), reductions of every op and dtype (argmax included), several
// passes, two reduced dims,
// column sums, and the kernels kiln::compile makes of softmax, log_softmax,
// layer_norm, relu -> dropout -> layer_norm and their backwards.
//
// A run case is checked against the CPU backend running the same kernel on
// the same buffers (the CPU kernels are checked against the C++ evaluator
// elsewhere), bit for bit, except where the order of a float sum differs
// between the CPU and the GPU tree: plain sums are checked bit for bit
// against a host model of the GPU's order (Note [One reduction tree] in
// codegen/c_reduction.cpp), fused kernels within a tolerance.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/c_renderer.h"
#include "codegen/kernel.h"
#include "codegen/lowering.h"
#include "unit/codegen/dtype_cases.h"

namespace kiln::codegen::testing {

/// Hand-made elementwise kernels of every kind.
std::vector<Kernel> elementwiseKernels();
/// Hand-made reduction kernels: every reduce op on every dtype it takes,
/// several passes, row stores, two reduced dims, outer inputs.
std::vector<Kernel> reductionKernels();

/// A kernel lowered from a traced program, with the types of the fusion
/// node's inputs and results that its parameters bind to.
struct LoweredCase {
  std::string program;
  LoweredKernel lowered;
  std::vector<ir::TensorType> inputs, results;
};
/// The kernels kiln::compile makes of softmax, log_softmax, layer_norm (f32
/// and f16), relu -> dropout -> layer_norm and its backward, cross_entropy,
/// a layer norm backward, a column sum, transposed/sliced elementwise reads
/// and a cat.
std::vector<LoweredCase> loweredCases();

/// Every kernel of the three lists above (once each: names are unique).
std::vector<Kernel> kernelKinds();
/// kernelKinds() and a one-op kernel per OpCase of dtype_cases.h.
std::vector<Kernel> allGpuKernels();

/// One launch of a kernel over concrete buffers.
struct RunCase {
  std::string label;
  Kernel kernel;
  LaunchArgs launch;
  std::vector<Buffer> buffers;   ///< inputs filled, outputs filled with a pattern
  std::vector<int> bufferOf;     ///< per kernel parameter: its buffer (two parameters may read one)
  std::vector<int64_t> offsets;  ///< per kernel parameter: where it starts in its buffer, in elements
  /// Outputs may differ from the reference by this much, relative (0: bit
  /// for bit; NaN equals NaN).
  double tolerance = 0;
  /// Fills the expected buffers (given as copies of `buffers`); the CPU
  /// backend running `kernel` when empty.
  std::function<void(const RunCase&, std::vector<Buffer>&)> reference;
};
/// How many ops run on each dtype: `full` every op on every dtype; `sampled`
/// every op on f32, f64 and the integer and bool dtypes but a sample on f16
/// and bf16, whose ops are f32's formulas rounded after each (PoCL spends
/// about a second of CPU per dtype's ops compiling: the OpenCL tests must
/// stay within their budget).
enum class Coverage : uint8_t { sampled, full };
/// The run cases come in groups, each one program (so that the tests of
/// the groups can build in parallel):
enum class CaseGroup : uint8_t {
  ops,          ///< the ops `coverage` says on each dtype, casts between every pair
  elementwise,  ///< every kind of elementwise kernel of elementwiseKernels()
  reductions,   ///< every reduction on every dtype, sums in their own dtype, two reduced dims
  lowered,      ///< the kernels of loweredCases()
};
std::vector<RunCase> runCases(CaseGroup group, Coverage coverage = Coverage::full);

/// A device that builds rendered kernels and launches them: PoCL through
/// OpenCL, a GPU through the CUDA driver.
class KernelDevice {
 public:
  virtual ~KernelDevice() = default;
  virtual const CDialect& dialect() const = 0;
  virtual std::string name() const = 0;
  /// Builds the kernels as one program.
  virtual void build(const std::vector<RenderedKernel>& kernels) = 0;
  /// Runs built kernel `k` on `groups` work-groups of k.launch.localSize
  /// over `buffers` (copied in, then back), parameter p bound to
  /// buffers[bufferOf[p]] at element offset offsets[p] (in the args struct
  /// or on the pointer, as k's dialect wants).
  virtual void run(const RenderedKernel& k, const Kernel& kernel, std::vector<Buffer>& buffers,
                   const std::vector<int>& bufferOf, const std::vector<int64_t>& offsets, const LaunchArgs& launch,
                   int64_t groups) = 0;
};

/// Renders the cases for `device`, builds them as one program, runs each
/// with few work-groups (so that every loop strides more than once) and
/// checks every output against the reference (ADD_FAILURE per mismatch).
/// Returns the number of cases run.
int runAndCompare(KernelDevice& device, const std::vector<RunCase>& cases);

}  // namespace kiln::codegen::testing

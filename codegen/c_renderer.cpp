// The C-family GPU renderer (see codegen/c_renderer.h): elementwise kernels,
// and what every kernel shares — the args struct, the kernel's opening and
// index splitting — in a dialect (codegen/c_dialect.h). A builder for
// ir/scalar_formulas.h (codegen/c_builder.h) writes one `const T vN = ...;`
// line per value, inside a grid-stride loop that turns the linear index
// into one offset per parameter. Reductions are codegen/c_reduction.cpp.
#include "codegen/c_renderer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "codegen/c_builder.h"
#include "ir/scalar_formulas.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace ccg {

std::string argsStruct(const Kernel& kernel, const CDialect& d, const char* numelComment) {
  const int rank = kernel.rank, numParams = kernel.numParams();
  const char* i64 = d.i64();
  // The layout is LaunchArgs::args, numel, then the offsets (codegen/kernel.h).
  std::string out = fmt::format("struct KilnArgs_{} {{\n  {} sizes[{}];\n  {} strides[{}][{}];\n", kernel.name, i64,
                                rank, i64, numParams, rank);
  if (kernel.numIndexSpaces() > 0)
    out += fmt::format("  {} indexStrides[{}][{}];\n", i64, kernel.numIndexSpaces(), rank);
  out += fmt::format("  {} numel;{}\n", i64, numelComment);
  if (d.offsetsInArgs()) out += fmt::format("  {} offsets[{}];  // elements, added to each buffer\n", i64, numParams);
  return out + "};\n";
}

std::string kernelOpening(const Kernel& kernel, const CDialect& d, int requiredLocalSize) {
  std::string out = d.kernelHead(requiredLocalSize) + kernel.name + "(";
  for (int p = 0; p < kernel.numParams(); ++p) {
    const KernelParam& param = kernel.params[p];
    out += d.bufferParam(storageCType(param.dtype, d), param.output || param.inout, p) + ", ";
  }
  out += fmt::format("struct KilnArgs_{} a) {{\n", kernel.name);
  if (d.offsetsInArgs())
    for (int p = 0; p < kernel.numParams(); ++p) out += fmt::format("  p{0} += a.offsets[{0}];\n", p);
  return out;
}

std::string splitIndex(const CDialect& d, const std::string& indent, const std::string& linear, int first, int last,
                       const std::string& prefix, const std::string& rest) {
  // 64-bit throughout: numel and offsets may pass 2^31.
  if (first == last) return fmt::format("{}const {} {}{} = {};\n", indent, d.i64(), prefix, first, linear);
  std::string out = fmt::format("{}{} {} = {};\n", indent, d.i64(), rest, linear);
  for (int dim = last; dim > first; --dim)
    out += fmt::format("{0}const {1} {2}{3} = {4} % a.sizes[{3}];\n{0}{4} /= a.sizes[{3}];\n", indent, d.i64(), prefix,
                       dim, rest);
  return out + fmt::format("{}const {} {}{} = {};\n", indent, d.i64(), prefix, first, rest);
}

}  // namespace ccg

namespace {

using namespace ccg;

/// The offset expression of row `p` of `array` (`strides`: parameter p;
/// `indexStrides`: index space p) from the per-dimension indices
/// i0..i{rank-1}. The innermost stride is the compile-time class `innerClass`
/// the kernel was specialized for; the outer ones are arguments.
std::string offsetExpr(const Kernel& kernel, const char* array, int p, InnerStride innerClass) {
  std::vector<std::string> terms;
  const int inner = kernel.rank - 1;
  for (int d = 0; d < inner; ++d) terms.push_back(fmt::format("i{} * a.{}[{}][{}]", d, array, p, d));
  switch (innerClass) {
    case InnerStride::zero: break;
    case InnerStride::one: terms.push_back(fmt::format("i{}", inner)); break;
    case InnerStride::any: terms.push_back(fmt::format("i{} * a.{}[{}][{}]", inner, array, p, inner)); break;
  }
  if (terms.empty()) return "0";
  std::string expr = terms[0];
  for (size_t t = 1; t < terms.size(); ++t) expr += " + " + terms[t];
  return expr;
}

/// Note [Vectorized elementwise kernels]
/// A rank-1 kernel whose parameters all have inner stride one or zero (a
/// contiguous chain, scalars broadcast) reads and writes each contiguous
/// parameter four elements at a time, like PyTorch's vectorized elementwise
/// kernels: each work-item of the grid-stride loop takes four consecutive
/// elements, then a scalar loop takes the numel % 4 left. The four
/// elements are computed by the same scalar formulas, one after the other,
/// so the results are those of the scalar loop. CUDA reads a 16-byte
/// vector for 4-byte dtypes (float4-like; 8 bytes for f16/bf16, 4 for
/// bool, two 16-byte accesses for 8-byte dtypes), which must be aligned to
/// its size: whether it is depends on the pointers (a view's offset moves
/// them), so the kernel checks at run time that every contiguous parameter
/// is aligned and otherwise runs the scalar loop alone. OpenCL's vload4 and
/// vstore4 need only the element's alignment, so there is no check. A
/// dropout whose index space is the element's index (rank 1, inner stride
/// one) and whose seed and offset are scalars draws its group's Philox
/// block once for the four elements (Note [Dropout draws]): element i's
/// group is i / 4 and the work-item's first element is a multiple of 4.
bool vectorizes(const Kernel& kernel) {
  if (kernel.isReduction() || kernel.rank != 1) return false;
  for (const KernelParam& p : kernel.params)
    if (p.inner == InnerStride::any) return false;
  for (InnerStride s : kernel.indexSpaces)
    if (s != InnerStride::one) return false;
  return true;
}

/// Whether dropout instruction `at` draws its group's block once per
/// vector: its seed and offset are loads of scalar (inner stride zero)
/// parameters.
bool drawsPerVector(const Kernel& kernel, size_t at) {
  const ScalarInstr& in = kernel.body[at];
  if (in.kind != ScalarInstr::Kind::op || in.op != ir::Op::dropout) return false;
  for (int o : {in.operands[1], in.operands[2]}) {
    const ScalarInstr& s = kernel.body[static_cast<size_t>(o)];
    if (s.kind != ScalarInstr::Kind::load || kernel.params[static_cast<size_t>(s.param)].inner != InnerStride::zero)
      return false;
  }
  return true;
}

std::string innerStrideName(InnerStride s) {
  switch (s) {
    case InnerStride::zero: return "0";
    case InnerStride::one: return "1";
    case InnerStride::any: return "any";
  }
  return "?";
}

/// Where the body finds one element: `element(p)` is parameter p's element
/// (a C lvalue), `index(s)` index space s's linear index; `blocks`, in a
/// vector loop, the Philox block of each dropout drawn per vector and
/// `lane` the element's word in it.
struct ElementAccess {
  std::function<std::string(int)> element;
  std::function<std::string(int)> index;
  const std::vector<std::array<CValue, 4>>* blocks = nullptr;
  int lane = 0;
};

class ElementwiseWriter {
 public:
  ElementwiseWriter(const Kernel& kernel, const CDialect& d) : k_(kernel), d_(d), i64_(d.i64()) {
    used_.assign(static_cast<size_t>(kernel.numParams()), false);
    for (const ScalarInstr& instr : kernel.body) {
      if (instr.kind != ScalarInstr::Kind::load && instr.kind != ScalarInstr::Kind::store) continue;
      KILN_ASSERT(instr.param >= 0 && instr.param < kernel.numParams(), "kernel {}: parameter {} out of range",
                  kernel.name, instr.param);
      used_[static_cast<size_t>(instr.param)] = true;
    }
  }

  std::string render() {
    out_ += fmt::format("// kiln kernel {}: rank {}, {} parameters. Generated by codegen/c_renderer.cpp ({}).\n",
                        k_.name, k_.rank, k_.numParams(), d_.name());
    out_ += d_.preamble();
    out_ += argsStruct(k_, d_, "") + "\n";
    if (vectorizes(k_)) {
      // One vector type per dtype, where the dialect has none built in.
      std::vector<DType> declared;
      for (int p = 0; p < k_.numParams(); ++p) {
        const DType t = k_.params[p].dtype;
        if (!contiguous(p) || std::find(declared.begin(), declared.end(), t) != declared.end()) continue;
        declared.push_back(t);
        out_ += d_.vectorTypeDecl(t, storageCType(t, d_));
      }
    }
    out_ += kernelOpening(k_, d_, 0);
    out_ += fmt::format("  const {} step = {};\n", i64_, d_.globalSize());
    out_ += fmt::format("  const {} first = {};\n", i64_, d_.globalId());
    if (vectorizes(k_))
      vectorized();
    else
      scalarLoop("first", "  ");
    out_ += "}\n";
    return out_;
  }

 private:
  bool contiguous(int p) const { return used_[static_cast<size_t>(p)] && k_.params[p].inner == InnerStride::one; }

  /// Which instructions the stores need at one element: in a vector loop,
  /// a dropout drawn per vector needs only its x (its seed, offset and
  /// index went into the vector's block), so their loads are left out.
  std::vector<bool> live(bool perVector) const {
    std::vector<bool> live(k_.body.size(), false);
    for (size_t at = k_.body.size(); at-- > 0;) {
      const ScalarInstr& instr = k_.body[at];
      if (instr.kind == ScalarInstr::Kind::store) live[at] = true;
      if (!live[at]) continue;
      const bool drawn = perVector && drawsPerVector(k_, at);
      for (size_t o = 0; o < instr.operands.size(); ++o)
        if (!drawn || o == 0) live[static_cast<size_t>(instr.operands[o])] = true;
    }
    return live;
  }

  /// The body at one element.
  void emitElement(CBuilder& b, const ElementAccess& access) {
    namespace f = ir::formulas;
    std::vector<CValue> values(k_.body.size());
    const std::vector<bool> needed = live(access.blocks != nullptr);
    for (size_t at = 0; at < k_.body.size(); ++at) {
      const ScalarInstr& instr = k_.body[at];
      if (!needed[at]) continue;
      switch (instr.kind) {
        case ScalarInstr::Kind::load:
          // Loads and stores convert between memory and compute form
          // (ir::formulas::loadValue/storeValue).
          values[at] = emitLoad(b, k_, at, access.element(instr.param));
          break;
        case ScalarInstr::Kind::constant: values[at] = f::emitConstant(b, instr.value, instr.dtype); break;
        case ScalarInstr::Kind::op:
          if (access.blocks && drawsPerVector(k_, at)) {
            b.out += fmt::format("{}// %{} = dropout(%{}) : {}, word {} of the vector's block\n", b.indent, at,
                                 instr.operands[0], dtypeName(instr.dtype), access.lane);
            values[at] = f::emitDropoutOfBits(b, instr.dtype, values[static_cast<size_t>(instr.operands[0])],
                                              (*access.blocks)[at][static_cast<size_t>(access.lane)], instr.attrs);
          } else {
            values[at] = emitOp(b, k_, at, values);
          }
          break;
        case ScalarInstr::Kind::store:
          // emitStore writes the conversion lines first, then returns the statement.
          b.out += b.indent + emitStore(b, k_, at, access.element(instr.param), values[instr.operands[0]]) + "\n";
          break;
        case ScalarInstr::Kind::index:
          b.out += fmt::format("{}// %{} = index i{} : i64\n", b.indent, at, instr.param);
          values[at] = CValue{access.index(instr.param), DType::i64};
          break;
        case ScalarInstr::Kind::reduce:
        case ScalarInstr::Kind::extent: KILN_ASSERT(false, "kernel {}: a reduction in an elementwise kernel", k_.name);
      }
    }
  }

  /// The scalar grid-stride loop over [from, numel).
  void scalarLoop(const std::string& from, const std::string& indent) {
    out_ += fmt::format("{}for ({} i = {}; i < a.numel; i += step) {{\n", indent, i64_, from);
    const std::string in = indent + "  ";
    // Row-major decomposition of i, innermost dimension first.
    out_ += splitIndex(d_, in, "i", 0, k_.rank - 1, "i", "rest");
    for (int p = 0; p < k_.numParams(); ++p) {
      if (!used_[static_cast<size_t>(p)]) continue;
      out_ += fmt::format("{}const {} o{} = {};  // inner stride {}\n", in, i64_, p,
                          offsetExpr(k_, "strides", p, k_.params[p].inner), innerStrideName(k_.params[p].inner));
    }
    // The linear index of each index space (codegen/kernel.h).
    for (int sp = 0; sp < k_.numIndexSpaces(); ++sp)
      out_ += fmt::format("{}const {} ix{} = {};  // inner stride {}\n", in, i64_, sp,
                          offsetExpr(k_, "indexStrides", sp, k_.indexSpaces[sp]), innerStrideName(k_.indexSpaces[sp]));
    CBuilder b(out_, d_);
    b.indent = in;
    ElementAccess access;
    access.element = [](int p) { return fmt::format("p{}[o{}]", p, p); };
    access.index = [](int sp) { return fmt::format("ix{}", sp); };
    emitElement(b, access);
    out_ += indent + "}\n";
  }

  /// Note [Vectorized elementwise kernels]: the vector loop and the scalar
  /// tail, behind an alignment check where the dialect needs one.
  void vectorized() {
    std::string indent = "  ";
    if (d_.vectorsNeedAlignment()) {
      std::vector<std::string> aligned;
      for (int p = 0; p < k_.numParams(); ++p)
        if (contiguous(p))
          aligned.push_back(fmt::format("({}){} % {} == 0", d_.u64(), "p" + std::to_string(p),
                                        std::min(16, 4 * static_cast<int>(itemSize(k_.params[p].dtype)))));
      std::string check = aligned.empty() ? "true" : aligned[0];
      for (size_t t = 1; t < aligned.size(); ++t) check += " && " + aligned[t];
      out_ += fmt::format("  if ({}) {{  // every contiguous parameter aligned to its vector\n", check);
      indent = "    ";
    }
    out_ += fmt::format("{}const {} numVectors = a.numel / 4;\n", indent, i64_);
    out_ += fmt::format("{}for ({} v = first; v < numVectors; v += step) {{\n", indent, i64_);
    out_ += fmt::format("{}  const {} i = v * 4;\n", indent, i64_);
    vectorBody(indent + "  ");
    out_ += indent + "}\n";
    out_ += indent + "// The numel % 4 elements left, one per work-item.\n";
    scalarLoop("numVectors * 4 + first", indent);
    if (d_.vectorsNeedAlignment()) {
      out_ += "  } else {\n";
      scalarLoop("first", "    ");
      out_ += "  }\n";
    }
  }

  /// Four elements from i: vector loads, the body per lane, vector stores.
  void vectorBody(const std::string& in) {
    auto vectorType = [&](int p) { return d_.vectorType(k_.params[p].dtype, storageCType(k_.params[p].dtype, d_)); };
    for (int p = 0; p < k_.numParams(); ++p) {
      if (!contiguous(p)) continue;
      const std::string pointer = fmt::format("p{} + i", p);
      if (k_.params[p].output)
        out_ += fmt::format("{}{} w{};\n", in, vectorType(p), p);
      else if (k_.params[p].inout)  // loaded, then stored where it was loaded (Note [Donated buffers])
        out_ += fmt::format("{}{} w{} = {};\n", in, vectorType(p), p,
                            d_.vectorLoad(k_.params[p].dtype, storageCType(k_.params[p].dtype, d_), pointer));
      else
        out_ += fmt::format("{}const {} r{} = {};\n", in, vectorType(p), p,
                            d_.vectorLoad(k_.params[p].dtype, storageCType(k_.params[p].dtype, d_), pointer));
    }
    CBuilder b(out_, d_);
    b.indent = in;
    // Dropouts drawn once per vector: their group is i / 4.
    std::vector<std::array<CValue, 4>> blocks(k_.body.size());
    for (size_t at = 0; at < k_.body.size(); ++at) {
      if (!drawsPerVector(k_, at)) continue;
      const ScalarInstr& d = k_.body[at];
      b.out += fmt::format("{}// the Philox block of %{}'s group i / 4\n", in, at);
      auto scalar = [&](int o) {
        return emitLoad(b, k_, static_cast<size_t>(o), fmt::format("p{}[0]", k_.body[static_cast<size_t>(o)].param));
      };
      const CValue seed = scalar(d.operands[1]), offset = scalar(d.operands[2]);
      blocks[at] = ir::formulas::dropoutBlock(b, seed, offset, b.def("i >> 2", DType::i64));
    }
    for (int lane = 0; lane < 4; ++lane) {
      b.out += fmt::format("{}// element i + {}\n", in, lane);
      ElementAccess access;
      access.element = [&, lane](int p) {
        if (!contiguous(p)) return fmt::format("p{}[0]", p);
        const bool written = k_.params[p].output || k_.params[p].inout;
        return d_.vectorLane(fmt::format("{}{}", written ? "w" : "r", p), lane);
      };
      access.index = [lane](int) { return fmt::format("(i + {})", lane); };
      access.blocks = &blocks;
      access.lane = lane;
      emitElement(b, access);
    }
    for (int p = 0; p < k_.numParams(); ++p)
      if (contiguous(p) && (k_.params[p].output || k_.params[p].inout))
        out_ += in +
                d_.vectorStore(k_.params[p].dtype, storageCType(k_.params[p].dtype, d_), fmt::format("p{} + i", p),
                               fmt::format("w{}", p)) +
                "\n";
  }

  const Kernel& k_;
  const CDialect& d_;
  const char* i64_;
  std::vector<bool> used_;  ///< per parameter: loaded or stored by the body
  std::string out_;
};

}  // namespace

int64_t GpuLaunch::groups(int64_t numel, int64_t maxGroups) const {
  if (numel <= 0) return 0;
  const int64_t units = unit == Unit::vector4 ? (numel + 3) / 4 : numel;
  const int64_t groups = unit == Unit::row ? units : (units + localSize - 1) / localSize;
  return std::clamp<int64_t>(groups, 1, std::max<int64_t>(1, maxGroups));
}

runtime::LaunchShape GpuLaunch::shape(int64_t numel, int64_t maxGroups) const {
  runtime::LaunchShape s;
  s.numel = numel;
  s.grid = {groups(numel, maxGroups), 1, 1};
  s.block = {localSize, 1, 1};
  return s;
}

GpuLaunch gpuLaunchOf(const Kernel& kernel) {
  GpuLaunch launch;
  if (kernel.isReduction()) {
    launch.unit = GpuLaunch::Unit::row;
    launch.localSizeRequired = true;
  } else {
    launch.unit = vectorizes(kernel) ? GpuLaunch::Unit::vector4 : GpuLaunch::Unit::element;
  }
  return launch;
}

RenderedKernel renderGpuKernel(const Kernel& kernel, const CDialect& d) {
  checkKernel(kernel);
  for (const KernelParam& p : kernel.params)
    KILN_ASSERT(!p.inout || !kernel.isReduction(), "kernel {}: a reduction with a donated (inout) buffer", kernel.name);
  KILN_ASSERT(kernel.numParams() >= 1, "kernel {} has no parameters", kernel.name);
  RenderedKernel r;
  r.name = kernel.name;
  r.numBuffers = kernel.numParams();
  r.argWords = kernel.rank * (1 + kernel.numStrided()) + 1 + (d.offsetsInArgs() ? kernel.numParams() : 0);
  r.launch = gpuLaunchOf(kernel);
  r.source = kernel.isReduction() ? ccg::renderReduction(kernel, d, r.launch.sharedBytes)
                                  : ElementwiseWriter(kernel, d).render();
  return r;
}

std::string renderCudaC(const Kernel& kernel) { return renderGpuKernel(kernel, cudaDialect()).source; }

std::string renderOpenCLC(const Kernel& kernel) { return renderGpuKernel(kernel, openclDialect()).source; }

std::vector<int64_t> packGpuArgs(const RenderedKernel& rendered, const LaunchArgs& launch,
                                 const std::vector<int64_t>& elementOffsets) {
  std::vector<int64_t> words = launch.args;
  words.push_back(launch.numel);
  const int64_t offsets = rendered.argWords - static_cast<int64_t>(words.size());
  KILN_ASSERT(offsets >= 0 && (elementOffsets.empty() || static_cast<int64_t>(elementOffsets.size()) == offsets),
              "kernel {}: {} argument words and {} offsets for a struct of {} words", rendered.name, words.size(),
              elementOffsets.size(), rendered.argWords);
  for (int64_t p = 0; p < offsets; ++p) words.push_back(elementOffsets.empty() ? 0 : elementOffsets[p]);
  return words;
}

}  // namespace kiln::codegen

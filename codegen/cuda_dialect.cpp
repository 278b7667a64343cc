// The CUDA C dialect of the C-family renderer (codegen/c_dialect.h), for
// NVRTC: `extern "C" __global__` kernels with __launch_bounds__, __restrict__
// pointers, blockIdx/threadIdx, __syncthreads, __shared__ arrays, the
// __float_as_uint family of bit casts, 4-wide accesses through an aligned
// struct after a run-time alignment check, and warp shuffles for reductions.
// No header is included (NVRTC has no standard library by default): the
// numerics come from the flags codegen/nvrtc_compiler.h passes.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/c_dialect.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {

class CudaDialect final : public CDialect {
 public:
  std::string_view name() const override { return "cuda"; }

  const char* i64() const override { return "long long"; }
  const char* u64() const override { return "unsigned long long"; }
  const char* u32() const override { return "unsigned"; }
  const char* u16() const override { return "unsigned short"; }
  const char* u8() const override { return "unsigned char"; }
  const char* i64Suffix() const override { return "ll"; }
  const char* u64Suffix() const override { return "ull"; }

  std::string bitcast(CBits from, CBits to, const std::string& expr) const override {
    return fmt::format("__{}_as_{}({})", bitsTypeName(from, "longlong"), bitsTypeName(to, "longlong"), expr);
  }
  std::string sqrt(DType t, const std::string& arg) const override {
    return fmt::format("{}({})", t == DType::f32 ? "sqrtf" : "sqrt", arg);
  }
  std::string rint(DType t, const std::string& arg) const override {
    return fmt::format("{}({})", t == DType::f32 ? "rintf" : "rint", arg);
  }

  std::string preamble() const override {
    return "// compile with --fmad=false -prec-div=true -prec-sqrt=true -ftz=false for eager-equal results.\n";
  }
  std::string kernelHead(int requiredLocalSize) const override {
    if (requiredLocalSize <= 0) return "extern \"C\" __global__ void ";
    return fmt::format("extern \"C\" __global__ void __launch_bounds__({}) ", requiredLocalSize);
  }
  // __restrict__ on every pointer: the runtime never passes aliasing
  // buffers, and it lets the read-only ones go through the texture cache.
  std::string bufferParam(const std::string& storageType, bool output, int p) const override {
    return fmt::format("{}{}* __restrict__ p{}", output ? "" : "const ", storageType, p);
  }
  bool offsetsInArgs() const override { return false; }
  const char* helperPrefix() const override { return "__device__ __forceinline__"; }

  std::string globalId() const override { return "(long long)blockIdx.x * blockDim.x + threadIdx.x"; }
  std::string globalSize() const override { return "(long long)gridDim.x * blockDim.x"; }
  std::string groupId() const override { return "blockIdx.x"; }
  std::string numGroups() const override { return "gridDim.x"; }
  std::string localId() const override { return "threadIdx.x"; }
  std::string localSize() const override { return "blockDim.x"; }
  std::string barrier() const override { return "__syncthreads();"; }
  std::string localArray(const std::string& type, const std::string& name, int count) const override {
    return fmt::format("__shared__ {} {}[{}];", type, name, count);
  }

  bool vectorsNeedAlignment() const override { return true; }
  std::string vectorTypeDecl(DType dtype, const std::string& storageType) const override {
    // Aligned to its size, at most 16 bytes (the widest global load; 8-byte
    // elements take two).
    const int align = std::min(16, 4 * static_cast<int>(itemSize(dtype)));
    return fmt::format(
        "#ifndef KILN_VEC4_{1}\n#define KILN_VEC4_{1}\nstruct __align__({0}) KilnVec4_{1} {{ {2} v[4]; }};\n#endif\n",
        align, dtypeName(dtype), storageType);
  }
  std::string vectorType(DType dtype, const std::string&) const override {
    return fmt::format("KilnVec4_{}", dtypeName(dtype));
  }
  std::string vectorLoad(DType dtype, const std::string& storageType, const std::string& pointer) const override {
    return fmt::format("*reinterpret_cast<const {}*>({})", vectorType(dtype, storageType), pointer);
  }
  std::string vectorStore(DType dtype, const std::string& storageType, const std::string& pointer,
                          const std::string& value) const override {
    return fmt::format("*reinterpret_cast<{}*>({}) = {};", vectorType(dtype, storageType), pointer, value);
  }
  std::string vectorLane(const std::string& value, int lane) const override {
    return fmt::format("{}.v[{}]", value, lane);
  }

  CReductionTree reductionTree() const override { return CReductionTree::warpShuffles; }
  std::string shuffleDown(const std::string& value, const std::string& offset) const override {
    return fmt::format("__shfl_down_sync(0xffffffffu, {}, {})", value, offset);
  }
};

}  // namespace

const CDialect& cudaDialect() {
  static const CudaDialect dialect;
  return dialect;
}

}  // namespace kiln::codegen

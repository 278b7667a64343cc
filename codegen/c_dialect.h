// The dialects of kiln's C-family GPU renderer (codegen/c_renderer.h): what
// differs between CUDA C and OpenCL C, and nothing else. As in tinygrad's
// CStyleLanguage and Halide's CodeGen_GPU_C, the renderer writes a kernel
// once — the args struct, index arithmetic, grid-stride loops, the passes of
// a reduction and every scalar formula (codegen/c_builder.h) — and asks the
// dialect how to spell what the languages spell differently: kernel
// qualifiers and launch-bound attributes, address-space qualifiers, index
// built-ins, barriers, shared/local arrays, type names and literal suffixes,
// bit casts, math function names, 4-wide vector accesses, and how a
// work-group combines its partial reductions (warp shuffles or a local-memory
// tree). codegen/cuda_dialect.cpp and codegen/opencl_dialect.cpp fill it.
#pragma once

#include <string>
#include <string_view>

#include "runtime/dtype.h"

namespace kiln::codegen {

/// Same-size types a bit cast converts between (CUDA's __float_as_uint and
/// friends, OpenCL's as_T).
enum class CBits : uint8_t { f32, i32, u32, f64, i64 };

/// The type name a bit cast names for `b` (both dialects spell their
/// casts after it: `__float_as_uint`, `as_uint`); the 64-bit integer is
/// `i64Name`.
inline const char* bitsTypeName(CBits b, const char* i64Name) {
  switch (b) {
    case CBits::f32: return "float";
    case CBits::i32: return "int";
    case CBits::u32: return "uint";
    case CBits::f64: return "double";
    case CBits::i64: return i64Name;
  }
  return "";
}

/// How a work-group combines its work-items' partial reductions.
/// warpShuffles: __shfl_down_sync within each warp of 32, shared memory
/// across warps (CUDA). localTree: the same tree of combinations — pairs 16,
/// 8, 4, 2, 1 apart within each group of 32, then across groups — through
/// local memory and barriers (devices without subgroups, such as PoCL), so
/// both give the same bits (Note [One reduction tree] in codegen/c_reduction.cpp).
enum class CReductionTree : uint8_t { warpShuffles, localTree };

/// One C-family GPU language. Every function returns text the renderer
/// pastes as it is; none has state.
class CDialect {
 public:
  virtual ~CDialect() = default;

  /// "cuda" or "opencl", as `irdump --emit` names it.
  virtual std::string_view name() const = 0;

  // --- Types and literals.
  /// The 64-bit signed integer type (`long long`, `long`).
  virtual const char* i64() const = 0;
  /// Unsigned types of 64, 32, 16 and 8 bits.
  virtual const char* u64() const = 0;
  virtual const char* u32() const = 0;
  virtual const char* u16() const = 0;
  virtual const char* u8() const = 0;
  /// Suffixes of 64-bit integer literals, signed and unsigned.
  virtual const char* i64Suffix() const = 0;
  virtual const char* u64Suffix() const = 0;
  /// `expr`, of type `from`, reinterpreted as `to` (same size).
  virtual std::string bitcast(CBits from, CBits to, const std::string& expr) const = 0;
  /// The correctly rounded square root, and rounding to the nearest
  /// integer (ties to even), of an f32 or f64 `arg`.
  virtual std::string sqrt(DType t, const std::string& arg) const = 0;
  virtual std::string rint(DType t, const std::string& arg) const = 0;

  // --- Kernels.
  /// What a translation unit starts with before each kernel: pragmas the
  /// language needs for kiln's numerics, or a comment naming the compile
  /// flags that give them.
  virtual std::string preamble() const = 0;
  /// The declaration up to the kernel's name: qualifiers, return type and,
  /// when requiredLocalSize > 0, the attribute that fixes the work-group size.
  virtual std::string kernelHead(int requiredLocalSize) const = 0;
  /// Kernel parameter `p`, a buffer of `storageType` (read-only unless `output`).
  virtual std::string bufferParam(const std::string& storageType, bool output, int p) const = 0;
  /// Whether the args struct ends with each buffer's element offset, which
  /// the kernel adds to its pointer (OpenCL cannot offset a buffer on the host).
  virtual bool offsetsInArgs() const = 0;
  /// The qualifiers of a helper function (`__device__ __forceinline__`).
  virtual const char* helperPrefix() const = 0;

  // --- Work-items: 64-bit expressions over dimension 0.
  virtual std::string globalId() const = 0;    ///< group id * local size + local id
  virtual std::string globalSize() const = 0;  ///< groups * local size
  virtual std::string groupId() const = 0;
  virtual std::string numGroups() const = 0;
  /// 32-bit: the work-item in its group, and the group's size.
  virtual std::string localId() const = 0;
  virtual std::string localSize() const = 0;
  /// A barrier of the work-group that orders its shared/local memory.
  virtual std::string barrier() const = 0;
  /// The declaration of an array in shared/local memory, at kernel scope.
  virtual std::string localArray(const std::string& type, const std::string& name, int count) const = 0;

  // --- Vector accesses (Note [Vectorized elementwise kernels] in codegen/c_renderer.cpp).
  /// Whether a 4-element access needs the pointer aligned to the vector's
  /// size (a check at run time before the vector loop) or only to the element.
  virtual bool vectorsNeedAlignment() const = 0;
  /// Declarations a vector type of `dtype` needs before the kernel (guarded:
  /// several kernels may share one translation unit); empty when built in.
  virtual std::string vectorTypeDecl(DType dtype, const std::string& storageType) const = 0;
  virtual std::string vectorType(DType dtype, const std::string& storageType) const = 0;
  /// Four elements of `dtype` at `pointer` (an expression) as one value.
  virtual std::string vectorLoad(DType dtype, const std::string& storageType, const std::string& pointer) const = 0;
  /// The statement that writes vector `value` to `pointer`.
  virtual std::string vectorStore(DType dtype, const std::string& storageType, const std::string& pointer,
                                  const std::string& value) const = 0;
  /// Element `lane` (0..3) of vector `value`, an lvalue when `value` is one.
  virtual std::string vectorLane(const std::string& value, int lane) const = 0;

  // --- Reductions.
  virtual CReductionTree reductionTree() const = 0;
  /// CUDA: `value` of the work-item `offset` lanes up in the warp.
  virtual std::string shuffleDown(const std::string& value, const std::string& offset) const = 0;
};

/// CUDA C for NVRTC (codegen/cuda_dialect.cpp).
const CDialect& cudaDialect();
/// OpenCL C 1.2 (codegen/opencl_dialect.cpp).
const CDialect& openclDialect();

}  // namespace kiln::codegen

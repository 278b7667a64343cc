// Internal to the CPU backend: the scalar builder that instantiates
// ir/scalar_formulas.h on LLVM IR, and the element loads, stores and ops
// that the elementwise renderer (codegen/llvm_renderer.cpp) and the
// reduction renderer (codegen/llvm_reduction.cpp) share, so that both
// compute every op with the same instructions. Only codegen/llvm_*.cpp may
// include it, since it names LLVM types.
#pragma once

#include <llvm/ADT/APFloat.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <span>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "ir/scalar_formulas.h"
#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::codegen::llvmcg {

/// The builder B of ir/scalar_formulas.h over LLVM values: f32 is float, f64
/// double, i32 and i64 themselves, bool i1; the value's LLVM type says which.
/// No fast-math flags anywhere: `contract` or `reassoc` would let LLVM fuse
/// or reorder and break bit-equality with the C++ evaluator. Integer
/// arithmetic has no nsw/nuw flags: it wraps, as the formulas say.
struct LlvmScalarBuilder {
  using V = llvm::Value*;
  using M = llvm::Value*;

  llvm::IRBuilder<>& ir;
  DType dtype = DType::f32;

  llvm::Type* type(DType t) {
    switch (t) {
      case DType::f32: return ir.getFloatTy();
      case DType::f64: return ir.getDoubleTy();
      case DType::i32: return ir.getInt32Ty();
      case DType::i64: return ir.getInt64Ty();
      case DType::boolean: return ir.getInt1Ty();
      case DType::f16:
      case DType::bf16: break;
    }
    KILN_ASSERT(false, "{} is not a compute dtype", dtypeName(t));
    return nullptr;
  }
  static bool isFloat(V a) { return a->getType()->isFloatingPointTy(); }
  static bool isBool(V a) { return a->getType()->isIntegerTy(1); }
  static bool isF64(V a) { return a->getType()->isDoubleTy(); }

  V c(double v) { return constant(v, dtype); }
  // f32 constants through float, as the C++ evaluator's are: one rounding, same bits.
  V constant(double v, DType t) {
    switch (t) {
      case DType::f32: return llvm::ConstantFP::get(ir.getContext(), llvm::APFloat(static_cast<float>(v)));
      case DType::f64: return llvm::ConstantFP::get(ir.getContext(), llvm::APFloat(v));
      case DType::i32:
      case DType::i64: return llvm::ConstantInt::getSigned(type(t), floatToIntSaturating(v, t));
      case DType::boolean: return ir.getInt1(v != 0);
      case DType::f16:
      case DType::bf16: break;
    }
    KILN_ASSERT(false, "constant of {}, which is not a compute dtype", dtypeName(t));
    return nullptr;
  }
  V add(V a, V b) { return isFloat(a) ? ir.CreateFAdd(a, b) : ir.CreateAdd(a, b); }
  V sub(V a, V b) { return isFloat(a) ? ir.CreateFSub(a, b) : ir.CreateSub(a, b); }
  V mul(V a, V b) { return isFloat(a) ? ir.CreateFMul(a, b) : ir.CreateMul(a, b); }
  V div(V a, V b) { return ir.CreateFDiv(a, b); }
  V neg(V a) { return isFloat(a) ? ir.CreateFNeg(a) : ir.CreateSub(llvm::ConstantInt::get(a->getType(), 0), a); }
  V sqrt(V a) { return ir.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a); }
  // llvm.rint rounds in the default mode (half to even), like std::nearbyint.
  V rint(V a) { return ir.CreateUnaryIntrinsic(llvm::Intrinsic::rint, a); }
  // Ordered float compares (une for ne); signed integers; bool unsigned (false < true).
  M lt(V a, V b) {
    return isFloat(a) ? ir.CreateFCmpOLT(a, b) : isBool(a) ? ir.CreateICmpULT(a, b) : ir.CreateICmpSLT(a, b);
  }
  M gt(V a, V b) {
    return isFloat(a) ? ir.CreateFCmpOGT(a, b) : isBool(a) ? ir.CreateICmpUGT(a, b) : ir.CreateICmpSGT(a, b);
  }
  M le(V a, V b) {
    return isFloat(a) ? ir.CreateFCmpOLE(a, b) : isBool(a) ? ir.CreateICmpULE(a, b) : ir.CreateICmpSLE(a, b);
  }
  M ge(V a, V b) {
    return isFloat(a) ? ir.CreateFCmpOGE(a, b) : isBool(a) ? ir.CreateICmpUGE(a, b) : ir.CreateICmpSGE(a, b);
  }
  M eq(V a, V b) { return isFloat(a) ? ir.CreateFCmpOEQ(a, b) : ir.CreateICmpEQ(a, b); }
  M ne(V a, V b) { return isFloat(a) ? ir.CreateFCmpUNE(a, b) : ir.CreateICmpNE(a, b); }
  M isNan(V a) { return isFloat(a) ? ir.CreateFCmpUNO(a, a) : ir.getFalse(); }
  M orM(M a, M b) { return ir.CreateOr(a, b); }
  M andM(M a, M b) { return ir.CreateAnd(a, b); }
  M notM(M a) { return ir.CreateNot(a); }
  V select(M m, V a, V b) { return ir.CreateSelect(m, a, b); }
  // The bit patterns of ir/scalar_eval.cpp. fptosi of NaN is poison here (UB
  // in C++); every formula selects such lanes away before they reach a result.
  V pow2(V n) {
    if (isF64(n)) {
      V e = ir.CreateAdd(ir.CreateFPToSI(n, ir.getInt64Ty()), ir.getInt64(1023));
      return ir.CreateBitCast(ir.CreateShl(e, ir.getInt64(52)), ir.getDoubleTy());
    }
    V e = ir.CreateAdd(ir.CreateFPToSI(n, ir.getInt32Ty()), ir.getInt32(127));
    return ir.CreateBitCast(ir.CreateShl(e, ir.getInt32(23)), ir.getFloatTy());
  }
  V mantissa(V x) {
    if (isF64(x)) {
      V bits = ir.CreateAnd(ir.CreateBitCast(x, ir.getInt64Ty()), ir.getInt64(0x800fffffffffffffull));
      return ir.CreateBitCast(ir.CreateOr(bits, ir.getInt64(0x3fe0000000000000ull)), ir.getDoubleTy());
    }
    V bits = ir.CreateAnd(ir.CreateBitCast(x, ir.getInt32Ty()), ir.getInt32(0x807fffffu));
    return ir.CreateBitCast(ir.CreateOr(bits, ir.getInt32(0x3f000000u)), ir.getFloatTy());
  }
  V exponent(V x) {
    if (isF64(x)) {
      V e = ir.CreateAnd(ir.CreateLShr(ir.CreateBitCast(x, ir.getInt64Ty()), ir.getInt64(52)), ir.getInt64(0x7ff));
      return ir.CreateSIToFP(ir.CreateSub(e, ir.getInt64(1022)), ir.getDoubleTy());
    }
    V e = ir.CreateAnd(ir.CreateLShr(ir.CreateBitCast(x, ir.getInt32Ty()), ir.getInt32(23)), ir.getInt32(0xff));
    return ir.CreateSIToFP(ir.CreateSub(e, ir.getInt32(126)), ir.getFloatTy());
  }
  V bitcast(V x, DType t) { return ir.CreateBitCast(x, type(t)); }
  V band(V a, V b) { return ir.CreateAnd(a, b); }
  V bor(V a, V b) { return ir.CreateOr(a, b); }
  V bxor(V a, V b) { return ir.CreateXor(a, b); }
  V shl(V a, int n) { return ir.CreateShl(a, llvm::ConstantInt::get(a->getType(), n)); }
  V lshr(V a, int n) { return ir.CreateLShr(a, llvm::ConstantInt::get(a->getType(), n)); }
  V convert(V x, DType t) {
    llvm::Type* to = type(t);
    llvm::Type* from = x->getType();
    if (from == to) return x;
    if (t == DType::boolean)
      return isFloat(x) ? ir.CreateFCmpUNE(x, llvm::ConstantFP::get(from, 0.0))
                        : ir.CreateICmpNE(x, llvm::ConstantInt::get(from, 0));
    if (isFloat(x)) {
      if (to->isFloatingPointTy()) return ir.CreateFPCast(x, to);  // fpext or fptrunc (to nearest even)
      // Truncates toward zero, saturates, NaN -> 0: the semantics of `cast`.
      return ir.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {to, from}, {x});
    }
    if (to->isFloatingPointTy()) return isBool(x) ? ir.CreateUIToFP(x, to) : ir.CreateSIToFP(x, to);
    return isBool(x) ? ir.CreateZExt(x, to) : ir.CreateSExtOrTrunc(x, to);
  }
  V fromM(M m) { return m; }
  M toM(V v) { return v; }
};

/// How an element of `dtype` sits in memory: f16 and bf16 as i16 bits, bool
/// as an i8 holding 0 or 1, the others as their compute type.
inline llvm::Type* storageType(llvm::IRBuilder<>& ir, DType dtype) {
  switch (dtype) {
    case DType::f16:
    case DType::bf16: return ir.getInt16Ty();
    case DType::boolean: return ir.getInt8Ty();
    case DType::f32: return ir.getFloatTy();
    case DType::f64: return ir.getDoubleTy();
    case DType::i32: return ir.getInt32Ty();
    case DType::i64: return ir.getInt64Ty();
  }
  return nullptr;
}

/// Loads the element of `dtype` at `ptr` + `offset` elements and converts it
/// to its compute form (ir::formulas::loadValue).
inline llvm::Value* loadElement(llvm::IRBuilder<>& ir, DType dtype, llvm::Value* ptr, llvm::Value* offset,
                                const std::string& name) {
  LlvmScalarBuilder b{ir};
  llvm::Type* t = storageType(ir, dtype);
  llvm::Value* raw = ir.CreateAlignedLoad(t, ir.CreateInBoundsGEP(t, ptr, offset),
                                          llvm::Align(static_cast<uint64_t>(itemSize(dtype))), name);
  if (dtype == DType::f16 || dtype == DType::bf16) raw = ir.CreateZExt(raw, ir.getInt32Ty());
  if (dtype == DType::boolean) raw = ir.CreateICmpNE(raw, ir.getInt8(0));
  return ir::formulas::loadValue(b, raw, dtype);
}

/// Stores compute value `v` as an element of `dtype` at `ptr` + `offset`.
inline void storeElement(llvm::IRBuilder<>& ir, DType dtype, llvm::Value* ptr, llvm::Value* offset, llvm::Value* v) {
  LlvmScalarBuilder b{ir};
  llvm::Type* t = storageType(ir, dtype);
  v = ir::formulas::storeValue(b, v, dtype);
  if (dtype == DType::f16 || dtype == DType::bf16) v = ir.CreateTrunc(v, ir.getInt16Ty());
  if (dtype == DType::boolean) v = ir.CreateZExt(v, ir.getInt8Ty());
  ir.CreateAlignedStore(v, ir.CreateInBoundsGEP(t, ptr, offset), llvm::Align(static_cast<uint64_t>(itemSize(dtype))));
}

/// The value of op instruction `in` of `kernel`, its operands in `values`;
/// f16 and bf16 results are rounded inside emitScalar.
inline llvm::Value* emitOpInstr(llvm::IRBuilder<>& ir, const Kernel& kernel, const ScalarInstr& in,
                                const std::vector<llvm::Value*>& values) {
  LlvmScalarBuilder b{ir};
  std::vector<llvm::Value*> operands;
  std::vector<DType> types;
  for (int o : in.operands) {
    operands.push_back(values[static_cast<size_t>(o)]);
    types.push_back(kernel.body[static_cast<size_t>(o)].dtype);
  }
  return ir::formulas::emitScalar(b, in.op, std::span<const DType>(types), in.dtype,
                                  std::span<llvm::Value* const>(operands), in.attrs);
}

/// Branches to `start` when [begin, end) is a non-empty range of a domain
/// whose `sizes` are all positive, else to `exit` (a zero or negative size,
/// or begin < 0, would make the index division trap or loop). In `start`,
/// stores the multi-index of `begin` (row-major over `sizes`) into `idx`.
inline void emitRangeStart(llvm::IRBuilder<>& ir, llvm::Value* begin, llvm::Value* end,
                           const std::vector<llvm::Value*>& sizes, const std::vector<llvm::AllocaInst*>& idx,
                           llvm::BasicBlock* start, llvm::BasicBlock* exit) {
  llvm::Value* ok = ir.CreateAnd(ir.CreateICmpSLT(begin, end), ir.CreateICmpSGE(begin, ir.getInt64(0)));
  for (llvm::Value* size : sizes) ok = ir.CreateAnd(ok, ir.CreateICmpSGT(size, ir.getInt64(0)));
  ir.CreateCondBr(ok, start, exit);
  ir.SetInsertPoint(start);
  llvm::Value* rem = begin;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    ir.CreateStore(ir.CreateSRem(rem, sizes[d]), idx[d]);
    if (d > 0) rem = ir.CreateSDiv(rem, sizes[d]);
  }
}

}  // namespace kiln::codegen::llvmcg

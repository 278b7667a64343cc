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
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

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
      case DType::i64: return intConstant(floatToIntSaturating(v, t), t);
      case DType::boolean: return intConstant(v != 0, t);
      case DType::f16:
      case DType::bf16: break;
    }
    KILN_ASSERT(false, "constant of {}, which is not a compute dtype", dtypeName(t));
    return nullptr;
  }
  V intConstant(int64_t v, DType t) {
    return t == DType::boolean ? ir.getInt1(v != 0) : llvm::ConstantInt::getSigned(type(t), v);
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

/// The internal, always-inline `<name>.body` of kernel `k`: `void (ptr
/// noalias p0, ..., ptr noalias readonly args, i64 begin, i64 end)` with its
/// arguments named, into which both renderers write the kernel (renderEntry
/// adds the exported function of the CPU ABI that calls it).
inline llvm::Function* declareBody(const Kernel& k, llvm::Module& m) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::PointerType* ptr = llvm::PointerType::getUnqual(ctx);
  const int numParams = k.numParams();
  std::vector<llvm::Type*> argTypes(static_cast<size_t>(numParams), ptr);
  argTypes.insert(argTypes.end(), {ptr, i64, i64});
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), argTypes, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::InternalLinkage, k.name + ".body", m);
  fn->addFnAttr(llvm::Attribute::AlwaysInline);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  for (int p = 0; p < numParams; ++p) {
    fn->getArg(static_cast<unsigned>(p))->setName("p" + std::to_string(p));
    fn->addParamAttr(static_cast<unsigned>(p), llvm::Attribute::NoAlias);
  }
  llvm::Argument* args = fn->getArg(static_cast<unsigned>(numParams));
  args->setName("args");
  fn->getArg(static_cast<unsigned>(numParams) + 1)->setName("begin");
  fn->getArg(static_cast<unsigned>(numParams) + 2)->setName("end");
  args->addAttr(llvm::Attribute::NoAlias);
  args->addAttr(llvm::Attribute::ReadOnly);
  return fn;
}

/// A kernel's sizes and strides (params, then index spaces: one row of
/// `rank` each), read once from its args array, so the loops see SSA values.
struct KernelArgValues {
  std::vector<llvm::Value*> sizes;
  std::vector<std::vector<llvm::Value*>> strides;
};
inline KernelArgValues loadKernelArgs(llvm::IRBuilder<>& ir, const Kernel& k, llvm::Value* args) {
  llvm::Type* i64 = ir.getInt64Ty();
  auto arg = [&](int i, const std::string& name) {
    llvm::Value* slot = ir.CreateConstInBoundsGEP1_64(i64, args, static_cast<uint64_t>(i));
    return ir.CreateLoad(i64, slot, name);
  };
  const int rank = k.rank;
  KernelArgValues v;
  v.sizes.assign(static_cast<size_t>(rank), nullptr);
  v.strides.assign(static_cast<size_t>(k.numStrided()), {});
  for (int d = 0; d < rank; ++d) v.sizes[d] = arg(d, "size" + std::to_string(d));
  for (int p = 0; p < k.numStrided(); ++p)
    for (int d = 0; d < rank; ++d)
      v.strides[p].push_back(arg(rank + p * rank + d, "stride" + std::to_string(p) + "." + std::to_string(d)));
  return v;
}

/// Carries a multi-index held in allocas `idx` (each below `sizes`, which
/// aligns with it) after its last entry was advanced: from the innermost
/// up, an index that reached its size goes to 0 and adds one to the next.
inline void emitCarry(llvm::IRBuilder<>& ir, const std::vector<llvm::AllocaInst*>& idx,
                      const std::vector<llvm::Value*>& sizes) {
  llvm::Type* i64 = ir.getInt64Ty();
  for (int d = static_cast<int>(idx.size()) - 1; d >= 1; --d) {
    llvm::Value* v = ir.CreateLoad(i64, idx[d]);
    llvm::Value* carry = ir.CreateICmpSGE(v, sizes[d]);
    ir.CreateStore(ir.CreateSelect(carry, ir.getInt64(0), v), idx[d]);
    llvm::Value* up = ir.CreateLoad(i64, idx[d - 1]);
    ir.CreateStore(ir.CreateNSWAdd(up, ir.CreateZExt(carry, i64)), idx[d - 1]);
  }
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

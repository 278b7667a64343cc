// Renders a Kernel (codegen/kernel.h) to LLVM IR with IRBuilder: the CPU
// kernel ABI around a row loop whose inner loop the O3 pipeline vectorizes.
//
// Two functions per kernel. The exported one has the ABI of
// runtime::CpuKernelFn; it loads the buffer pointers and calls an internal,
// always-inline `<name>.body` whose pointer parameters are `noalias`. When the
// inliner folds the body in, LLVM turns those `noalias` parameters into alias
// scopes, so the loop vectorizer knows that stores to an output never touch an
// input and needs no runtime overlap checks.
//
// The body walks the row-major flattened domain from `begin` to `end`: it
// computes the multi-index of `begin` by division, then, row by row, runs an
// inner loop over what is left of the current row (the split may start or end
// mid-row), advances the multi-index with a carry and recomputes each
// parameter's offset. The inner stride of a parameter is the constant 0 or 1
// when its InnerStride says so, which is what lets the loop vectorize.
//
// Element math comes from ir/scalar_formulas.h through LlvmScalarBuilder:
// plain fadd/fsub/fmul/fdiv/fneg without fast-math flags, llvm.sqrt, llvm.rint,
// wrapping integer arithmetic, llvm.fptosi.sat for float-to-integer casts and
// integer bit tricks (f16 and bf16 are i16 in memory and f32 in registers), so
// the kernel computes the same bits as ir::evalScalar (Note [Eager equals
// compiled]).
#include <llvm/ADT/APFloat.h>
#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <span>
#include <string_view>
#include <vector>

#include "codegen/cpu_compiler.h"
#include "codegen/llvm_module.h"
#include "ir/scalar_formulas.h"
#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::codegen {

namespace llvmcg {

namespace {

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
llvm::Type* storageType(llvm::IRBuilder<>& ir, DType dtype) {
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

/// Builds the two functions of one kernel in one module.
class KernelRenderer {
 public:
  KernelRenderer(const Kernel& kernel, llvm::Module& module)
      : k_(kernel),
        m_(module),
        ctx_(module.getContext()),
        ir_(ctx_),
        i64_(llvm::Type::getInt64Ty(ctx_)),
        ptr_(llvm::PointerType::getUnqual(ctx_)) {}

  void render() {
    llvm::Function* body = renderBody();
    renderEntry(body);
  }

 private:
  /// `void name(ptr buffers, ptr args, i64 begin, i64 end)`: loads the buffer
  /// pointers and calls the body, which sees them as `noalias` parameters.
  void renderEntry(llvm::Function* body) {
    auto* type = llvm::FunctionType::get(ir_.getVoidTy(), {ptr_, ptr_, i64_, i64_}, false);
    auto* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, k_.name, m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::Argument* buffers = fn->getArg(0);
    buffers->setName("buffers");
    fn->getArg(1)->setName("args");
    fn->getArg(2)->setName("begin");
    fn->getArg(3)->setName("end");
    buffers->addAttr(llvm::Attribute::ReadOnly);
    fn->getArg(1)->addAttr(llvm::Attribute::ReadOnly);
    ir_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    std::vector<llvm::Value*> callArgs;
    for (int p = 0; p < k_.numParams(); ++p) {
      llvm::Value* slot = ir_.CreateConstInBoundsGEP1_64(ptr_, buffers, static_cast<uint64_t>(p));
      callArgs.push_back(ir_.CreateLoad(ptr_, slot, "p" + std::to_string(p)));
    }
    callArgs.push_back(fn->getArg(1));
    callArgs.push_back(fn->getArg(2));
    callArgs.push_back(fn->getArg(3));
    ir_.CreateCall(body, callArgs);
    ir_.CreateRetVoid();
  }

  llvm::Function* renderBody() {
    const int rank = k_.rank, numParams = k_.numParams();
    std::vector<llvm::Type*> argTypes(static_cast<size_t>(numParams), ptr_);
    argTypes.insert(argTypes.end(), {ptr_, i64_, i64_});
    auto* type = llvm::FunctionType::get(ir_.getVoidTy(), argTypes, false);
    auto* fn = llvm::Function::Create(type, llvm::Function::InternalLinkage, k_.name + ".body", m_);
    fn->addFnAttr(llvm::Attribute::AlwaysInline);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    for (int p = 0; p < numParams; ++p) {
      fn->getArg(static_cast<unsigned>(p))->setName("p" + std::to_string(p));
      fn->addParamAttr(static_cast<unsigned>(p), llvm::Attribute::NoAlias);
    }
    llvm::Argument* args = fn->getArg(static_cast<unsigned>(numParams));
    llvm::Argument* begin = fn->getArg(static_cast<unsigned>(numParams) + 1);
    llvm::Argument* end = fn->getArg(static_cast<unsigned>(numParams) + 2);
    args->setName("args");
    begin->setName("begin");
    end->setName("end");
    args->addAttr(llvm::Attribute::NoAlias);
    args->addAttr(llvm::Attribute::ReadOnly);

    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn);
    auto* start = llvm::BasicBlock::Create(ctx_, "start", fn);
    auto* rowHeader = llvm::BasicBlock::Create(ctx_, "row.header", fn);
    auto* rowBody = llvm::BasicBlock::Create(ctx_, "row.body", fn);
    auto* inner = llvm::BasicBlock::Create(ctx_, "inner", fn);
    auto* rowLatch = llvm::BasicBlock::Create(ctx_, "row.latch", fn);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn);

    // Sizes and strides are read once, up front: the loops see SSA values.
    ir_.SetInsertPoint(entry);
    auto arg = [&](int i, const std::string& name) {
      llvm::Value* slot = ir_.CreateConstInBoundsGEP1_64(i64_, args, static_cast<uint64_t>(i));
      return ir_.CreateLoad(i64_, slot, name);
    };
    std::vector<llvm::Value*> sizes(static_cast<size_t>(rank));
    std::vector<std::vector<llvm::Value*>> strides(static_cast<size_t>(numParams));
    for (int d = 0; d < rank; ++d) sizes[d] = arg(d, "size" + std::to_string(d));
    for (int p = 0; p < numParams; ++p)
      for (int d = 0; d < rank; ++d)
        strides[p].push_back(arg(rank + p * rank + d, "stride" + std::to_string(p) + "." + std::to_string(d)));
    // The multi-index and the flat position live in allocas that mem2reg
    // promotes; the carry logic is simpler to write that way.
    std::vector<llvm::AllocaInst*> idx(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) idx[d] = ir_.CreateAlloca(i64_, nullptr, "idx" + std::to_string(d));
    llvm::AllocaInst* pos = ir_.CreateAlloca(i64_, nullptr, "pos");
    // An empty range does nothing; a zero or negative size (or begin < 0)
    // would make the index division below trap or loop, so it does nothing too.
    llvm::Value* ok = ir_.CreateAnd(ir_.CreateICmpSLT(begin, end), ir_.CreateICmpSGE(begin, ir_.getInt64(0)));
    for (int d = 0; d < rank; ++d) ok = ir_.CreateAnd(ok, ir_.CreateICmpSGT(sizes[d], ir_.getInt64(0)));
    ir_.CreateCondBr(ok, start, exit);

    // The multi-index of `begin`, innermost dimension first.
    ir_.SetInsertPoint(start);
    llvm::Value* rem = begin;
    for (int d = rank - 1; d >= 0; --d) {
      ir_.CreateStore(ir_.CreateSRem(rem, sizes[d]), idx[d]);
      if (d > 0) rem = ir_.CreateSDiv(rem, sizes[d]);
    }
    ir_.CreateStore(begin, pos);
    ir_.CreateBr(rowHeader);

    ir_.SetInsertPoint(rowHeader);
    llvm::Value* i = ir_.CreateLoad(i64_, pos, "i");
    ir_.CreateCondBr(ir_.CreateICmpSLT(i, end), rowBody, exit);

    // The rest of the current row: n = min(size - idx, end - i) >= 1, since
    // idx < size and i < end here.
    ir_.SetInsertPoint(rowBody);
    std::vector<llvm::Value*> index(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) index[d] = ir_.CreateLoad(i64_, idx[d], "i" + std::to_string(d));
    llvm::Value* n = ir_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, ir_.CreateSub(sizes[rank - 1], index[rank - 1]),
                                               ir_.CreateSub(end, i), nullptr, "n");
    std::vector<llvm::Value*> base(static_cast<size_t>(numParams));
    for (int p = 0; p < numParams; ++p) {
      llvm::Value* off = ir_.CreateNSWMul(index[0], strides[p][0]);
      for (int d = 1; d < rank; ++d) off = ir_.CreateNSWAdd(off, ir_.CreateNSWMul(index[d], strides[p][d]));
      base[p] = off;
      base[p]->setName("base" + std::to_string(p));
    }
    ir_.CreateBr(inner);

    // The inner loop: j in [0, n), each param at base + j * innerStride.
    ir_.SetInsertPoint(inner);
    llvm::PHINode* j = ir_.CreatePHI(i64_, 2, "j");
    j->addIncoming(ir_.getInt64(0), rowBody);
    std::vector<llvm::Value*> offsets(static_cast<size_t>(numParams));
    for (int p = 0; p < numParams; ++p) {
      switch (k_.params[p].inner) {
        case InnerStride::zero: offsets[p] = base[p]; break;
        case InnerStride::one: offsets[p] = ir_.CreateNSWAdd(base[p], j); break;
        case InnerStride::any: offsets[p] = ir_.CreateNSWAdd(base[p], ir_.CreateNSWMul(j, strides[p][rank - 1])); break;
      }
    }
    renderInstrs(fn, offsets);
    llvm::Value* jNext = ir_.CreateNUWAdd(j, ir_.getInt64(1), "j.next");
    j->addIncoming(jNext, inner);
    ir_.CreateCondBr(ir_.CreateICmpSLT(jNext, n), inner, rowLatch);

    // Advance past the row: the innermost index moves by n, then carries.
    ir_.SetInsertPoint(rowLatch);
    ir_.CreateStore(ir_.CreateNSWAdd(i, n), pos);
    ir_.CreateStore(ir_.CreateNSWAdd(index[rank - 1], n), idx[rank - 1]);
    for (int d = rank - 1; d >= 1; --d) {
      llvm::Value* v = ir_.CreateLoad(i64_, idx[d]);
      llvm::Value* carry = ir_.CreateICmpSGE(v, sizes[d]);
      ir_.CreateStore(ir_.CreateSelect(carry, ir_.getInt64(0), v), idx[d]);
      llvm::Value* outer = ir_.CreateLoad(i64_, idx[d - 1]);
      ir_.CreateStore(ir_.CreateNSWAdd(outer, ir_.CreateZExt(carry, i64_)), idx[d - 1]);
    }
    ir_.CreateBr(rowHeader);

    ir_.SetInsertPoint(exit);
    ir_.CreateRetVoid();
    return fn;
  }

  /// The kernel's body at the current offsets. Loads and stores convert
  /// between memory and compute form (ir::formulas::loadValue/storeValue);
  /// f16 and bf16 results are rounded inside emitScalar.
  void renderInstrs(llvm::Function* fn, const std::vector<llvm::Value*>& offsets) {
    namespace f = ir::formulas;
    LlvmScalarBuilder b{ir_};
    std::vector<llvm::Value*> values(k_.body.size(), nullptr);
    auto address = [&](int param) {
      llvm::Type* t = storageType(ir_, k_.params[param].dtype);
      return ir_.CreateInBoundsGEP(t, fn->getArg(static_cast<unsigned>(param)), offsets[param]);
    };
    auto align = [](DType d) { return llvm::Align(static_cast<uint64_t>(itemSize(d))); };
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const ScalarInstr& in = k_.body[i];
      switch (in.kind) {
        case ScalarInstr::Kind::load: {
          const DType d = in.dtype;
          llvm::Value* raw =
              ir_.CreateAlignedLoad(storageType(ir_, d), address(in.param), align(d), "v" + std::to_string(i));
          if (d == DType::f16 || d == DType::bf16) raw = ir_.CreateZExt(raw, ir_.getInt32Ty());
          if (d == DType::boolean) raw = ir_.CreateICmpNE(raw, ir_.getInt8(0));
          values[i] = f::loadValue(b, raw, d);
          break;
        }
        case ScalarInstr::Kind::constant: values[i] = f::emitConstant(b, in.value, in.dtype); break;
        case ScalarInstr::Kind::op: {
          std::vector<llvm::Value*> operands;
          std::vector<DType> types;
          for (int o : in.operands) {
            operands.push_back(values[o]);
            types.push_back(k_.body[o].dtype);
          }
          values[i] = f::emitScalar(b, in.op, std::span<const DType>(types), in.dtype,
                                    std::span<llvm::Value* const>(operands), in.attrs);
          break;
        }
        case ScalarInstr::Kind::store: {
          const DType d = k_.params[in.param].dtype;
          llvm::Value* v = f::storeValue(b, values[in.operands[0]], d);
          if (d == DType::f16 || d == DType::bf16) v = ir_.CreateTrunc(v, ir_.getInt16Ty());
          if (d == DType::boolean) v = ir_.CreateZExt(v, ir_.getInt8Ty());
          ir_.CreateAlignedStore(v, address(in.param), align(d));
          break;
        }
      }
    }
  }

  const Kernel& k_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> ir_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
};

}  // namespace

void validateKernel(const Kernel& k) { checkKernel(k); }

std::unique_ptr<llvm::Module> renderModule(const Kernel& kernel, llvm::LLVMContext& context) {
  auto module = std::make_unique<llvm::Module>(kernel.name, context);
  setHostTarget(*module);
  KernelRenderer(kernel, *module).render();
  std::string problems;
  llvm::raw_string_ostream os(problems);
  const bool broken = llvm::verifyModule(*module, &os);
  KILN_ASSERT(!broken, "kernel {}: the LLVM renderer produced invalid IR: {}", kernel.name, os.str());
  return module;
}

}  // namespace llvmcg

std::string renderLlvmIr(const Kernel& kernel, bool optimized) {
  llvmcg::validateKernel(kernel);
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module = llvmcg::renderModule(kernel, context);
  if (optimized) llvmcg::optimizeModule(*module);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, nullptr);
  return os.str();
}

}  // namespace kiln::codegen

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
// parameter's offset (and each index space's index). The inner stride of a
// parameter is the constant 0 or 1
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
#include "codegen/llvm_builder.h"
#include "codegen/llvm_draws.h"
#include "codegen/llvm_module.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace llvmcg {

namespace {

/// Elements per strip of a row in a kernel that draws by groups (Note
/// [Draws by groups of four]): each grouped dropout's buffer holds a
/// strip's words, 4 KiB, which stay in L1 between the draw loop and the
/// element loop.
constexpr int64_t kDrawStrip = 1024;

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
    renderEntry(k_, m_, body);
  }

 private:
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
    // Params, then index spaces: each has a row of strides and an offset.
    const int numStrided = k_.numStrided();
    std::vector<std::vector<llvm::Value*>> strides(static_cast<size_t>(numStrided));
    for (int d = 0; d < rank; ++d) sizes[d] = arg(d, "size" + std::to_string(d));
    for (int p = 0; p < numStrided; ++p)
      for (int d = 0; d < rank; ++d)
        strides[p].push_back(arg(rank + p * rank + d, "stride" + std::to_string(p) + "." + std::to_string(d)));
    // The multi-index and the flat position live in allocas that mem2reg
    // promotes; the carry logic is simpler to write that way.
    std::vector<llvm::AllocaInst*> idx(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) idx[d] = ir_.CreateAlloca(i64_, nullptr, "idx" + std::to_string(d));
    llvm::AllocaInst* pos = ir_.CreateAlloca(i64_, nullptr, "pos");
    // Dropouts drawn by groups of four, each with its buffer of words.
    draws_.assign(k_.body.size(), nullptr);
    bool grouped = false;
    for (size_t i = 0; i < k_.body.size(); ++i) {
      if (!drawsByGroups(k_, static_cast<int>(i))) continue;
      auto* buffer = ir_.CreateAlloca(llvm::ArrayType::get(ir_.getInt32Ty(), kDrawStrip + 4), nullptr,
                                      "draws" + std::to_string(i));
      buffer->setAlignment(llvm::Align(64));
      draws_[i] = buffer;
      grouped = true;
    }
    drawAt_.assign(k_.body.size(), nullptr);
    // An empty range does nothing; a zero or negative size (or begin < 0)
    // would make the index division below trap or loop, so it does nothing too.
    emitRangeStart(ir_, begin, end, sizes, idx, start, exit);
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
    std::vector<llvm::Value*> base(static_cast<size_t>(numStrided));
    for (int p = 0; p < numStrided; ++p) {
      llvm::Value* off = ir_.CreateNSWMul(index[0], strides[p][0]);
      for (int d = 1; d < rank; ++d) off = ir_.CreateNSWAdd(off, ir_.CreateNSWMul(index[d], strides[p][d]));
      base[p] = off;
      base[p]->setName("base" + std::to_string(p));
    }
    // Without grouped draws the inner loop takes the whole rest of the row,
    // j in [0, n); with them, strips j in [s, s + m) of at most kDrawStrip
    // elements, each after the loops that draw its groups.
    llvm::Value* stripBegin = ir_.getInt64(0);
    llvm::Value* stripEnd = n;
    llvm::PHINode* s = nullptr;
    llvm::BasicBlock* strip = nullptr;
    if (grouped) {
      strip = llvm::BasicBlock::Create(ctx_, "strip", fn, inner);
      ir_.CreateBr(strip);
      ir_.SetInsertPoint(strip);
      s = ir_.CreatePHI(i64_, 2, "s");
      s->addIncoming(ir_.getInt64(0), rowBody);
      llvm::Value* m =
          ir_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, ir_.getInt64(kDrawStrip), ir_.CreateSub(n, s), nullptr, "m");
      stripBegin = s;
      stripEnd = ir_.CreateNSWAdd(s, m, "s.end");
      for (size_t i = 0; i < k_.body.size(); ++i) {
        if (!draws_[i]) continue;
        const ScalarInstr& in = k_.body[i];
        auto invariant = [&](int o) {
          const ScalarInstr& load = k_.body[static_cast<size_t>(o)];
          return loadElement(ir_, load.dtype, fn->getArg(static_cast<unsigned>(load.param)), base[load.param],
                             "v" + std::to_string(o));
        };
        const int space = k_.body[static_cast<size_t>(in.operands[3])].param;
        llvm::Value* first = ir_.CreateNSWAdd(base[numParams + space], s, "first" + std::to_string(i));
        emitDrawGroups(ir_, fn, invariant(in.operands[1]), invariant(in.operands[2]), first, m, draws_[i],
                       "d" + std::to_string(i));
        drawAt_[i] = ir_.CreateSub(ir_.CreateAnd(first, 3), s);  // + j: the element's word
      }
    }
    llvm::BasicBlock* preInner = ir_.GetInsertBlock();
    ir_.CreateBr(inner);

    // The inner loop: j in [stripBegin, stripEnd), each param at base + j * innerStride.
    ir_.SetInsertPoint(inner);
    llvm::PHINode* j = ir_.CreatePHI(i64_, 2, "j");
    j->addIncoming(stripBegin, preInner);
    std::vector<llvm::Value*> offsets(static_cast<size_t>(numStrided));
    for (int p = 0; p < numStrided; ++p) {
      switch (p < numParams ? k_.params[p].inner : k_.indexSpaces[p - numParams]) {
        case InnerStride::zero: offsets[p] = base[p]; break;
        case InnerStride::one: offsets[p] = ir_.CreateNSWAdd(base[p], j); break;
        case InnerStride::any: offsets[p] = ir_.CreateNSWAdd(base[p], ir_.CreateNSWMul(j, strides[p][rank - 1])); break;
      }
    }
    renderInstrs(fn, offsets, j);
    llvm::Value* jNext = ir_.CreateNUWAdd(j, ir_.getInt64(1), "j.next");
    j->addIncoming(jNext, inner);
    if (grouped) {
      auto* stripLatch = llvm::BasicBlock::Create(ctx_, "strip.latch", fn, rowLatch);
      ir_.CreateCondBr(ir_.CreateICmpSLT(jNext, stripEnd), inner, stripLatch);
      ir_.SetInsertPoint(stripLatch);
      s->addIncoming(stripEnd, stripLatch);
      ir_.CreateCondBr(ir_.CreateICmpSLT(stripEnd, n), strip, rowLatch);
    } else {
      ir_.CreateCondBr(ir_.CreateICmpSLT(jNext, n), inner, rowLatch);
    }

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

  /// The kernel's body at the current offsets (of the params, then the
  /// index spaces). Loads and stores convert
  /// between memory and compute form (ir::formulas::loadValue/storeValue);
  /// f16 and bf16 results are rounded inside emitScalar.
  void renderInstrs(llvm::Function* fn, const std::vector<llvm::Value*>& offsets, llvm::Value* j) {
    std::vector<llvm::Value*> values(k_.body.size(), nullptr);
    auto param = [&](int p) { return fn->getArg(static_cast<unsigned>(p)); };
    for (size_t i = 0; i < k_.body.size(); ++i) {
      const ScalarInstr& in = k_.body[i];
      switch (in.kind) {
        case ScalarInstr::Kind::load:
          values[i] = loadElement(ir_, in.dtype, param(in.param), offsets[in.param], "v" + std::to_string(i));
          break;
        case ScalarInstr::Kind::constant: {
          LlvmScalarBuilder b{ir_};
          values[i] = ir::formulas::emitConstant(b, in.value, in.dtype);
          break;
        }
        case ScalarInstr::Kind::op:
          values[i] = draws_[i] ? emitGroupedDropout(ir_, in, values[in.operands[0]], draws_[i],
                                                     ir_.CreateNSWAdd(drawAt_[i], j))
                                : emitOpInstr(ir_, k_, in, values);
          break;
        case ScalarInstr::Kind::store:
          storeElement(ir_, k_.params[in.param].dtype, param(in.param), offsets[in.param], values[in.operands[0]]);
          break;
        // The linear index of an index space is its "offset".
        case ScalarInstr::Kind::index: values[i] = offsets[k_.numParams() + in.param]; break;
        case ScalarInstr::Kind::reduce:
        case ScalarInstr::Kind::extent: KILN_ASSERT(false, "kernel {}: a reduction in an elementwise kernel", k_.name);
      }
    }
  }

  const Kernel& k_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> ir_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
  /// Per instruction: the buffer of a dropout drawn by groups, or null.
  std::vector<llvm::AllocaInst*> draws_;
  /// Per grouped dropout: its word's index in the buffer is drawAt_ + j.
  std::vector<llvm::Value*> drawAt_;
};

}  // namespace

void validateKernel(const Kernel& k) { checkKernel(k); }

void renderEntry(const Kernel& k, llvm::Module& m, llvm::Function* body) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::IRBuilder<> ir(ctx);
  llvm::Type* i64 = ir.getInt64Ty();
  llvm::PointerType* ptr = llvm::PointerType::getUnqual(ctx);
  auto* type = llvm::FunctionType::get(ir.getVoidTy(), {ptr, ptr, i64, i64}, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, k.name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Argument* buffers = fn->getArg(0);
  buffers->setName("buffers");
  fn->getArg(1)->setName("args");
  fn->getArg(2)->setName("begin");
  fn->getArg(3)->setName("end");
  buffers->addAttr(llvm::Attribute::ReadOnly);
  fn->getArg(1)->addAttr(llvm::Attribute::ReadOnly);
  ir.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  std::vector<llvm::Value*> callArgs;
  for (int p = 0; p < k.numParams(); ++p) {
    llvm::Value* slot = ir.CreateConstInBoundsGEP1_64(ptr, buffers, static_cast<uint64_t>(p));
    callArgs.push_back(ir.CreateLoad(ptr, slot, "p" + std::to_string(p)));
  }
  callArgs.push_back(fn->getArg(1));
  callArgs.push_back(fn->getArg(2));
  callArgs.push_back(fn->getArg(3));
  ir.CreateCall(body, callArgs);
  ir.CreateRetVoid();
}

std::unique_ptr<llvm::Module> renderModule(const Kernel& kernel, llvm::LLVMContext& context) {
  auto module = std::make_unique<llvm::Module>(kernel.name, context);
  setHostTarget(*module);
  if (kernel.isReduction())
    renderReduction(kernel, *module);
  else
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

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

/// Builds the two functions of one kernel in one module. The body walks
/// [begin, end) row by row: renderBody lays out the blocks, rowStart and
/// stripStart compute where a row (and a strip of it) starts, innerLoop
/// emits the element loop, rowLatch advances the multi-index.
class KernelRenderer {
 public:
  KernelRenderer(const Kernel& kernel, llvm::Module& module)
      : k_(kernel), m_(module), ctx_(module.getContext()), ir_(ctx_), i64_(llvm::Type::getInt64Ty(ctx_)) {}

  void render() {
    llvm::Function* body = renderBody();
    renderEntry(k_, m_, body);
  }

 private:
  llvm::Function* renderBody() {
    const int rank = k_.rank;
    fn_ = declareBody(k_, m_);
    llvm::Argument* begin = fn_->getArg(static_cast<unsigned>(k_.numParams()) + 1);
    end_ = fn_->getArg(static_cast<unsigned>(k_.numParams()) + 2);

    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    auto* start = llvm::BasicBlock::Create(ctx_, "start", fn_);
    rowHeader_ = llvm::BasicBlock::Create(ctx_, "row.header", fn_);
    rowBody_ = llvm::BasicBlock::Create(ctx_, "row.body", fn_);
    inner_ = llvm::BasicBlock::Create(ctx_, "inner", fn_);
    rowLatch_ = llvm::BasicBlock::Create(ctx_, "row.latch", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);

    // Sizes and strides are read once, up front: the loops see SSA values.
    ir_.SetInsertPoint(entry);
    args_ = loadKernelArgs(ir_, k_, fn_->getArg(static_cast<unsigned>(k_.numParams())));
    // The multi-index and the flat position live in allocas that mem2reg
    // promotes; the carry logic is simpler to write that way.
    idx_.assign(static_cast<size_t>(rank), nullptr);
    for (int d = 0; d < rank; ++d) idx_[d] = ir_.CreateAlloca(i64_, nullptr, "idx" + std::to_string(d));
    pos_ = ir_.CreateAlloca(i64_, nullptr, "pos");
    // Dropouts drawn by groups of four, each with its buffer of words.
    draws_.assign(k_.body.size(), nullptr);
    grouped_ = false;
    for (size_t i = 0; i < k_.body.size(); ++i) {
      if (!drawsByGroups(k_, static_cast<int>(i))) continue;
      auto* buffer = ir_.CreateAlloca(llvm::ArrayType::get(ir_.getInt32Ty(), kDrawStrip + 4), nullptr,
                                      "draws" + std::to_string(i));
      buffer->setAlignment(llvm::Align(64));
      draws_[i] = buffer;
      grouped_ = true;
    }
    drawAt_.assign(k_.body.size(), nullptr);
    // An empty range does nothing; a zero or negative size (or begin < 0)
    // would make the index division below trap or loop, so it does nothing too.
    emitRangeStart(ir_, begin, end_, args_.sizes, idx_, start, exit);
    ir_.CreateStore(begin, pos_);
    ir_.CreateBr(rowHeader_);

    ir_.SetInsertPoint(rowHeader_);
    i_ = ir_.CreateLoad(i64_, pos_, "i");
    ir_.CreateCondBr(ir_.CreateICmpSLT(i_, end_), rowBody_, exit);

    rowStart();
    innerLoop();
    rowLatch();

    ir_.SetInsertPoint(exit);
    ir_.CreateRetVoid();
    return fn_;
  }

  /// The rest of the current row: n = min(size - idx, end - i) >= 1, since
  /// idx < size and i < end here, and each param's (and index space's)
  /// offset at its start. Without grouped draws the inner loop takes the
  /// whole rest of the row, j in [0, n); with them, strips j in [s, s + m)
  /// of at most kDrawStrip elements, each after the loops that draw its groups.
  void rowStart() {
    const int rank = k_.rank, numStrided = k_.numStrided();
    ir_.SetInsertPoint(rowBody_);
    index_.assign(static_cast<size_t>(rank), nullptr);
    for (int d = 0; d < rank; ++d) index_[d] = ir_.CreateLoad(i64_, idx_[d], "i" + std::to_string(d));
    n_ = ir_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, ir_.CreateSub(args_.sizes[rank - 1], index_[rank - 1]),
                                   ir_.CreateSub(end_, i_), nullptr, "n");
    base_.assign(static_cast<size_t>(numStrided), nullptr);
    for (int p = 0; p < numStrided; ++p) {
      llvm::Value* off = ir_.CreateNSWMul(index_[0], args_.strides[p][0]);
      for (int d = 1; d < rank; ++d) off = ir_.CreateNSWAdd(off, ir_.CreateNSWMul(index_[d], args_.strides[p][d]));
      base_[p] = off;
      base_[p]->setName("base" + std::to_string(p));
    }
    stripBegin_ = ir_.getInt64(0);
    stripEnd_ = n_;
    s_ = nullptr;
    if (grouped_) stripStart();
    preInner_ = ir_.GetInsertBlock();
    ir_.CreateBr(inner_);
  }

  /// A strip of the row, its groups drawn ahead (Note [Draws by groups of four]).
  void stripStart() {
    strip_ = llvm::BasicBlock::Create(ctx_, "strip", fn_, inner_);
    ir_.CreateBr(strip_);
    ir_.SetInsertPoint(strip_);
    s_ = ir_.CreatePHI(i64_, 2, "s");
    s_->addIncoming(ir_.getInt64(0), rowBody_);
    llvm::Value* m =
        ir_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, ir_.getInt64(kDrawStrip), ir_.CreateSub(n_, s_), nullptr, "m");
    stripBegin_ = s_;
    stripEnd_ = ir_.CreateNSWAdd(s_, m, "s.end");
    for (size_t i = 0; i < k_.body.size(); ++i) {
      if (!draws_[i]) continue;
      const ScalarInstr& in = k_.body[i];
      auto invariant = [&](int o) {
        const ScalarInstr& load = k_.body[static_cast<size_t>(o)];
        return loadElement(ir_, load.dtype, fn_->getArg(static_cast<unsigned>(load.param)), base_[load.param],
                           "v" + std::to_string(o));
      };
      const int space = k_.body[static_cast<size_t>(in.operands[3])].param;
      llvm::Value* first = ir_.CreateNSWAdd(base_[k_.numParams() + space], s_, "first" + std::to_string(i));
      emitDrawGroups(ir_, fn_, invariant(in.operands[1]), invariant(in.operands[2]), first, m, draws_[i],
                     "d" + std::to_string(i));
      drawAt_[i] = ir_.CreateSub(ir_.CreateAnd(first, 3), s_);  // + j: the element's word
    }
  }

  /// The inner loop: j in [stripBegin, stripEnd), each param at base + j * innerStride.
  void innerLoop() {
    const int numStrided = k_.numStrided(), numParams = k_.numParams();
    ir_.SetInsertPoint(inner_);
    llvm::PHINode* j = ir_.CreatePHI(i64_, 2, "j");
    j->addIncoming(stripBegin_, preInner_);
    std::vector<llvm::Value*> offsets(static_cast<size_t>(numStrided));
    for (int p = 0; p < numStrided; ++p) {
      switch (p < numParams ? k_.params[p].inner : k_.indexSpaces[p - numParams]) {
        case InnerStride::zero: offsets[p] = base_[p]; break;
        case InnerStride::one: offsets[p] = ir_.CreateNSWAdd(base_[p], j); break;
        case InnerStride::any:
          offsets[p] = ir_.CreateNSWAdd(base_[p], ir_.CreateNSWMul(j, args_.strides[p][k_.rank - 1]));
          break;
      }
    }
    renderInstrs(fn_, offsets, j);
    llvm::Value* jNext = ir_.CreateNUWAdd(j, ir_.getInt64(1), "j.next");
    j->addIncoming(jNext, inner_);
    if (grouped_) {
      auto* stripLatch = llvm::BasicBlock::Create(ctx_, "strip.latch", fn_, rowLatch_);
      ir_.CreateCondBr(ir_.CreateICmpSLT(jNext, stripEnd_), inner_, stripLatch);
      ir_.SetInsertPoint(stripLatch);
      s_->addIncoming(stripEnd_, stripLatch);
      ir_.CreateCondBr(ir_.CreateICmpSLT(stripEnd_, n_), strip_, rowLatch_);
    } else {
      ir_.CreateCondBr(ir_.CreateICmpSLT(jNext, n_), inner_, rowLatch_);
    }
  }

  /// Advance past the row: the innermost index moves by n, then carries.
  void rowLatch() {
    const int rank = k_.rank;
    ir_.SetInsertPoint(rowLatch_);
    ir_.CreateStore(ir_.CreateNSWAdd(i_, n_), pos_);
    ir_.CreateStore(ir_.CreateNSWAdd(index_[rank - 1], n_), idx_[rank - 1]);
    emitCarry(ir_, idx_, args_.sizes);
    ir_.CreateBr(rowHeader_);
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
  llvm::Function* fn_ = nullptr;
  llvm::Value* end_ = nullptr;
  KernelArgValues args_;
  std::vector<llvm::AllocaInst*> idx_;  ///< the multi-index of the current position
  llvm::AllocaInst* pos_ = nullptr;     ///< the flat position
  llvm::BasicBlock *rowHeader_ = nullptr, *rowBody_ = nullptr, *inner_ = nullptr, *rowLatch_ = nullptr;
  llvm::BasicBlock *strip_ = nullptr, *preInner_ = nullptr;
  // The current row: its flat position, multi-index, length left and offsets.
  llvm::Value* i_ = nullptr;
  std::vector<llvm::Value*> index_;
  llvm::Value* n_ = nullptr;
  std::vector<llvm::Value*> base_;
  /// The inner loop's range: the row's rest, or the current strip [s_, s_ + m).
  llvm::Value *stripBegin_ = nullptr, *stripEnd_ = nullptr;
  llvm::PHINode* s_ = nullptr;
  /// Whether some dropout draws by groups (Note [Draws by groups of four]).
  bool grouped_ = false;
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

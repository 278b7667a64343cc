// Internal to the CPU backend: dropout's Philox blocks drawn by groups of
// four elements ahead of the element loop that uses them, shared by the
// elementwise renderer (codegen/llvm_renderer.cpp) and the reduction
// renderer (codegen/llvm_reduction.cpp). Only codegen/llvm_*.cpp may
// include it, since it names LLVM types.
//
// Note [Draws by groups of four]
// Four consecutive elements of a dropout share one Philox4x32-10 block,
// one word each (Note [Dropout draws] in ir/scalar_formulas_random.h). An
// element loop whose body computes its own element's block and picks its
// word would still run Philox once per element: the vectorizer sees eight
// independent lanes, not that lanes 4k .. 4k+3 compute the same block. So
// where a loop walks a dropout's index space with stride one and its seed
// and offset do not change along the loop, the renderer first emits a loop
// over the groups the run touches, which computes each block once (a loop
// the vectorizer vectorizes: Philox on vectors of groups, the four words
// stored interleaved) into a buffer of 32-bit words on the stack, word
// 4g + w holding word w of the run's g-th group; the element loop then
// loads its bits from the buffer, at (first & 3) + j for element j of a run
// whose first index is `first`. (Prefetching the run's inputs before the
// draw loop, so that memory would fetch them during the draws, was
// measured with kiln-bench and made relu -> dropout -> layer_norm no
// faster, so there is none.) The bits are those of the formula, so the
// result is the same as eager's, whichever way a kernel draws. Other
// dropouts (a strided index space, seed or offset computed per element) use
// the formula per element.
#pragma once

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Metadata.h>

#include <string>

#include "codegen/kernel.h"
#include "codegen/llvm_builder.h"
#include "ir/scalar_formulas.h"

namespace kiln::codegen::llvmcg {

/// Vectors of groups the draw loop interleaves (Note [Draws by groups of four]).
constexpr int kDrawInterleave = 2;

/// Whether dropout instruction `i` of `k` can be drawn by groups in a loop
/// along the innermost dim: its index space has inner stride one and its
/// seed and offset are loads of parameters that do not vary along that dim
/// (inner stride zero, or outer in a reduction kernel).
inline bool drawsByGroups(const Kernel& k, int i) {
  const ScalarInstr& in = k.body[static_cast<size_t>(i)];
  if (in.kind != ScalarInstr::Kind::op || in.op != ir::Op::dropout) return false;
  const ScalarInstr& index = k.body[static_cast<size_t>(in.operands[3])];
  if (k.indexSpaces[static_cast<size_t>(index.param)] != InnerStride::one) return false;
  for (int o : {in.operands[1], in.operands[2]}) {
    const ScalarInstr& s = k.body[static_cast<size_t>(o)];
    if (s.kind != ScalarInstr::Kind::load) return false;
    const KernelParam& p = k.params[static_cast<size_t>(s.param)];
    if (!p.outer && p.inner != InnerStride::zero) return false;
  }
  return true;
}

/// Emits, at the insert point of `ir` in `fn`, a loop that fills `buffer`
/// (i32 words, at least 4 * ceil(((first & 3) + count) / 4)) with the
/// blocks of the groups of elements first .. first + count - 1 of the draw
/// (seed, offset) (Note [Draws by groups of four]); count >= 1. Leaves the
/// insert point after the loop.
inline void emitDrawGroups(llvm::IRBuilder<>& ir, llvm::Function* fn, llvm::Value* seed, llvm::Value* offset,
                           llvm::Value* first, llvm::Value* count, llvm::Value* buffer, const std::string& tag) {
  llvm::LLVMContext& ctx = ir.getContext();
  llvm::Type* i64 = ir.getInt64Ty();
  llvm::Type* i32 = ir.getInt32Ty();
  llvm::Value* group0 = ir.CreateLShr(first, 2, tag + ".group0");
  llvm::Value* words = ir.CreateAdd(ir.CreateAnd(first, 3), count);
  llvm::Value* groups = ir.CreateLShr(ir.CreateAdd(words, ir.getInt64(3)), 2, tag + ".groups");
  llvm::BasicBlock* pre = ir.GetInsertBlock();
  // Placed right after the current block, so the listing reads in order.
  llvm::BasicBlock* after = pre->getNextNode();
  auto* loop = llvm::BasicBlock::Create(ctx, tag + ".draw", fn, after);
  auto* done = llvm::BasicBlock::Create(ctx, tag + ".drawn", fn, after);
  ir.CreateBr(loop);
  ir.SetInsertPoint(loop);
  llvm::PHINode* g = ir.CreatePHI(i64, 2, tag + ".g");
  g->addIncoming(ir.getInt64(0), pre);
  LlvmScalarBuilder b{ir};
  const auto block = ir::formulas::dropoutBlock(b, seed, offset, ir.CreateAdd(group0, g));
  for (int w = 0; w < 4; ++w) {
    llvm::Value* at = ir.CreateNUWAdd(ir.CreateNUWMul(g, ir.getInt64(4)), ir.getInt64(static_cast<uint64_t>(w)));
    ir.CreateAlignedStore(ir.CreateTrunc(block[static_cast<size_t>(w)], i32), ir.CreateInBoundsGEP(i32, buffer, at),
                          llvm::Align(4));
  }
  llvm::Value* next = ir.CreateNUWAdd(g, ir.getInt64(1));
  g->addIncoming(next, ir.GetInsertBlock());
  llvm::BranchInst* latch = ir.CreateCondBr(ir.CreateICmpULT(next, groups), loop, done);
  // Ten dependent rounds make one iteration a long chain of multiplies:
  // interleaving kDrawInterleave vectors of groups keeps the multipliers
  // busy (the cost model picks 1).
  llvm::Type* i32t = llvm::Type::getInt32Ty(ctx);
  llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx, {});
  llvm::Metadata* hint[] = {llvm::MDString::get(ctx, "llvm.loop.interleave.count"),
                            llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32t, kDrawInterleave))};
  llvm::Metadata* ops[] = {self.get(), llvm::MDNode::get(ctx, hint)};
  llvm::MDNode* md = llvm::MDNode::getDistinct(ctx, ops);
  md->replaceOperandWith(0, md);
  latch->setMetadata(llvm::LLVMContext::MD_loop, md);
  ir.SetInsertPoint(done);
}

/// The dropout of instruction `in` (x = `x`) at the element whose word sits
/// at `at` in a buffer filled by emitDrawGroups.
inline llvm::Value* emitGroupedDropout(llvm::IRBuilder<>& ir, const ScalarInstr& in, llvm::Value* x,
                                       llvm::Value* buffer, llvm::Value* at) {
  llvm::Type* i32 = ir.getInt32Ty();
  llvm::Value* word = ir.CreateAlignedLoad(i32, ir.CreateInBoundsGEP(i32, buffer, at), llvm::Align(4));
  LlvmScalarBuilder b{ir};
  return ir::formulas::emitDropoutOfBits(b, in.dtype, x, ir.CreateZExt(word, ir.getInt64Ty()), in.attrs);
}

}  // namespace kiln::codegen::llvmcg

// Column tiles of the LLVM reduction renderer (codegen/llvm_reduction.h):
// a one-pass kernel whose rows are columns walks blocks of neighbouring
// output rows together, the block's columns in the vectorized innermost
// loop (Note [Column tiles]).
#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Metadata.h>

#include <functional>
#include <string>
#include <vector>

#include "codegen/llvm_reduction.h"
#include "runtime/error.h"

namespace kiln::codegen::llvmcg {

namespace {

// Note [Column tiles]: in a kernel whose rows are columns (sum(x, {0}) of
// an [R, C] x: C output rows, each a column walked with a stride of C
// elements), the row loop reads one element per cache line, and Note [Fixed
// summation order] keeps it sequential, so a column sum ran ~50x slower
// than a row sum. Such a kernel instead computes a block of up to
// kColumnTile neighbouring output rows (columns) c..c+T at once:
//
//   for t < T: acc[t] = identity
//   for each reduced index r, in the row's order:   (the same nest as rowLoop)
//     for t < T: acc[t] = fold(acc[t], value(r, c + t))   <- vectorized
//   for t < T: epilogue and stores of output row c + t, from acc[t]
//
// The innermost loop runs across columns, so its loads are contiguous (a
// whole run of a row of x per r) and the loop vectorizer vectorizes it with
// T independent accumulators kept in a stack array: lane t only ever adds
// into acc[t]. There is no reduction across lanes, so nothing reassociates:
// each column is still folded in sequence, r = 0, 1, 2, ..., with the same
// accumulator dtype, the same plain `fadd` (no `reassoc`, as in every
// strided kernel) and the same formulas for every value, so each output
// bit equals what the row loop computes. Eager and compiled kernels take
// the same decision from the same arguments, and both orders are the one
// the row loop has, so Note [Eager equals compiled] holds whichever path a
// launch takes.
//
// Scope, decided when rendering (columnTiles_): a kernel with a row param
// of inner stride `any` (whose float sums are sequential; elsewhere the
// vectorized order of Note [Fixed summation order] must not change), one
// pass (no stash, no value needing a reduction's result along the row), no
// argmax (its search loop is per row) and no row stores. Each param and
// index space the block's pass reads (row params, index spaces, outer
// params whose values the row values use) gets the stride it must have
// along the innermost outer dim for the block to read it contiguously
// (tileStride_): 0 when it is contiguous along the row (a per-row-of-x
// mean or rstd, broadcast across columns), else 1 (x itself, a per-column
// weight). At run time a launch takes blocks only where each of those
// strides matches (a strided or transposed view, a slice with a step,
// falls back to the row loop for the whole launch); a block never crosses
// the end of [begin, end) nor of a run of the innermost outer dim, and a
// piece shorter than kMinColumnTile (a tail) takes the row loop. Outer
// values that row values use are recomputed per element inside the block;
// the epilogue computes each column's outer values and stores with the
// launch's own strides (offsets are linear within a run), so outputs and
// per-column operands of any layout (an optimizer's broadcast scalars) are
// fine.
//
// GPU reductions are untouched: a work-group per row still walks a column with
// a stride (docs/fusion.md, "Limits").
constexpr int64_t kColumnTile = 256;
constexpr int64_t kMinColumnTile = 8;

}  // namespace

void ReductionRenderer::planColumnTiles() {
  columnTiles_ = stridedRows_ && st_.numPasses == 1;
  for (size_t i = 0; i < k_.body.size(); ++i) {
    const ScalarInstr& in = k_.body[i];
    if (in.kind == ScalarInstr::Kind::reduce && in.reduceOp == ReduceOp::argmax) columnTiles_ = false;
    if (in.kind == ScalarInstr::Kind::store && st_.row[i]) columnTiles_ = false;
  }
  for (int p = 0; p < k_.numStrided(); ++p) {
    const bool outer = p < k_.numParams() && k_.params[p].outer;
    const InnerStride inner = p < k_.numParams() ? k_.params[p].inner : k_.indexSpaces[p - k_.numParams()];
    tileStride_.push_back(!outer && inner == InnerStride::one ? 0 : 1);
    tileReads_.push_back(!outer);
  }
  // The outer values the pass's row values use, and the outer params they load.
  if (columnTiles_) {
    tileOuter_.assign(k_.body.size(), false);
    for (int i : st_.pass[0])
      for (int o : k_.body[i].operands) tileOuter_[o] = !st_.row[o];
    for (int i = static_cast<int>(k_.body.size()) - 1; i >= 0; --i) {
      if (!tileOuter_[i]) continue;
      for (int o : k_.body[i].operands) tileOuter_[o] = true;
      if (k_.body[i].kind == ScalarInstr::Kind::load) tileReads_[k_.body[i].param] = true;
    }
  }
}

llvm::Value* ReductionRenderer::allocateTiles() {
  if (!columnTiles_) return nullptr;
  const int count = static_cast<int>(k_.body.size());
  accTile_.assign(static_cast<size_t>(count), nullptr);
  for (int i = 0; i < count; ++i) {
    if (!acc_[i]) continue;
    auto* tile = ir_.CreateAlloca(llvm::ArrayType::get(acc_[i]->getAllocatedType(), kColumnTile), nullptr,
                                  "acc" + std::to_string(i) + ".tile");
    tile->setAlignment(llvm::Align(64));
    accTile_[i] = tile;
  }
  llvm::Value* tilesOk = ir_.getTrue();
  for (int p = 0; p < k_.numStrided(); ++p)
    if (tileReads_[p])
      tilesOk = ir_.CreateAnd(tilesOk, ir_.CreateICmpEQ(strides_[p][k_.outerRank() - 1], ir_.getInt64(tileStride_[p])));
  tilesOk->setName("tiles.ok");
  return tilesOk;
}

void ReductionRenderer::emitTileCheck(const std::string& tag, llvm::Value* tilesOk, llvm::BasicBlock* rowBody) {
  const int outerRank = k_.outerRank();
  auto* tileCheck = llvm::BasicBlock::Create(ctx_, tag + "tile.check", fn_);
  auto* tileBody = llvm::BasicBlock::Create(ctx_, tag + "tile.body", fn_);
  ir_.CreateCondBr(ir_.CreateICmpSLT(i_, end_), tileCheck, exit_);
  ir_.SetInsertPoint(tileCheck);
  llvm::Value* inRun = ir_.CreateNSWSub(sizes_[outerRank - 1], ir_.CreateLoad(i64_, idx_[outerRank - 1]));
  llvm::Value* len = ir_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, ir_.CreateNSWSub(end_, i_), inRun);
  len = ir_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, len, ir_.getInt64(kColumnTile), nullptr, "tile.len");
  ir_.CreateCondBr(ir_.CreateAnd(tilesOk, ir_.CreateICmpSGE(len, ir_.getInt64(kMinColumnTile))), tileBody, rowBody);
  ir_.SetInsertPoint(tileBody);
  const std::vector<llvm::Value*> index = outerBases();
  emitColumnTile(len);
  advance(index, len);
}

void ReductionRenderer::emitColumnTile(llvm::Value* len) {
  const int count = static_cast<int>(k_.body.size());
  const PassPlan& plan = plans_[0];
  std::vector<int> reduces;
  for (int i : st_.pass[0])
    if (k_.body[i].kind == ScalarInstr::Kind::reduce) reduces.push_back(i);
  const std::vector<llvm::Value*> base = outerBase_;
  // In the pass: offsets and the outer values the pass uses at column t.
  auto atColumn = [&](llvm::Value* t) {
    outerBase_ = shiftedToColumn(base, t);
    values_.assign(static_cast<size_t>(count), nullptr);
    for (int instr : st_.before[0])
      if (tileOuter_[instr]) emitOuter(instr);
  };
  // In the epilogue: offsets moved by the launch's own strides along the
  // innermost outer dim (linear within a run), whatever they are.
  auto atColumnEpilogue = [&](llvm::Value* t) {
    outerBase_ = base;
    for (size_t p = 0; p < base.size(); ++p)
      outerBase_[p] = ir_.CreateNSWAdd(base[p], ir_.CreateNSWMul(t, strides_[p][k_.outerRank() - 1]));
    values_.assign(static_cast<size_t>(count), nullptr);
    for (int instr : st_.before[0]) emitOuter(instr);
  };
  auto columns = [&](const std::string& tag, const std::function<void(llvm::Value*)>& body, bool vectorize) {
    columnLoop(tag, len, base, body, vectorize);
  };
  auto tileSlot = [&](int r, llvm::Value* t) {
    return ir_.CreateInBoundsGEP(accTile_[r]->getAllocatedType(), accTile_[r], {zero(), t});
  };
  columns(
      "tile.init",
      [&](llvm::Value* t) {
        for (int r : reduces) ir_.CreateStore(identity(k_.body[r]), tileSlot(r, t));
      },
      false);
  rowLoop("tile.pass0", [&](llvm::Value* j, llvm::Value* pos, const std::vector<llvm::Value*>& rowBase) {
    columns(
        "tile.columns",
        [&](llvm::Value* t) {
          atColumn(t);
          tileT_ = t;
          rowValues(plan.todo, j, pos, shiftedToColumn(rowBase, t), &plan);
          tileT_ = nullptr;
        },
        true);
  });
  columns(
      "tile.epilogue",
      [&](llvm::Value* t) {
        atColumnEpilogue(t);
        for (int r : reduces) values_[r] = ir_.CreateLoad(acc_[r]->getAllocatedType(), tileSlot(r, t));
        for (int instr : st_.before[1]) emitOuter(instr);
      },
      false);
}

std::vector<llvm::Value*> ReductionRenderer::shiftedToColumn(const std::vector<llvm::Value*>& at, llvm::Value* t) {
  std::vector<llvm::Value*> out = at;
  for (size_t p = 0; p < out.size(); ++p)
    if (out[p] && tileStride_[p]) out[p] = ir_.CreateNSWAdd(out[p], t);
  return out;
}

void ReductionRenderer::columnLoop(const std::string& tag, llvm::Value* len, const std::vector<llvm::Value*>& base,
                                   const std::function<void(llvm::Value*)>& body, bool vectorize) {
  llvm::BasicBlock* pre = ir_.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx_, tag, fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, tag + ".done", fn_);
  ir_.CreateBr(loop);
  ir_.SetInsertPoint(loop);
  llvm::PHINode* t = ir_.CreatePHI(i64_, 2, tag + ".t");
  t->addIncoming(zero(), pre);
  body(t);
  outerBase_ = base;
  llvm::Value* next = ir_.CreateNUWAdd(t, ir_.getInt64(1));
  t->addIncoming(next, ir_.GetInsertBlock());
  llvm::BranchInst* latch = ir_.CreateCondBr(ir_.CreateICmpSLT(next, len), loop, done);
  if (vectorize) latch->setMetadata(llvm::LLVMContext::MD_loop, vectorizeLoop());
  ir_.SetInsertPoint(done);
}

llvm::MDNode* ReductionRenderer::vectorizeLoop() {
  llvm::Metadata* enable[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                              llvm::ConstantAsMetadata::get(ir_.getTrue())};
  llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx_, {});
  llvm::Metadata* ops[] = {self.get(), llvm::MDNode::get(ctx_, enable)};
  llvm::MDNode* loop = llvm::MDNode::getDistinct(ctx_, ops);
  loop->replaceOperandWith(0, loop);
  return loop;
}

}  // namespace kiln::codegen::llvmcg

// Renders a reduction Kernel (codegen/kernel.h, "Reductions") to LLVM IR:
// the CPU kernel ABI around a loop over output rows, each row computed by
// the passes of codegen::kernelStages, each pass a loop nest over the row
// whose innermost loop the O3 pipeline vectorizes.
//
// [begin, end) is a range of output rows (the outer domain, flattened), so a
// thread owns whole rows and no two threads write one output element. For
// each row the renderer computes the outer values in order: before pass l
// the outer values of stage l, then pass l, a loop over the row (the reduced
// dims, innermost last; with more than one reduced dim, a loop over the
// outer reduced dims around a loop over the innermost one) that loads and
// computes the row values it needs and folds them into its accumulators,
// which are read back after it. Stores of outer values come last.
//
// Accumulators live in allocas that SROA turns into loop phis, which the
// loop vectorizer recognizes as reductions: integer adds and smax/smin,
// llvm.maximum/llvm.minimum (NaN-propagating, so order does not matter)
// and, for float sums, an `fadd` with the `reassoc` flag, the only
// fast-math flag kiln emits (DESIGN.md §6): it lets the vectorizer keep one
// partial sum per lane and unrolled copy and add them up after the loop, so
// the order of a float sum depends on the vector width (docs/ops.md,
// "Reductions", states the bound; lowering accumulates f32 in f64). argmax
// folds the maximum in the vectorized loop, then a short scalar loop finds
// the first element equal to it (or the first NaN): a loop-carried (value,
// index) pair would not vectorize and costs about 20x more.
//
// A one-pass kernel whose rows are columns (a sum over the outer dim) walks
// blocks of neighbouring output rows together instead (Note [Column tiles]).
#include "codegen/llvm_reduction.h"

#include "codegen/llvm_draws.h"
#include "codegen/llvm_module.h"
#include "runtime/error.h"

namespace kiln::codegen::llvmcg {

namespace {

// Note [Fixed summation order]: a float sum's order is where its rounding
// happens, so eager and compiled code agree bit for bit only if every kernel
// that sums a row sums it in the same order. The loop vectorizer would pick
// the vector width and the interleave count from its cost model, which
// weighs the whole loop body: a fused pass that computes exp(x - m) before
// adding could get another split than eager's sum kernel, which only loads
// and adds. So every pass with a float sum carries loop metadata that fixes
// them: kSumLanes partial sums per vector, kSumInterleave vectors (32
// partial sums, combined as LLVM's reduction tree does, then the scalar
// remainder in order), on every host CPU. The vectorizer honours these hints
// whenever the loop is legal to vectorize, which every pass is (loads,
// stores, arithmetic, no calls). With a width below 16 it adds no vectorized
// epilogue, whose width the cost model would choose.
//
// One exception: a loop that reads or writes a row with a stride known
// only at run time (inner stride class `any`: a column, a transposed view)
// is versioned by the vectorizer on that stride being 1, which it never is
// for such a kernel, so the scalar loop would run, in an order that
// unrolling and the `reassoc` flag leave to LLVM. So in a kernel with any
// such row parameter every float sum is added in plain sequential order:
// no `reassoc`, vectorization off. Which of the two orders a kernel gets
// depends on its parameters only; fuse-reductions fuses a sum only where
// the fused kernel gets the order eager's kernel of that sum gets (Note
// [Rows walked as eager walks them] in passes/fuse_reductions.cpp).
constexpr int kSumLanes = 8;
constexpr int kSumInterleave = 4;

// Note [Sums at full width]
// A float sum's loop has a fixed width, kSumLanes (Note [Fixed summation
// order]), and f32 values sum in f64: a pass that computes much before it
// adds (softmax's exp(x - max), stored to the stash and summed) then does
// all of that arithmetic kSumLanes f32 lanes at a time, half a 512-bit
// register. Where the kernel has a stash (its rows are bounded) and a pass
// with a float sum computes operations of a cost (ir::recomputeCost) of at
// least kSumApartCost (an exp, or a few arithmetic operations), the pass
// becomes two loops over the row: the first computes everything the pass
// computes (stores, stash, dropout draws) but, instead of folding, stores
// each reduce's operand by its row position into a buffer on the stack; it
// has no reduction, so it vectorizes at the full width (Note [Vector width
// of kiln's kernels]). The second loads them back and folds them with the
// fixed-order metadata: the same values added in the same order, so the
// sums keep their bits. The buffer costs a store and a load per element,
// from L1; softmax's exp pass goes from 1.97 to 1.43 cycles per element
// on znver4 by llvm-mca, its values interleaved (docs/fusion.md,
// "Transcendentals on AVX-512").
constexpr int kSumApartCost = 4;

// The stash of Note [Stashed row values] (codegen/kernel.cpp): the row's
// stashed values in their compute types, on the stack, sized for
// Kernel::maxRowLength elements; a kernel whose bound needs more than
// kStashBytes recomputes instead.
constexpr int64_t kStashBytes = 64 * 1024;

}  // namespace

ReductionRenderer::ReductionRenderer(const Kernel& kernel, llvm::Module& module)
    : k_(kernel),
      m_(module),
      ctx_(module.getContext()),
      ir_(ctx_),
      i64_(llvm::Type::getInt64Ty(ctx_)),
      st_(kernelStages(kernel)) {
  for (const KernelParam& p : kernel.params) stridedRows_ = stridedRows_ || (!p.outer && p.inner == InnerStride::any);
  planColumnTiles();
}

llvm::Value* ReductionRenderer::identity(const ScalarInstr& r) {
  const DType d = ir::formulas::computeDType(k_.body[r.operands[0]].dtype);
  llvm::Type* t = computeType(d);
  const bool isMin = r.reduceOp == ReduceOp::min;
  switch (r.reduceOp) {
    case ReduceOp::sum: return t->isFloatingPointTy() ? llvm::ConstantFP::get(t, 0.0) : llvm::ConstantInt::get(t, 0);
    case ReduceOp::max:
    case ReduceOp::min:
    case ReduceOp::argmax:
      if (t->isFloatingPointTy()) return llvm::ConstantFP::getInfinity(t, !isMin);
      if (d == DType::boolean) return ir_.getInt1(isMin);
      return isMin ? llvm::ConstantInt::get(t, llvm::APInt::getSignedMaxValue(t->getIntegerBitWidth()))
                   : llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(t->getIntegerBitWidth()));
  }
  return nullptr;
}

void ReductionRenderer::fold(const ScalarInstr& r, llvm::Value* acc, llvm::Value* v) {
  llvm::Value* a = ir_.CreateLoad(v->getType(), acc);
  const bool isFloat = v->getType()->isFloatingPointTy();
  const bool isBool = v->getType()->isIntegerTy(1);
  llvm::Value* out = nullptr;
  switch (r.reduceOp) {
    case ReduceOp::sum:
      if (isFloat) {
        // The one fast-math flag: the vectorizer may keep partial sums.
        out = ir_.CreateFAdd(a, v);
        if (!stridedRows_) llvm::cast<llvm::Instruction>(out)->setHasAllowReassoc(true);
      } else {
        out = ir_.CreateAdd(a, v);
      }
      break;
    case ReduceOp::max:
    case ReduceOp::argmax:
      out = isFloat  ? ir_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a, v)
            : isBool ? ir_.CreateOr(a, v)
                     : ir_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, v);
      break;
    case ReduceOp::min:
      out = isFloat  ? ir_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a, v)
            : isBool ? ir_.CreateAnd(a, v)
                     : ir_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, v);
      break;
  }
  ir_.CreateStore(out, acc);
}

llvm::Function* ReductionRenderer::renderBody() {
  const int rank = k_.rank, outerRank = k_.outerRank(), numParams = k_.numParams();
  fn_ = declareBody(k_, m_);
  llvm::Argument* begin = fn_->getArg(static_cast<unsigned>(numParams) + 1);
  end_ = fn_->getArg(static_cast<unsigned>(numParams) + 2);

  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  auto* start = llvm::BasicBlock::Create(ctx_, "start", fn_);
  exit_ = llvm::BasicBlock::Create(ctx_, "exit", fn_);

  ir_.SetInsertPoint(entry);
  KernelArgValues args = loadKernelArgs(ir_, k_, fn_->getArg(static_cast<unsigned>(numParams)));
  sizes_ = std::move(args.sizes);
  strides_ = std::move(args.strides);  // params, then index spaces
  rowLength_ = sizes_[outerRank];
  for (int d = outerRank + 1; d < rank; ++d) rowLength_ = ir_.CreateNSWMul(rowLength_, sizes_[d]);
  rowLength_->setName("row.length");
  allocateLocals();
  llvm::Value* tilesOk = allocateTiles();
  // Nothing to do for an empty range or an empty outer domain; rows of
  // no elements are fine (every pass is skipped).
  const std::vector<PassPlan> plans = allocateStash();
  emitRangeStart(ir_, begin, end_, std::vector<llvm::Value*>(sizes_.begin(), sizes_.begin() + outerRank), idx_, start,
                 exit_);
  ir_.CreateStore(begin, pos_);
  if (stash_) {
    // Lowering bounds every launch's rows (Kernel::maxRowLength); a longer
    // row would overflow the stash: a kiln bug, so trap rather than write.
    auto* fits = llvm::BasicBlock::Create(ctx_, "stash.fits", fn_);
    auto* tooLong = llvm::BasicBlock::Create(ctx_, "stash.too.long", fn_);
    ir_.CreateCondBr(ir_.CreateICmpSLE(rowLength_, ir_.getInt64(k_.maxRowLength)), fits, tooLong);
    ir_.SetInsertPoint(tooLong);
    ir_.CreateIntrinsic(llvm::Intrinsic::trap, {}, {});
    ir_.CreateUnreachable();
    ir_.SetInsertPoint(fits);
  }
  emitRows(stash_ ? "stash." : "", plans, tilesOk);

  ir_.SetInsertPoint(exit_);
  ir_.CreateRetVoid();
  return fn_;
}

void ReductionRenderer::allocateLocals() {
  const int rank = k_.rank, outerRank = k_.outerRank();
  const int count = static_cast<int>(k_.body.size());
  idx_.assign(static_cast<size_t>(outerRank), nullptr);
  for (int d = 0; d < outerRank; ++d) idx_[d] = ir_.CreateAlloca(i64_, nullptr, "idx" + std::to_string(d));
  pos_ = ir_.CreateAlloca(i64_, nullptr, "pos");
  for (int d = outerRank; d < rank - 1; ++d)
    ridx_.push_back(ir_.CreateAlloca(i64_, nullptr, "ridx" + std::to_string(d)));
  rflat_ = ir_.CreateAlloca(i64_, nullptr, "rflat");
  acc_.assign(static_cast<size_t>(count), nullptr);
  accIndex_.assign(static_cast<size_t>(count), nullptr);
  for (int i = 0; i < count; ++i) {
    const ScalarInstr& in = k_.body[i];
    if (in.kind != ScalarInstr::Kind::reduce) continue;
    acc_[i] = ir_.CreateAlloca(computeType(k_.body[in.operands[0]].dtype), nullptr, "acc" + std::to_string(i));
    if (in.reduceOp == ReduceOp::argmax)
      accIndex_[i] = ir_.CreateAlloca(i64_, nullptr, "acc" + std::to_string(i) + ".index");
  }
}

std::vector<PassPlan> ReductionRenderer::allocateStash() {
  const int count = static_cast<int>(k_.body.size());
  std::vector<PassPlan> plans = planPasses(k_.maxRowLength > 0);
  const bool stash = stashRowBytes_ > 0 && k_.maxRowLength * stashRowBytes_ <= kStashBytes;
  if (!stash) return planPasses(false);
  llvm::AllocaInst* buffer = ir_.CreateAlloca(
      llvm::ArrayType::get(ir_.getInt8Ty(), static_cast<uint64_t>(k_.maxRowLength * stashRowBytes_)), nullptr, "stash");
  buffer->setAlignment(llvm::Align(64));
  stash_ = buffer;
  // Dropouts drawn by groups of four (Note [Draws by groups of four]): a
  // run of the row is at most maxRowLength elements, which the check in
  // renderBody holds every launch to, so one buffer holds a run's words.
  draws_.assign(static_cast<size_t>(count), nullptr);
  for (int i = 0; i < count; ++i) {
    if (!drawsByGroups(k_, i)) continue;
    auto* words = ir_.CreateAlloca(llvm::ArrayType::get(ir_.getInt32Ty(), static_cast<uint64_t>(k_.maxRowLength + 4)),
                                   nullptr, "draws" + std::to_string(i));
    words->setAlignment(llvm::Align(64));
    draws_[static_cast<size_t>(i)] = words;
  }
  return plans;
}

void ReductionRenderer::emitRows(const std::string& tag, const std::vector<PassPlan>& plans, llvm::Value* tilesOk) {
  rowHeader_ = llvm::BasicBlock::Create(ctx_, tag + "row.header", fn_);
  auto* rowBody = llvm::BasicBlock::Create(ctx_, tag + "row.body", fn_);
  ir_.CreateBr(rowHeader_);
  ir_.SetInsertPoint(rowHeader_);
  i_ = ir_.CreateLoad(i64_, pos_, "i");
  plans_ = plans;
  if (tilesOk && !stash_)
    emitTileCheck(tag, tilesOk, rowBody);
  else
    ir_.CreateCondBr(ir_.CreateICmpSLT(i_, end_), rowBody, exit_);

  // One output row: the outer offsets, then the outer values and passes.
  ir_.SetInsertPoint(rowBody);
  const std::vector<llvm::Value*> index = outerBases();
  values_.assign(k_.body.size(), nullptr);
  for (int l = 0; l <= st_.numPasses; ++l) {
    for (int instr : st_.before[l]) emitOuter(instr);
    if (l < st_.numPasses) emitPass(l);
  }
  advance(index, ir_.getInt64(1));
}

std::vector<llvm::Value*> ReductionRenderer::outerBases() {
  const int outerRank = k_.outerRank(), numStrided = k_.numStrided();
  std::vector<llvm::Value*> index(static_cast<size_t>(outerRank), nullptr);
  for (int d = 0; d < outerRank; ++d) index[d] = ir_.CreateLoad(i64_, idx_[d], "i" + std::to_string(d));
  outerBase_.assign(static_cast<size_t>(numStrided), nullptr);
  for (int p = 0; p < numStrided; ++p) {
    llvm::Value* off = ir_.CreateNSWMul(index[0], strides_[p][0]);
    for (int d = 1; d < outerRank; ++d) off = ir_.CreateNSWAdd(off, ir_.CreateNSWMul(index[d], strides_[p][d]));
    outerBase_[p] = off;
    off->setName("base" + std::to_string(p));
  }
  return index;
}

void ReductionRenderer::advance(const std::vector<llvm::Value*>& index, llvm::Value* step) {
  const int outerRank = k_.outerRank();
  ir_.CreateStore(ir_.CreateNSWAdd(i_, step), pos_);
  ir_.CreateStore(ir_.CreateNSWAdd(index[outerRank - 1], step), idx_[outerRank - 1]);
  emitCarry(ir_, idx_, sizes_);
  ir_.CreateBr(rowHeader_);
}

std::vector<PassPlan> ReductionRenderer::planPasses(bool stash) {
  const int count = static_cast<int>(k_.body.size());
  std::vector<PassPlan> plans(static_cast<size_t>(st_.numPasses));
  const std::vector<int>& first = st_.firstPass;
  std::vector<bool> stashed(static_cast<size_t>(count), false);
  if (stash) stashed = st_.stashed;
  slots_.assign(static_cast<size_t>(count), -1);
  slotOffset_.clear();
  stashRowBytes_ = 0;
  for (int i = 0; i < count; ++i) {
    if (!stashed[i]) continue;
    slots_[i] = static_cast<int>(slotOffset_.size());
    slotOffset_.push_back(stashRowBytes_);
    stashRowBytes_ += std::max<int64_t>(1, computeType(k_.body[i].dtype)->getPrimitiveSizeInBits() / 8);
  }
  for (int l = 0; l < st_.numPasses; ++l) {
    PassPlan& plan = plans[static_cast<size_t>(l)];
    plan.load.assign(static_cast<size_t>(count), false);
    plan.store.assign(static_cast<size_t>(count), false);
    std::vector<bool> need(static_cast<size_t>(count), false);
    for (int i : st_.pass[l]) {
      const ScalarInstr::Kind kind = k_.body[i].kind;
      need[i] = kind == ScalarInstr::Kind::reduce || kind == ScalarInstr::Kind::store || (stashed[i] && first[i] == l);
    }
    for (int i = count - 1; i >= 0; --i) {
      if (!need[i]) continue;
      if (stashed[i] && first[i] < l) {
        plan.load[i] = true;  // a leaf: its cone is not recomputed
        continue;
      }
      plan.store[i] = stashed[i];
      for (int o : k_.body[i].operands)
        if (st_.row[o]) need[o] = true;
    }
    for (int i = 0; i < count; ++i)
      if (need[i]) plan.todo.push_back(i);
  }
  return plans;
}

llvm::Value* ReductionRenderer::stashAddress(int i, llvm::Value* pos) {
  llvm::Type* t = stashType(i);
  llvm::Value* slot = ir_.CreateInBoundsGEP(ir_.getInt8Ty(), stash_,
                                            ir_.CreateNSWMul(rowLength_, ir_.getInt64(slotOffset_[slots_[i]])));
  return ir_.CreateInBoundsGEP(t, slot, pos);
}

void ReductionRenderer::emitOuter(int i) {
  const ScalarInstr& in = k_.body[i];
  LlvmScalarBuilder b{ir_};
  llvm::Argument* param = in.param >= 0 ? fn_->getArg(static_cast<unsigned>(in.param)) : nullptr;
  switch (in.kind) {
    case ScalarInstr::Kind::load:
      values_[i] = loadElement(ir_, in.dtype, param, outerBase_[in.param], "v" + std::to_string(i));
      break;
    case ScalarInstr::Kind::constant: values_[i] = ir::formulas::emitConstant(b, in.value, in.dtype); break;
    case ScalarInstr::Kind::extent:
      values_[i] = ir::formulas::roundTo(b, b.convert(rowLength_, ir::formulas::computeDType(in.dtype)), in.dtype);
      break;
    case ScalarInstr::Kind::op: values_[i] = emitOpInstr(ir_, k_, in, values_); break;
    case ScalarInstr::Kind::store:
      storeElement(ir_, k_.params[in.param].dtype, param, outerBase_[in.param], values_[in.operands[0]]);
      break;
    case ScalarInstr::Kind::reduce:
      KILN_ASSERT(values_[i], "kernel {}: reduce {} read before its pass", k_.name, i);
      break;
    case ScalarInstr::Kind::index: KILN_ASSERT(false, "kernel {}: index {} outside a pass", k_.name, i);
  }
}

void ReductionRenderer::rowLoop(const std::string& tag, const RowBody& body, bool fixedSumOrder,
                                const RunPrologue& prologue) {
  const int rank = k_.rank, outerRank = k_.outerRank();
  for (llvm::AllocaInst* a : ridx_) ir_.CreateStore(zero(), a);
  ir_.CreateStore(zero(), rflat_);
  auto* rowLoop = llvm::BasicBlock::Create(ctx_, tag + ".rows", fn_);
  auto* inner = llvm::BasicBlock::Create(ctx_, tag + ".inner", fn_);
  auto* innerEnd = llvm::BasicBlock::Create(ctx_, tag + ".inner.end", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, tag + ".done", fn_);
  ir_.CreateCondBr(ir_.CreateICmpSGT(rowLength_, zero()), rowLoop, done);

  // One run of the innermost reduced dim: where each row param starts.
  ir_.SetInsertPoint(rowLoop);
  std::vector<llvm::Value*> rindex;
  for (size_t d = 0; d < ridx_.size(); ++d) rindex.push_back(ir_.CreateLoad(i64_, ridx_[d]));
  llvm::Value* flat = ir_.CreateLoad(i64_, rflat_, tag + ".flat");
  std::vector<llvm::Value*> rowBase(static_cast<size_t>(k_.numStrided()), nullptr);
  for (int p = 0; p < k_.numStrided(); ++p) {
    if (p < k_.numParams() && k_.params[p].outer) continue;
    llvm::Value* off = outerBase_[p];
    for (size_t d = 0; d < ridx_.size(); ++d)
      off = ir_.CreateNSWAdd(off, ir_.CreateNSWMul(rindex[d], strides_[p][outerRank + d]));
    rowBase[p] = off;
  }
  llvm::Value* n = sizes_[rank - 1];
  if (prologue) prologue(rowBase, n);
  llvm::BasicBlock* preInner = ir_.GetInsertBlock();
  ir_.CreateBr(inner);

  // The innermost loop: j in [0, n).
  ir_.SetInsertPoint(inner);
  llvm::PHINode* j = ir_.CreatePHI(i64_, 2, tag + ".j");
  j->addIncoming(zero(), preInner);
  body(j, ir_.CreateNSWAdd(flat, j), rowBase);
  llvm::Value* jNext = ir_.CreateNUWAdd(j, ir_.getInt64(1), tag + ".j.next");
  j->addIncoming(jNext, ir_.GetInsertBlock());
  llvm::BranchInst* latch = ir_.CreateCondBr(ir_.CreateICmpSLT(jNext, n), inner, innerEnd);
  if (fixedSumOrder) latch->setMetadata(llvm::LLVMContext::MD_loop, fixedSumOrderLoop());

  // Past one run: the outer reduced dims carry; the loop ends when the
  // outermost reduced index passes its size (at once with one reduced dim).
  ir_.SetInsertPoint(innerEnd);
  ir_.CreateStore(ir_.CreateNSWAdd(flat, n), rflat_);
  if (ridx_.empty()) {
    ir_.CreateBr(done);
  } else {
    const int last = static_cast<int>(ridx_.size()) - 1;
    ir_.CreateStore(ir_.CreateNSWAdd(rindex[last], ir_.getInt64(1)), ridx_[last]);
    emitCarry(ir_, ridx_, std::vector<llvm::Value*>(sizes_.begin() + outerRank, sizes_.end()));
    llvm::Value* more = ir_.CreateICmpSLT(ir_.CreateLoad(i64_, ridx_[0]), sizes_[outerRank]);
    ir_.CreateCondBr(more, rowLoop, done);
  }
  ir_.SetInsertPoint(done);
}

std::vector<llvm::Value*> ReductionRenderer::rowValues(const std::vector<int>& todo, llvm::Value* j, llvm::Value* pos,
                                                       const std::vector<llvm::Value*>& rowBase, const PassPlan* plan) {
  std::vector<llvm::Value*> cur = values_;
  for (int i : todo) {
    const ScalarInstr& in = k_.body[i];
    if (plan && plan->load[i]) {
      llvm::Value* v = ir_.CreateLoad(stashType(i), stashAddress(i, pos), "stash" + std::to_string(i));
      cur[i] = v->getType() == computeType(in.dtype) ? v : ir_.CreateTrunc(v, computeType(in.dtype));
      continue;
    }
    auto offset = [&](int p) -> llvm::Value* {
      switch (p < k_.numParams() ? k_.params[p].inner : k_.indexSpaces[p - k_.numParams()]) {
        case InnerStride::zero: return rowBase[p];
        case InnerStride::one: return ir_.CreateNSWAdd(rowBase[p], j);
        case InnerStride::any: return ir_.CreateNSWAdd(rowBase[p], ir_.CreateNSWMul(j, strides_[p][k_.rank - 1]));
      }
      return nullptr;
    };
    llvm::Argument* param = in.param >= 0 ? fn_->getArg(static_cast<unsigned>(in.param)) : nullptr;
    switch (in.kind) {
      case ScalarInstr::Kind::load:
        cur[i] = loadElement(ir_, in.dtype, param, offset(in.param), "v" + std::to_string(i));
        break;
      case ScalarInstr::Kind::op:
        cur[i] = drawAt_.empty() || !drawAt_[i]
                     ? emitOpInstr(ir_, k_, in, cur)
                     : emitGroupedDropout(ir_, in, cur[in.operands[0]], draws_[i], ir_.CreateNSWAdd(drawAt_[i], j));
        break;
      case ScalarInstr::Kind::store:
        storeElement(ir_, k_.params[in.param].dtype, param, offset(in.param), cur[in.operands[0]]);
        break;
      case ScalarInstr::Kind::reduce:
        if (!sumOperands_.empty() && sumOperands_[i]) {  // Note [Sums at full width]
          ir_.CreateStore(cur[in.operands[0]],
                          ir_.CreateInBoundsGEP(sumOperands_[i]->getAllocatedType(), sumOperands_[i], {zero(), pos}));
          break;
        }
        // In a column tile, the current column's accumulator.
        fold(in,
             tileT_ ? ir_.CreateInBoundsGEP(accTile_[i]->getAllocatedType(), accTile_[i], {zero(), tileT_}) : acc_[i],
             cur[in.operands[0]]);
        break;
      // The linear index of an index space is its "offset".
      case ScalarInstr::Kind::index: cur[i] = offset(k_.numParams() + in.param); break;
      case ScalarInstr::Kind::constant:
      case ScalarInstr::Kind::extent: KILN_ASSERT(false, "kernel {}: instruction {} in a pass", k_.name, i);
    }
    if (plan && plan->store[i]) {
      llvm::Value* v = cur[i]->getType()->isIntegerTy(1) ? ir_.CreateZExt(cur[i], ir_.getInt8Ty()) : cur[i];
      ir_.CreateStore(v, stashAddress(i, pos));
    }
  }
  return cur;
}

void ReductionRenderer::emitPass(int l) {
  const std::string tag = "pass" + std::to_string(l);
  std::vector<int> reduces;
  for (int i : st_.pass[l])
    if (k_.body[i].kind == ScalarInstr::Kind::reduce) reduces.push_back(i);
  for (int r : reduces) ir_.CreateStore(identity(k_.body[r]), acc_[r]);
  bool floatSum = false;
  for (int r : reduces)
    floatSum = floatSum || (k_.body[r].reduceOp == ReduceOp::sum && isFloatingPoint(k_.body[r].dtype));
  // The dropouts this pass computes (not loads from the stash) that draw
  // by groups: before each run, a loop draws the run's blocks.
  const PassPlan& plan = plans_[static_cast<size_t>(l)];
  std::vector<int> grouped;
  for (int i : plan.todo)
    if (!draws_.empty() && draws_[static_cast<size_t>(i)] && !plan.load[static_cast<size_t>(i)]) grouped.push_back(i);
  auto drawRun = [&](const std::vector<llvm::Value*>& rowBase, llvm::Value* n) {
    drawAt_.assign(k_.body.size(), nullptr);
    for (int i : grouped) {
      const ScalarInstr& in = k_.body[static_cast<size_t>(i)];
      auto invariant = [&](int o) {
        if (values_[static_cast<size_t>(o)]) return values_[static_cast<size_t>(o)];  // an outer load
        const ScalarInstr& load = k_.body[static_cast<size_t>(o)];
        return loadElement(ir_, load.dtype, fn_->getArg(static_cast<unsigned>(load.param)), rowBase[load.param],
                           "v" + std::to_string(o));
      };
      const int space = k_.body[static_cast<size_t>(in.operands[3])].param;
      llvm::Value* first = rowBase[k_.numParams() + space];
      emitDrawGroups(ir_, fn_, invariant(in.operands[1]), invariant(in.operands[2]), first, n,
                     draws_[static_cast<size_t>(i)], tag + ".d" + std::to_string(i));
      drawAt_[static_cast<size_t>(i)] = ir_.CreateAnd(first, 3);  // + j: the element's word
    }
  };
  const RunPrologue prologue = grouped.empty() ? RunPrologue() : RunPrologue(drawRun);
  if (floatSum && sumsApart(l, reduces)) {
    // Note [Sums at full width]: the values, then the sums.
    sumOperands_.assign(k_.body.size(), nullptr);
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    for (int r : reduces) {
      llvm::Type* t = acc_[r]->getAllocatedType();
      llvm::AllocaInst* buffer = entry.CreateAlloca(llvm::ArrayType::get(t, static_cast<uint64_t>(k_.maxRowLength)),
                                                    nullptr, tag + ".sum" + std::to_string(r));
      buffer->setAlignment(llvm::Align(64));
      sumOperands_[r] = buffer;
    }
    rowLoop(
        tag + ".values",
        [&](llvm::Value* j, llvm::Value* pos, const std::vector<llvm::Value*>& rowBase) {
          rowValues(plan.todo, j, pos, rowBase, &plan);
        },
        false, prologue);
    std::vector<llvm::AllocaInst*> buffers = std::move(sumOperands_);
    sumOperands_.clear();
    rowLoop(
        tag + ".sums",
        [&](llvm::Value*, llvm::Value* pos, const std::vector<llvm::Value*>&) {
          for (int r : reduces) {
            llvm::Type* t = acc_[r]->getAllocatedType();
            llvm::Value* at = ir_.CreateInBoundsGEP(buffers[r]->getAllocatedType(), buffers[r], {zero(), pos});
            fold(k_.body[r], acc_[r], ir_.CreateLoad(t, at, tag + ".operand" + std::to_string(r)));
          }
        },
        true);
  } else {
    rowLoop(
        tag,
        [&](llvm::Value* j, llvm::Value* pos, const std::vector<llvm::Value*>& rowBase) {
          rowValues(plan.todo, j, pos, rowBase, &plan);
        },
        floatSum, prologue);
  }
  drawAt_.clear();
  for (int r : reduces) {
    llvm::Value* acc = ir_.CreateLoad(acc_[r]->getAllocatedType(), acc_[r]);
    values_[r] = k_.body[r].reduceOp == ReduceOp::argmax ? searchFirst(tag, r, acc) : acc;
  }
}

bool ReductionRenderer::sumsApart(int l, const std::vector<int>& reduces) const {
  // Bounded rows (the stash), vectorized sums, no column tile, no argmax
  // (its search recomputes the values) and a buffer of at most kStashBytes.
  if (!stash_ || stridedRows_ || tileT_ || reduces.empty() || !kilnVectorTuning()) return false;
  int64_t bytes = 0;
  for (int r : reduces) {
    if (k_.body[r].reduceOp == ReduceOp::argmax) return false;
    bytes += k_.maxRowLength * static_cast<int64_t>(acc_[r]->getAllocatedType()->getPrimitiveSizeInBits() / 8);
  }
  if (bytes > kStashBytes) return false;
  const PassPlan& plan = plans_[static_cast<size_t>(l)];
  int cost = 0;
  for (int i : plan.todo) {
    // A dropout drawn by groups costs a load per element here: its draws
    // are made before the loop (Note [Draws by groups of four]).
    const bool grouped = !draws_.empty() && draws_[static_cast<size_t>(i)];
    if (k_.body[i].kind == ScalarInstr::Kind::op && !plan.load[i] && !grouped) cost += ir::recomputeCost(k_.body[i].op);
  }
  return cost >= kSumApartCost;
}

llvm::MDNode* ReductionRenderer::fixedSumOrderLoop() {
  llvm::Type* i32 = llvm::Type::getInt32Ty(ctx_);
  auto hint = [&](const char* name, llvm::Constant* value) {
    llvm::Metadata* ops[] = {llvm::MDString::get(ctx_, name), llvm::ConstantAsMetadata::get(value)};
    return llvm::MDNode::get(ctx_, ops);
  };
  llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx_, {});
  const bool vector = !stridedRows_;  // else sequential: no vectorizing, no interleaving
  llvm::Metadata* ops[] = {
      self.get(), hint("llvm.loop.vectorize.enable", ir_.getInt1(vector)),
      hint("llvm.loop.vectorize.width", llvm::ConstantInt::get(i32, vector ? kSumLanes : 1)),
      hint("llvm.loop.interleave.count", llvm::ConstantInt::get(i32, vector ? kSumInterleave : 1))};
  llvm::MDNode* loop = llvm::MDNode::getDistinct(ctx_, ops);
  loop->replaceOperandWith(0, loop);
  return loop;
}

llvm::Value* ReductionRenderer::searchFirst(const std::string& passTag, int r, llvm::Value* max) {
  const std::string tag = passTag + ".argmax" + std::to_string(r);
  // The row instructions the operand needs, found by walking back.
  const int operand = k_.body[r].operands[0];
  std::vector<bool> need(k_.body.size(), false);
  need[operand] = true;
  for (int i = operand; i >= 0; --i)
    if (need[i] && k_.body[i].kind == ScalarInstr::Kind::op)
      for (int o : k_.body[i].operands) need[o] = true;
  std::vector<int> todo;
  for (int i = 0; i <= operand; ++i)
    if (need[i] && st_.row[i]) todo.push_back(i);
  const bool isFloat = max->getType()->isFloatingPointTy();
  llvm::Value* maxIsNan = isFloat ? ir_.CreateFCmpUNO(max, max) : ir_.getFalse();
  ir_.CreateStore(zero(), accIndex_[r]);
  auto* found = llvm::BasicBlock::Create(ctx_, tag + ".found", fn_);
  rowLoop(tag, [&](llvm::Value* j, llvm::Value* pos, const std::vector<llvm::Value*>& rowBase) {
    llvm::Value* v = rowValues(todo, j, pos, rowBase)[operand];
    llvm::Value* match = isFloat ? ir_.CreateSelect(maxIsNan, ir_.CreateFCmpUNO(v, v), ir_.CreateFCmpOEQ(v, max))
                                 : ir_.CreateICmpEQ(v, max);
    auto* hit = llvm::BasicBlock::Create(ctx_, tag + ".hit", fn_);
    auto* next = llvm::BasicBlock::Create(ctx_, tag + ".next", fn_);
    ir_.CreateCondBr(match, hit, next);
    ir_.SetInsertPoint(hit);
    ir_.CreateStore(pos, accIndex_[r]);
    ir_.CreateBr(found);
    ir_.SetInsertPoint(next);
  });
  ir_.CreateBr(found);
  ir_.SetInsertPoint(found);
  return ir_.CreateLoad(i64_, accIndex_[r]);
}

void renderReduction(const Kernel& kernel, llvm::Module& module) { ReductionRenderer(kernel, module).render(); }

}  // namespace kiln::codegen::llvmcg

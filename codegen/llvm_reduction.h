// Internal to the CPU backend: the LLVM renderer of reduction kernels
// (codegen/kernel.h, "Reductions"), declared here so that its parts live in
// files of their own: codegen/llvm_reduction.cpp (the loop over output
// rows, the passes, the stash, argmax's search) and
// codegen/llvm_column_tiles.cpp (Note [Column tiles]). Only
// codegen/llvm_*.cpp may include it, since it names LLVM types.
#pragma once

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Metadata.h>

#include <functional>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/llvm_builder.h"
#include "codegen/llvm_module.h"

namespace kiln::codegen::llvmcg {

/// Per pass: the row instructions to evaluate, in body order, and which of
/// them come from the stash (load) or go to it (store).
struct PassPlan {
  std::vector<int> todo;
  std::vector<bool> load, store;
};

/// Renders one reduction kernel into a module: its body function and the
/// entry of the CPU ABI (renderReduction in codegen/llvm_module.h).
class ReductionRenderer {
 public:
  ReductionRenderer(const Kernel& kernel, llvm::Module& module);

  void render() { renderEntry(k_, m_, renderBody()); }

 private:
  /// Whether the kernel takes column tiles, and what a launch's strides
  /// must be for them (Note [Column tiles]).
  void planColumnTiles();

  llvm::Value* zero() { return ir_.getInt64(0); }

  /// The compute type of dtype `d` (f16 and bf16 compute in f32).
  llvm::Type* computeType(DType d) {
    LlvmScalarBuilder b{ir_};
    return b.type(ir::formulas::computeDType(d));
  }

  /// The value `r` folds from: 0, -inf/INT_MIN/false for max (and argmax),
  /// +inf/INT_MAX/true for min.
  llvm::Value* identity(const ScalarInstr& r);

  /// The accumulator at `acc` (of reduce r's compute type) folded with v
  /// (argmax folds the maximum; searchFirst finds it).
  void fold(const ScalarInstr& r, llvm::Value* acc, llvm::Value* v);

  /// The body: its arguments, the allocas of allocateLocals, allocateTiles
  /// and allocateStash, then the loop over the range's rows (emitRows).
  llvm::Function* renderBody();

  /// Allocas, promoted by SROA: the outer multi-index, the reduced one, accumulators.
  void allocateLocals();

  /// Column tiles (Note [Column tiles]): a block's accumulators, and
  /// whether this launch's strides let it take blocks (null without tiles).
  llvm::Value* allocateTiles();

  /// The stash (Note [Stashed row values]), when the kernel's row bound
  /// lets one fit, and the words of dropouts drawn by groups; returns the
  /// passes' plans, with the stash or (else) recomputing.
  std::vector<PassPlan> allocateStash();

  /// The loop over the range's rows, with the passes of `plans`: a block of
  /// columns where tilesOk allows (Note [Column tiles]), else one row.
  void emitRows(const std::string& tag, const std::vector<PassPlan>& plans, llvm::Value* tilesOk);

  /// A block of columns (Note [Column tiles]) where the strides allow one
  /// and at least kMinColumnTile rows are left before the end of the range
  /// and of the innermost outer dim's run; else one row (`rowBody`).
  void emitTileCheck(const std::string& tag, llvm::Value* tilesOk, llvm::BasicBlock* rowBody);

  /// The outer offsets at the current output row (outerBase_), from its
  /// multi-index, which it returns.
  std::vector<llvm::Value*> outerBases();

  /// Past `step` output rows (never past the end of the innermost outer
  /// dim): the innermost outer index moves by `step`, then carries.
  void advance(const std::vector<llvm::Value*>& index, llvm::Value* step);

  /// The passes' plans: with `stash`, the stashed row values
  /// (KernelStages::stashed) are stored in their first pass and loaded in
  /// later ones; slots_ and slotOffset_ say where. Without, every pass
  /// recomputes what it needs.
  std::vector<PassPlan> planPasses(bool stash);

  /// Where stashed value i of element `pos` sits.
  llvm::Value* stashAddress(int i, llvm::Value* pos);
  llvm::Type* stashType(int i) {
    llvm::Type* t = computeType(k_.body[i].dtype);
    return t->isIntegerTy(1) ? ir_.getInt8Ty() : t;
  }

  /// An outer instruction, once per row.
  void emitOuter(int i);

  /// A loop nest over the row: `body(j, pos, rowBase)` emits one element
  /// (j its index in the innermost dim, pos its row index, rowBase each row
  /// param's offset at j = 0); it may branch away, leaving the insert point
  /// where the loop goes on. Returns with the insert point after the loop.
  using RowBody = std::function<void(llvm::Value* j, llvm::Value* pos, const std::vector<llvm::Value*>& rowBase)>;
  /// Emitted before each run of the innermost dim: its rowBase and length.
  using RunPrologue = std::function<void(const std::vector<llvm::Value*>& rowBase, llvm::Value* n)>;
  void rowLoop(const std::string& tag, const RowBody& body, bool fixedSumOrder = false,
               const RunPrologue& prologue = nullptr);

  /// Instructions `todo` (row instructions of a pass, in body order) at one
  /// element; returns the values, outer ones included.
  std::vector<llvm::Value*> rowValues(const std::vector<int>& todo, llvm::Value* j, llvm::Value* pos,
                                      const std::vector<llvm::Value*>& rowBase, const PassPlan* plan = nullptr);

  /// Pass l over the row: its accumulators start at their identities, the
  /// loop nest folds the row into them, and they are read back after it.
  /// An argmax accumulates the maximum (a loop that vectorizes), then a
  /// second loop finds the first element equal to it, or the first NaN
  /// when it is NaN: the first maximum, as a sequential scan would find it.
  void emitPass(int l);

  /// Note [Sums at full width]: pass l's row values computed in a loop of
  /// their own, their reduces' operands stored by row position, then a loop
  /// that folds them in the fixed order. Whether pass l gets it.
  bool sumsApart(int l, const std::vector<int>& reduces) const;

  /// Output rows [i, i + len) of one run of the innermost outer dim, with
  /// outerBase_ at row i, as a column tile (Note [Column tiles]): the one
  /// pass folds every column of the block at each row element, then each
  /// column's outer values and stores.
  void emitColumnTile(llvm::Value* len);

  /// In a column tile's pass: offsets `at` moved to column t by
  /// tileStride_, which the launch's strides were checked against (for what
  /// the pass reads).
  std::vector<llvm::Value*> shiftedToColumn(const std::vector<llvm::Value*>& at, llvm::Value* t);

  /// A loop over a column tile's columns t in [0, len) (len >= 1), `body`
  /// emitting column t; outerBase_ is back at `base` after each.
  void columnLoop(const std::string& tag, llvm::Value* len, const std::vector<llvm::Value*>& base,
                  const std::function<void(llvm::Value*)>& body, bool vectorize);

  /// Loop metadata asking the vectorizer to vectorize (a column tile's
  /// loop, whose lanes are independent columns: any width gives the same
  /// bits).
  llvm::MDNode* vectorizeLoop();

  /// Loop metadata that fixes how the vectorizer splits a float sum
  /// (Note [Fixed summation order]).
  llvm::MDNode* fixedSumOrderLoop();

  /// The row index of the first element of reduce r's operand equal to
  /// `max` (or NaN, when `max` is NaN); 0 in an empty row.
  llvm::Value* searchFirst(const std::string& passTag, int r, llvm::Value* max);

  const Kernel& k_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> ir_;
  llvm::Type* i64_;
  const KernelStages st_;
  /// A row parameter has inner stride class `any`: float sums are
  /// sequential (Note [Fixed summation order]).
  bool stridedRows_ = false;
  /// The kernel takes column tiles where a launch's strides allow (Note
  /// [Column tiles]); tileStride_ says, per param and index space, the
  /// stride along the innermost outer dim they need.
  bool columnTiles_ = false;
  std::vector<int64_t> tileStride_;
  /// Per param and index space: the pass of a column tile reads it (a row
  /// param, or an outer one whose values the row values use), so a launch
  /// takes tiles only where its stride is tileStride_.
  std::vector<bool> tileReads_;
  /// Per instruction: an outer value that the column tile's pass uses.
  std::vector<bool> tileOuter_;
  /// Per reduce, in a kernel with column tiles: a block's accumulators.
  std::vector<llvm::AllocaInst*> accTile_;
  /// While a column tile's pass is emitted: the column, whose accumulators
  /// the reduces fold into.
  llvm::Value* tileT_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::Value* end_ = nullptr;
  llvm::BasicBlock* exit_ = nullptr;
  llvm::BasicBlock* rowHeader_ = nullptr;  ///< of the loop over output rows
  std::vector<llvm::AllocaInst*> idx_;     ///< the outer multi-index of the current output row
  llvm::AllocaInst* pos_ = nullptr;        ///< its flat position
  llvm::Value* i_ = nullptr;               ///< pos_, loaded in the row loop's header
  std::vector<llvm::Value*> sizes_;
  std::vector<std::vector<llvm::Value*>> strides_;
  llvm::Value* rowLength_ = nullptr;
  std::vector<llvm::AllocaInst*> ridx_;  ///< indices of the reduced dims but the innermost
  llvm::AllocaInst* rflat_ = nullptr;    ///< row index of the current run's first element
  std::vector<llvm::AllocaInst*> acc_, accIndex_;
  std::vector<llvm::Value*> outerBase_;  ///< per param and index space: its offset at the current output row
  std::vector<llvm::Value*> values_;     ///< per instruction: its outer value in the current row
  std::vector<PassPlan> plans_;          ///< of the row loop being emitted
  /// Per instruction, while a pass's values are computed ahead of its sums
  /// (Note [Sums at full width]): where a reduce stores its operands, by
  /// row position, instead of folding them.
  std::vector<llvm::AllocaInst*> sumOperands_;
  std::vector<int> slots_;           ///< per instruction: its stash slot, or -1
  std::vector<int64_t> slotOffset_;  ///< per slot: bytes per row element before it
  int64_t stashRowBytes_ = 0;        ///< stash bytes per row element
  llvm::Value* stash_ = nullptr;     ///< the stash (kStashBytes on the stack)
  /// Per instruction: the words of a dropout drawn by groups (only with a
  /// stash, whose row bound sizes them), or null.
  std::vector<llvm::AllocaInst*> draws_;
  /// Per grouped dropout, while its pass's run loop is emitted: its word's
  /// index in draws_ is drawAt_ + j. Empty elsewhere (argmax's search
  /// loops draw per element).
  std::vector<llvm::Value*> drawAt_;
};

}  // namespace kiln::codegen::llvmcg

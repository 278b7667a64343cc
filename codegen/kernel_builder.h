// The one kernel builder (DESIGN.md §6): the phases every lowering of a
// fused group to a Kernel goes through — lowerElementwise and lowerCat
// (codegen/lowering.cpp) and lowerReduction (codegen/lowering_reduction.cpp).
//
//   1. Views: the body's inputs, laid out as the caller says, and the view
//      ops over them, resolved to strides and an offset in the input's
//      buffer (ir/layout.h); a view op over a constant is that constant.
//   2. Parameters: one per distinct (input, strides over the domain, offset,
//      per row or not) the body reads, ordered by the fusion input they read
//      (so a plain chain loads input i as parameter i), then the results.
//      Strides over the domain are right-aligned and 0 along broadcast dims.
//   3. Index spaces: one per distinct result shape whose element index an op
//      reads (dropout: Note [Dropout draws]), the contiguous strides of that
//      shape over the domain.
//   4. The body: a load per input parameter (instruction p loads parameter
//      p), the nodes in order (constants, ops, reductions), the stores.
//   5. Coalescing (codegen::coalesce), the kernel's name (its ops and the
//      hash of its signature, so equal names mean equal signatures) and its
//      launch arguments (codegen/kernel.h).
//
// A reduction kernel adds its row split: the domain is the rows' shape D
// with the reduced dims moved innermost, the kept dims and the reduced dims
// are coalesced separately, a value per row (ir/reduction_fusion.h) reads
// its parameters once per row (outer parameters, stride 0 along the row),
// reduction ops expand to `reduce` instructions, and rows short enough get
// a stash bound (Kernel::maxRowLength).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/lowering.h"
#include "ir/graph.h"
#include "ir/layout.h"
#include "ir/reduction_fusion.h"

namespace kiln::codegen {

/// A value of a body seen through movement ops: where its elements sit in
/// the buffer of fusion input `input`.
struct View {
  int input = -1;
  ir::Shape shape;
  ir::Layout layout;
};

/// The views of a body (phase 1).
class BodyViews {
 public:
  /// `inputs` are the body's inputs, laid out as `layouts` (contiguous when
  /// empty); `nodes` the body in order.
  BodyViews(std::span<const ir::Value* const> inputs, std::span<const ir::Layout> layouts,
            std::span<const ir::Node* const> nodes);
  /// The view `v` is, or nullptr (a computed value, or a constant).
  const View* find(const ir::Value* v) const;
  /// The constant node whose value `v` is (its result, or a view of it), or nullptr.
  const ir::Node* constant(const ir::Value* v) const;

 private:
  std::unordered_map<const ir::Value*, View> views_;
  std::unordered_map<const ir::Value*, const ir::Node*> constants_;
};

/// A kernel parameter before coalescing: its strides over the whole domain.
struct ParamSpec {
  DType dtype = DType::f32;
  /// Reduction kernels: read or written once per row (KernelParam::outer).
  bool outer = false;
  std::vector<int64_t> strides;
  ParamBinding binding;
  friend bool operator==(const ParamSpec&, const ParamSpec&) = default;
};

class KernelBuilder {
 public:
  /// An elementwise kernel over `domain`.
  explicit KernelBuilder(ir::Shape domain);
  /// A reduction kernel over `domain` that reduces the dims `reduced` marks
  /// (moved innermost when the kernel is made).
  KernelBuilder(ir::Shape domain, std::vector<bool> reduced);

  const ir::Shape& domain() const { return domain_; }
  bool isReduction() const { return reduction_; }

  /// Strides over the domain of a value of `shape` laid out with `strides`.
  std::vector<int64_t> stridesOver(const ir::Shape& shape, const ir::Strides& strides) const;
  /// Strides over the domain of a value per row of shape `context` (the
  /// domain, or a row result's shape with or without its reduced dims):
  /// those over `context` on the kept dims, 0 along the reduced ones.
  std::vector<int64_t> perRowStrides(const ir::Shape& shape, const ir::Strides& strides,
                                     const ir::Shape& context) const;

  /// The input parameter equal to `p`; a new one when there is none and
  /// the loads are not made yet.
  int input(ParamSpec p);
  /// Orders the input parameters by the fusion input they read and loads
  /// each: instruction p loads parameter p.
  void loadInputs();
  int numLoads() const { return numLoads_; }
  /// A result parameter (after loadInputs).
  int output(ParamSpec p);

  /// Appends an instruction; returns its index.
  int add(ScalarInstr s);
  DType dtypeOf(int v) const { return body_[static_cast<size_t>(v)].dtype; }
  /// `v` cast to `to` (itself when it has that dtype).
  int castTo(int v, DType to);
  /// The constant of constant node `c`, in its dtype.
  int constant(const ir::Node& c);
  /// The `index` instruction of the element's position in a result of
  /// `shape` (an index space, phase 3): one per shape.
  int elementIndex(const ir::Shape& shape);
  /// The instructions of reduction node `n` over row value `x`
  /// (codegen/lowering_reduction.h): its result, a value per row.
  int reduction(const ir::Node& n, int x);

  /// Coalesces, names the kernel "kiln<opsName>_<hash>" and fills in its
  /// launch arguments (phase 5). Call it once, last.
  LoweredKernel finish(std::string_view opsName);

 private:
  struct Coalesced;
  Coalesced coalesced() const;

  ir::Shape domain_;
  bool reduction_ = false;
  std::vector<bool> reduced_;  ///< per dim of the domain (all false for an elementwise kernel)
  std::vector<int> keptDims_;
  std::vector<ParamSpec> params_;
  int numLoads_ = -1;
  std::vector<std::vector<int64_t>> spaces_;  ///< index spaces' strides over the domain
  std::unordered_map<int, int> spaceInstr_;   ///< index space -> its index instruction
  std::vector<ScalarInstr> body_;
};

/// Lowers the nodes of a fusion body (or a reduction node alone) into
/// `builder`, phases 2 to 4: parameters for the views its ops (and results)
/// read, the loads, its nodes, stores of `outputs`, written through
/// `outputLayouts` (an elementwise body's; contiguous when empty). `rows`
/// (null for an elementwise body) says which values are per row; a movement
/// op that is not a view is then a reshape of a value per row (the same
/// values). Returns the ops' names for the kernel's name ("_add_relu").
std::string lowerBody(KernelBuilder& builder, const BodyViews& views, std::span<const ir::Node* const> nodes,
                      std::span<const ir::Value* const> outputs, std::span<const ir::Layout> outputLayouts,
                      const ir::ReductionGroupInfo* rows);

}  // namespace kiln::codegen

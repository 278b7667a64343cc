// The built-in models shared by the tools: each is a function of tensors
// with the argument types it is traced at. `irdump --example NAME` traces
// one, and kiln-bench measures the same functions eager and compiled, so
// what is inspected is what is measured.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frontend/kiln.h"

namespace kiln::tools {

using ModelFn = std::vector<Tensor> (*)(const std::vector<Tensor>& inputs);

struct Model {
  std::string name;
  std::string summary;
  ModelFn fn;
  std::vector<ir::TensorType> inputs;  ///< the argument types it is traced and benchmarked at
};

/// Every built-in model.
std::span<const Model> models();
/// The model called `name`, or nullptr.
const Model* findModel(const std::string& name);

/// The 8-op elementwise chain of a fused epilogue: mul, add, relu, sub, mul,
/// maximum, minimum, neg (scale, shift, activation, clamp). Memory-bound.
Tensor chain8(const Tensor& x);
/// An 8-op chain heavy in arithmetic: mul, add, relu, add, sqrt, sub,
/// sigmoid, maximum. On a few cores it is bound by sqrt, the division and
/// exp's polynomial, not by memory.
Tensor chain8Math(const Tensor& x);
/// Broadcasting bias-add + relu: relu(x + b) with b over the last dimension.
Tensor biasRelu(const Tensor& x, const Tensor& b);
/// dropout(relu(x), 0.1) from the default generator: one kernel compiled.
Tensor reluDropout(const Tensor& x);
/// layerNorm(dropout(relu(x), 0.1)) over the last dim with weight w and bias b.
Tensor reluDropoutLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b);
/// reluDropoutLayerNorm forward and backward from the upstream gradient g
/// (y.backward(g)) on leaves made from x, w, b: returns y and the gradients
/// of x, w and b.
std::vector<Tensor> reluDropoutLayerNormTrain(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g);
/// Bias-add + GELU (exact, erf): gelu(x + b) with b over the last dimension.
Tensor biasGelu(const Tensor& x, const Tensor& b);

/// A pre-LN transformer block's forward pass on x [seq, d], no mask:
///   h = x + attention(layerNorm(x)),  out = h + mlp(layerNorm(h))
/// attention: one QKV linear [3d, d], per-head scaled dot products
/// softmax(q·kᵀ / √dh)·v through kiln::scaledDotProductAttention (fused on
/// the CPU; q, k, v are views of the QKV result), an output projection
/// [d, d]; mlp: linear
/// [4d, d], GELU (exact), linear [d, 4d]. Every linear has a bias.
struct TransformerBlockWeights {
  Tensor ln1W, ln1B, wQkv, bQkv, wO, bO, ln2W, ln2B, w1, b1, w2, b2;
};
Tensor transformerBlock(const Tensor& x, const TransformerBlockWeights& p, int64_t heads);

/// The sizes of tools::TransformerTrainStep: x and target f32[seq, d],
/// `heads` heads of d / heads, an MLP of `hidden`, `blocks` blocks one after
/// the other, each under kiln::checkpoint when `checkpoint` (activation
/// checkpointing: Note [Activation checkpointing]). The defaults are
/// transformer_block's.
struct TransformerSizes {
  int64_t seq = 512, d = 512, heads = 8, hidden = 2048;
  int64_t blocks = 1;
  bool checkpoint = false;
};

/// One training step of transformerBlock: forward on x, the loss
/// mseLoss(out, target) (the mean of (out - target)², PyTorch's
/// F.mse_loss), backward(), then an AdamW step (PyTorch's defaults: lr 1e-3,
/// weight decay 1e-2) on the 12 parameters, with parameters and optimizer
/// state kept in the object. The parameters are initialized as PyTorch's
/// modules are: the linears as nn::Linear (U(-1/√in, 1/√in), drawn from the
/// default generator in the order QKV, output projection, MLP up, MLP down),
/// the layer norms' weights ones and biases zeros. kiln-bench's
/// `transformer_train_step` and `irdump --example transformer_train_step`;
/// it compiles whole (docs/compile.md).
class TransformerTrainStep {
 public:
  using Sizes = TransformerSizes;
  /// Makes the parameters (from the default generator) and the optimizer;
  /// made while kiln::compile traces, they are eager state too
  /// (Note [Initialization is eager]).
  explicit TransformerTrainStep(Sizes sizes = {});
  /// One step on x and target f32[seq, d]; returns the loss (computed before
  /// the update).
  Tensor operator()(const Tensor& x, const Tensor& target);
  /// The inputs' types: x and target.
  static std::vector<ir::TensorType> inputTypes(Sizes sizes = {});
  /// The first block's parameters, in TransformerBlockWeights' order (the
  /// optimizer's, block after block).
  const TransformerBlockWeights& weights() const { return blocks_.at(0); }
  const std::vector<TransformerBlockWeights>& blocks() const { return blocks_; }
  const optim::AdamW& optimizer() const { return optimizer_; }

 private:
  Sizes sizes_;
  std::vector<TransformerBlockWeights> blocks_;
  optim::AdamW optimizer_;
};

/// The sizes of tools::MlpTrainStep: x f32[batch, in], two hidden layers.
struct MlpSizes {
  int64_t in = 784, hidden = 1024, classes = 10, batch = 256;
};

/// One training step of issue 3's MLP: Linear(784, 1024)-ReLU-Linear(1024,
/// 1024)-ReLU-Linear(1024, 10), crossEntropy against class labels,
/// backward(), then an AdamW step (PyTorch's defaults: lr 1e-3, weight decay
/// 1e-2) on parameters and optimizer state kept in the object. kiln-bench's
/// `mlp_train_step` and `irdump --example mlp_train_step`; it compiles whole
/// (docs/compile.md). Other sizes make kiln-bench's mlp_train_step_small.
/// With `autocast` (f16 or bf16), the forward pass and the loss run under
/// kiln::autocast on the CPU in that dtype (kiln-bench's
/// mlp_train_step_bf16_autocast, `irdump --example mlp_train_step_bf16_autocast`).
class MlpTrainStep {
 public:
  static constexpr int64_t kIn = 784, kHidden = 1024, kClasses = 10, kBatch = 256;
  using Sizes = MlpSizes;
  /// Makes the model (initialized from the default generator) and its
  /// optimizer; made while kiln::compile traces, they are eager state too
  /// (Note [Initialization is eager]).
  explicit MlpTrainStep(Sizes sizes = {}, std::optional<DType> autocast = std::nullopt);
  /// One step on x f32[N,784] and labels i64[N] in [0, 10); returns the loss
  /// (computed before the update).
  Tensor operator()(const Tensor& x, const Tensor& labels);
  /// The inputs' types: x and labels.
  static std::vector<ir::TensorType> inputTypes(Sizes sizes = {});

 private:
  nn::Sequential model_;
  optim::AdamW optimizer_;
  std::optional<DType> autocast_;
};

/// One DistributedDataParallel training step of a small MLP (64-128-128-10,
/// SGD lr 0.1, crossEntropy, batch 32) with buckets small enough that it
/// has three (4 KiB first, then 64 KiB): `irdump --example ddp_train_step`
/// shows the all_reduce node of each bucket and, with --emit=memory-plan,
/// the program's schedule (each start and the steps its wait overlaps).
/// `group` is the process group to average over; without one, a gloo group
/// of one rank over a HashStore (the all-reduces are then over one rank).
class DdpTrainStep {
 public:
  static constexpr int64_t kIn = 64, kHidden = 128, kClasses = 10, kBatch = 32;
  explicit DdpTrainStep(std::optional<dist::ProcessGroup> group = std::nullopt);
  /// One step on x f32[N,64] and labels i64[N] in [0, 10); returns the loss.
  Tensor operator()(const Tensor& x, const Tensor& labels);
  static std::vector<ir::TensorType> inputTypes();
  const nn::DistributedDataParallel& ddp() const { return ddp_; }

 private:
  nn::Sequential model_;
  nn::DistributedDataParallel ddp_;
  optim::SGD optimizer_;
};

}  // namespace kiln::tools

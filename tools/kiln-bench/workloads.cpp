// The table of kiln-bench workloads (see workload.h). docs/benchmarks.md
// describes each entry; keep the two in step.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <random>

#include "runtime/error.h"
#include "tools/common/resnet.h"
#include "tools/kiln-bench/workload.h"

namespace kiln::bench {

std::vector<Tensor> randnInputs(const std::vector<ir::TensorType>& types, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> out;
  for (const ir::TensorType& t : types) {
    KILN_CHECK(t.dtype == DType::f32 && t.device.isCpu(),
               "kiln-bench: randnInputs makes f32 cpu tensors, a workload asks for {}", t.str());
    out.push_back(randn(t.shape, gen));
  }
  return out;
}

Workload fromModel(const std::string& name, double flops) {
  const tools::Model* model = tools::findModel(name);
  KILN_CHECK(model, "kiln-bench: no built-in model '{}' in tools/common/models.cpp", name);
  Workload w;
  w.name = model->name;
  w.description = model->summary;
  w.makeInputs = [types = model->inputs] { return randnInputs(types); };
  w.fn = model->fn;
  w.inputTypes = model->inputs;
  w.flops = flops;
  return w;
}

namespace {
using MlpTrainStepSizes = tools::MlpTrainStep::Sizes;

// A training step's workload: its Step (a model and its optimizer, called
// on two inputs) is made by `make` at the first call after resetState,
// from the default generator (which runWorkload sets to one state before
// each first call), and kept; the compiled side traces the whole step
// (docs/compile.md), sharing that state with the eager side.
template <class Step, class Make>
void runsTrainStep(Workload& w, Make make) {
  auto step = std::make_shared<std::unique_ptr<Step>>();
  w.fn = [step, make](const std::vector<Tensor>& in) {
    if (!*step) *step = make();
    return std::vector<Tensor>{(**step)(in[0], in[1])};
  };
  w.resetState = [step] { step->reset(); };
}

// Issue 3's MLP train step (tools::MlpTrainStep): standard-normal x and
// class labels from a fixed seed (runsTrainStep says the rest).
// With `autocast`, the forward pass and the loss run under kiln::autocast
// on the CPU in that dtype (docs/amp.md).
Workload mlpTrainStep(std::string name, MlpTrainStepSizes s, std::optional<DType> autocast = std::nullopt) {
  using tools::MlpTrainStep;
  Workload w;
  w.name = std::move(name);
  w.description = fmt::format(
      "one AdamW training step of an MLP {}-{}-{}-{} (Linear-ReLU-Linear-ReLU-Linear, crossEntropy, backward) on a "
      "batch of {}{}",
      s.in, s.hidden, s.hidden, s.classes, s.batch,
      autocast ? fmt::format(", forward and loss under {} autocast", dtypeName(*autocast)) : "");
  w.inputTypes = MlpTrainStep::inputTypes(s);
  w.makeInputs = [s] {
    Generator gen(42);
    std::mt19937_64 rng(42);
    std::vector<int64_t> labels(static_cast<size_t>(s.batch));
    for (int64_t& label : labels) label = static_cast<int64_t>(rng() % static_cast<uint64_t>(s.classes));
    return std::vector<Tensor>{randn({s.batch, s.in}, gen), fromVector(labels, {s.batch})};
  };
  runsTrainStep<MlpTrainStep>(w, [s, autocast] { return std::make_unique<MlpTrainStep>(s, autocast); });
  // The matmuls: forward F, the weights' gradients F, the activations'
  // gradients F less the first layer's (x needs none).
  const double forward = 2.0 * s.batch * (s.in * s.hidden + s.hidden * s.hidden + s.hidden * s.classes);
  w.flops = 3 * forward - 2.0 * s.batch * s.in * s.hidden;
  return w;
}
// The matmuls of tools::transformerBlock (by default seq 512, d 512, 8
// heads of 64, MLP 2048): QKV, q·kᵀ and p·v over the heads, the output
// projection, the MLP's two.
double transformerBlockFlops(tools::TransformerSizes sizes = {}) {
  const double s = static_cast<double>(sizes.seq), d = static_cast<double>(sizes.d),
               f = static_cast<double>(sizes.hidden);
  return 2 * s * d * 3 * d + 2 * (2 * s * s * d) + 2 * s * d * d + 2 * (2 * s * d * f);
}

// A training step of the transformer block (tools::TransformerTrainStep):
// standard-normal x and target from a fixed seed (runsTrainStep says the
// rest).
Workload transformerTrainStep(std::string name, tools::TransformerSizes s) {
  using tools::TransformerTrainStep;
  Workload w;
  w.name = std::move(name);
  w.description =
      s.blocks == 1
          ? fmt::format(
                "one AdamW training step of transformer_block (seq {}, d {}, {} heads, MLP {}): forward, mseLoss "
                "against a target, backward, optimizer step on the 12 parameters",
                s.seq, s.d, s.heads, s.hidden)
          : fmt::format(
                "one AdamW training step of {} transformer blocks in a row (seq {}, d {}, {} heads, MLP {}){}: "
                "forward, mseLoss against a target, backward, optimizer step on the {} parameters",
                s.blocks, s.seq, s.d, s.heads, s.hidden,
                s.checkpoint ? ", each block under kiln::checkpoint (recomputed in backward)" : "", 12 * s.blocks);
  w.inputTypes = TransformerTrainStep::inputTypes(s);
  w.makeInputs = [types = w.inputTypes] { return randnInputs(types); };
  runsTrainStep<TransformerTrainStep>(w, [s] { return std::make_unique<TransformerTrainStep>(s); });
  // The matmuls, 3x the forward's: forward F, the weights' gradients F, the
  // activations' gradients F (all of them: the first layer norm's
  // parameters need the QKV linear's input gradient; x needs none, but the
  // layer norm's backward to x is no matmul).
  // A checkpointed block runs its forward twice.
  w.flops = static_cast<double>(s.blocks) * (s.checkpoint ? 4 : 3) * transformerBlockFlops(s);
  return w;
}
// ResNet-18's compiled results equal eager ones bit for bit: the
// convolutions are the same library calls both ways, and batch norm's
// statistics are reduced in the same order.
constexpr double kResNetTolerance = 0;

constexpr tools::TransformerSizes kStack{.seq = 1024, .d = 128, .heads = 2, .hidden = 512, .blocks = 4};

// ResNet-18 (tools/common/resnet.h) in eval mode without gradients on a
// batch of standard-normal images: the convolutions and the classifier
// counted as flops, the batch as items.
Workload resnet18Infer() {
  const tools::ResNetSizes s;
  Workload w = fromModel("resnet18_infer", tools::resnet18ForwardFlops(s));
  w.itemsPerCall = s.batch;
  w.tolerance = kResNetTolerance;
  w.inDefaultRun = false;  // 15 s here: docs/benchmarks.md, "ResNet-18"
  return w;
}

// A training step of ResNet-18 (tools::ResNetTrainStep: crossEntropy, SGD
// with momentum 0.9): standard-normal images and class labels from a fixed
// seed (runsTrainStep says the rest).
Workload resnet18TrainStep() {
  using tools::ResNetTrainStep;
  const tools::ResNetSizes s;
  Workload w;
  w.name = "resnet18_train_step";
  w.description = fmt::format(
      "one SGD (momentum 0.9) training step of ResNet-18 on a batch of {} 3x{}x{} images: forward in training mode, "
      "crossEntropy, backward, optimizer step",
      s.batch, s.image, s.image);
  w.inputTypes = ResNetTrainStep::inputTypes(s);
  w.makeInputs = [s] {
    Generator gen(42);
    std::mt19937_64 rng(42);
    std::vector<int64_t> labels(static_cast<size_t>(s.batch));
    for (int64_t& label : labels) label = static_cast<int64_t>(rng() % static_cast<uint64_t>(s.classes));
    return std::vector<Tensor>{randn({s.batch, 3, s.image, s.image}, gen), fromVector(labels, {s.batch})};
  };
  runsTrainStep<ResNetTrainStep>(w, [s] { return std::make_unique<ResNetTrainStep>(s); });
  // The convolutions and the classifier, 3x the forward's (forward, weights'
  // gradients, activations' gradients; the first convolution's input
  // gradient, which x does not need, counted too).
  w.flops = 3 * tools::resnet18ForwardFlops(s);
  w.itemsPerCall = s.batch;
  w.tolerance = kResNetTolerance;
  w.inDefaultRun = false;  // a minute here: docs/benchmarks.md, "ResNet-18"
  return w;
}

Workload attentionWorkload() {
  Workload w = fromModel("attention", 2 * 2.0 * 8 * 1024 * 1024 * 64);
  w.tolerance = 2e-5;
  return w;
}
}  // namespace

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> table = {
      fromModel("chain8"),       // 8 cheap elementwise ops on f32[16M]: memory-bound
      fromModel("chain8_math"),  // 8 elementwise ops with sqrt and sigmoid: compute-bound on few cores
      fromModel("bias_relu"),    // relu(x + b), x f32[4096,4096], b f32[4096]
      fromModel("softmax"),      // softmax over rows of f32[8192,1024]: 2 reductions, 5 kernels eager, 4 compiled
      fromModel("layernorm"),    // layer norm over rows of f32[8192,1024] with weight and bias
      fromModel("matmul", 2.0 * 1024 * 1024 * 1024),  // one sgemm, 1024^3: compute-bound, GFLOP/s
      fromModel("linear", 2.0 * 256 * 784 * 1024),    // the MLP's first layer, w read transposed
      fromModel("mlp", 2.0 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10)),  // matmuls between kernels
      // Issue 3's eager workloads.
      fromModel("relu_dropout"),            // relu -> dropout on f32[8192,1024]: Philox per element, one kernel
      fromModel("relu_dropout_layernorm"),  // relu -> dropout -> layer norm over rows of f32[8192,1024]
      // Issue 5's: forward and backward of the same, a bias + GELU epilogue,
      // a transformer block (6 matmuls, 4 of them batched per head).
      fromModel("relu_dropout_layernorm_train"),  // 1 kernel per row + 1 over the columns compiled
      fromModel("bias_gelu"),                     // gelu(x + b), x f32[4096,4096]
      fromModel("transformer_block", transformerBlockFlops()),
      mlpTrainStep("mlp_train_step", {}),  // forward, crossEntropy, backward, AdamW: compiled whole
      // The same step under bf16 autocast: time and peak memory against
      // mlp_train_step's (docs/amp.md has the figures).
      mlpTrainStep("mlp_train_step_bf16_autocast", {}, DType::bf16),
      // The same step on tiny shapes: its time is what a call costs beyond
      // the arithmetic (launches, uploads), which graph replay cuts.
      mlpTrainStep("mlp_train_step_small", {.in = 64, .hidden = 64, .classes = 10, .batch = 8}),
      // Issue 13's: transformer_block's forward, mseLoss, backward, AdamW.
      transformerTrainStep("transformer_train_step", {}),
      // Issue 14's: a stack of 4 smaller blocks, plain and with activation
      // checkpointing (peak memory against time).
      transformerTrainStep("transformer_stack_train_step", kStack),
      transformerTrainStep("transformer_stack_train_step_checkpointed",
                           {.seq = kStack.seq, .d = kStack.d, .heads = kStack.heads, .hidden = kStack.hidden,
                            .blocks = kStack.blocks, .checkpoint = true}),
      // The fused attention of fuse-attention against the unfused ops it
      // replaces: compiled results within attention's tolerance (docs/ops.md).
      attentionWorkload(),
      // Issue 5's convolutional networks: ResNet-18 at batch 8, 224x224,
      // inference and a training step; throughput in images/s. Not in the
      // default run (a minute more than its 40 s): --suite all or --filter.
      resnet18Infer(),
      resnet18TrainStep(),
  };
  return table;
}

}  // namespace kiln::bench

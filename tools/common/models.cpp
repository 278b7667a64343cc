// The built-in models of tools/common/models.h.
#include "tools/common/models.h"

#include <cmath>

#include "runtime/error.h"
#include "tools/common/resnet.h"

namespace kiln::tools {

Tensor chain8(const Tensor& x) {
  Tensor y = relu(x * 1.5 + 0.25);
  y = (y - 0.5) * 2.0;
  y = minimum(maximum(y, -1.0), 4.0);
  return -y;
}

Tensor chain8Math(const Tensor& x) {
  Tensor y = x * 1.5 + 0.25;
  y = relu(y);
  y = kiln::sqrt(y + 1.0);
  y = sigmoid(y - 1.0);
  return maximum(y, 0.6);
}

Tensor biasRelu(const Tensor& x, const Tensor& b) { return relu(x + b); }

MlpTrainStep::MlpTrainStep(Sizes s, std::optional<DType> autocast)
    : model_(nn::Linear(s.in, s.hidden), nn::ReLU(), nn::Linear(s.hidden, s.hidden), nn::ReLU(),
             nn::Linear(s.hidden, s.classes)),
      optimizer_(model_->parameters()),
      autocast_(autocast) {}

Tensor MlpTrainStep::operator()(const Tensor& x, const Tensor& labels) {
  optimizer_.zeroGrad();
  Tensor loss;
  {
    auto ac = kiln::autocast(DeviceType::cpu, autocast_.value_or(DType::bf16), autocast_.has_value());
    loss = crossEntropy(model_(x), labels);
  }
  loss.backward();
  optimizer_.step();
  return loss;
}

std::vector<ir::TensorType> MlpTrainStep::inputTypes(Sizes s) {
  return {{DType::f32, {s.batch, s.in}, Device::cpu()}, {DType::i64, {s.batch}, Device::cpu()}};
}

namespace {
dist::ProcessGroup oneRankGroup() {
  return dist::ProcessGroup::create("gloo", std::make_shared<dist::HashStore>(), 0, 1);
}
}  // namespace

DdpTrainStep::DdpTrainStep(std::optional<dist::ProcessGroup> group)
    : model_(nn::Linear(kIn, kHidden), nn::ReLU(), nn::Linear(kHidden, kHidden), nn::ReLU(),
             nn::Linear(kHidden, kClasses)),
      ddp_(model_, nn::DistributedDataParallelOptions{.processGroup = group ? *group : oneRankGroup(),
                                                      .bucketCapBytes = int64_t{64} << 10,
                                                      .firstBucketCapBytes = int64_t{4} << 10}),
      optimizer_(ddp_->parameters(), {.lr = 0.1}) {}

Tensor DdpTrainStep::operator()(const Tensor& x, const Tensor& labels) {
  optimizer_.zeroGrad();
  Tensor loss = crossEntropy(ddp_(x), labels);
  loss.backward();
  optimizer_.step();
  return loss;
}

std::vector<ir::TensorType> DdpTrainStep::inputTypes() {
  return {{DType::f32, {kBatch, kIn}, Device::cpu()}, {DType::i64, {kBatch}, Device::cpu()}};
}

Tensor reluDropout(const Tensor& x) { return dropout(relu(x), 0.1); }

Tensor reluDropoutLayerNorm(const Tensor& x, const Tensor& w, const Tensor& b) {
  return layerNorm(dropout(relu(x), 0.1), {x.size(-1)}, w, b);
}

std::vector<Tensor> reluDropoutLayerNormTrain(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g) {
  Tensor xx = x.detach().setRequiresGrad(), ww = w.detach().setRequiresGrad(), bb = b.detach().setRequiresGrad();
  Tensor y = reluDropoutLayerNorm(xx, ww, bb);
  y.backward(g);
  return {y, xx.grad(), ww.grad(), bb.grad()};
}

Tensor biasGelu(const Tensor& x, const Tensor& b) { return gelu(x + b); }

Tensor transformerBlock(const Tensor& x, const TransformerBlockWeights& p, int64_t heads) {
  const int64_t seq = x.size(0), d = x.size(1), dh = d / heads;
  const Tensor qkv = linear(layerNorm(x, {d}, p.ln1W, p.ln1B), p.wQkv, p.bQkv);  // [seq, 3d]
  // q, k, v: [heads, seq, dh] views of qkv's thirds, read by the matmuls
  // through their strides.
  auto head = [&](int64_t part) { return qkv.narrow(1, part * d, d).view({seq, heads, dh}).transpose(0, 1); };
  const Tensor q = head(0), k = head(1), v = head(2);
  const Tensor o = scaledDotProductAttention(q, k, v).transpose(0, 1).reshape({seq, d});  // heads side by side: a copy
  const Tensor h = x + linear(o, p.wO, p.bO);
  const Tensor m = linear(gelu(linear(layerNorm(h, {d}, p.ln2W, p.ln2B), p.w1, p.b1)), p.w2, p.b2);
  return h + m;
}

namespace {
// Parameters as PyTorch's modules make them: nn::LayerNorm (ones, zeros) and
// nn::Linear (drawn from the default generator, in this order).
TransformerBlockWeights makeTransformerWeights(const TransformerSizes& s) {
  nn::LayerNorm ln1(s.d), ln2(s.d);
  nn::Linear qkv(s.d, 3 * s.d), out(s.d, s.d), up(s.d, s.hidden), down(s.hidden, s.d);
  return {ln1->weight, ln1->bias, qkv->weight, qkv->bias, out->weight,  out->bias,
          ln2->weight, ln2->bias, up->weight,  up->bias,  down->weight, down->bias};
}

std::vector<TransformerBlockWeights> makeTransformerBlocks(const TransformerSizes& s) {
  KILN_CHECK(s.heads > 0 && s.d % s.heads == 0, "TransformerTrainStep: d {} is not a multiple of heads {}", s.d,
             s.heads);
  KILN_CHECK(s.blocks > 0, "TransformerTrainStep: {} blocks", s.blocks);
  std::vector<TransformerBlockWeights> blocks;
  for (int64_t i = 0; i < s.blocks; ++i) blocks.push_back(makeTransformerWeights(s));
  return blocks;
}

std::vector<Tensor> parameterList(const std::vector<TransformerBlockWeights>& blocks) {
  std::vector<Tensor> all;
  for (const TransformerBlockWeights& p : blocks)
    for (const Tensor& t : {p.ln1W, p.ln1B, p.wQkv, p.bQkv, p.wO, p.bO, p.ln2W, p.ln2B, p.w1, p.b1, p.w2, p.b2})
      all.push_back(t);
  return all;
}
}  // namespace

TransformerTrainStep::TransformerTrainStep(Sizes s)
    : sizes_(s), blocks_(makeTransformerBlocks(s)), optimizer_(parameterList(blocks_)) {}

Tensor TransformerTrainStep::operator()(const Tensor& x, const Tensor& target) {
  optimizer_.zeroGrad();
  Tensor h = x;
  for (const TransformerBlockWeights& block : blocks_) {
    const int64_t heads = sizes_.heads;
    auto run = [&block, heads](const Tensor& in) { return transformerBlock(in, block, heads); };
    h = sizes_.checkpoint ? checkpoint(run, h) : run(h);
  }
  Tensor loss = mseLoss(h, target);
  loss.backward();
  optimizer_.step();
  return loss;
}

std::vector<ir::TensorType> TransformerTrainStep::inputTypes(Sizes s) {
  return {{DType::f32, {s.seq, s.d}, Device::cpu()}, {DType::f32, {s.seq, s.d}, Device::cpu()}};
}

namespace {
ir::TensorType f32(Shape shape) { return {DType::f32, std::move(shape), Device::cpu()}; }

constexpr TransformerSizes kTransformer{};  // transformer_block's sizes, the train step's too

// x, then the weights in TransformerBlockWeights' order.
std::vector<ir::TensorType> transformerBlockInputs() {
  const int64_t s = kTransformer.seq, d = kTransformer.d, f = kTransformer.hidden;
  return {f32({s, d}),     f32({d}), f32({d}), f32({3 * d, d}), f32({3 * d}), f32({d, d}), f32({d}),
          f32({d}),        f32({d}), f32({f, d}), f32({f}),     f32({d, f}),   f32({d})};
}

const std::vector<Model>& table() {
  static const std::vector<Model> kModels = {
      {"chain8", "8 elementwise ops (mul, add, relu, sub, mul, maximum, minimum, neg) on 16M f32",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{chain8(in[0])}; },
       {f32({16 * 1024 * 1024})}},
      {"chain8_math", "8 elementwise ops heavy in arithmetic (mul, add, relu, add, sqrt, sub, sigmoid, maximum) on 16M f32",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{chain8Math(in[0])}; },
       {f32({16 * 1024 * 1024})}},
      {"bias_relu", "broadcasting bias-add + relu on f32[4096,4096] + f32[4096]",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{biasRelu(in[0], in[1])}; },
       {f32({4096, 4096}), f32({4096})}},
      {"dead_code", "a chain with an unused branch, for dce",
       [](const std::vector<Tensor>& in) {
         Tensor unused = exp(in[0]) * 2.0;  // never returned: dce removes it
         (void)unused;
         return std::vector<Tensor>{relu(in[0] + 1.0)};
       },
       {f32({1024})}},
      {"diamond", "a value used twice and a reduction-free diamond, fused into one kernel",
       [](const std::vector<Tensor>& in) {
         Tensor a = relu(in[0]);
         Tensor b = exp(in[0]);
         return std::vector<Tensor>{a * b, tanh(a)};
       },
       {f32({64, 128})}},
      {"broadcast_producer", "a producer over a smaller domain feeding a broadcast: two kernels",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(in[0] * sigmoid(in[1]))}; },
       {f32({256, 512}), f32({512})}},
      {"softmax", "softmax over the last dim of f32[8192,1024]: amax, sub, exp, sum, div",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{softmax(in[0], -1)}; },
       {f32({8192, 1024})}},
      {"attention",
       "softmax(q·kᵀ/8)·v written as separate ops, q, k, v f32[8,1024,64]: eagerly 2 matmuls and a softmax over "
       "f32[8,1024,1024]; compiled, fuse-attention makes it one fused attention call",
       [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{matmul(softmax(matmul(in[0], in[1].transpose(1, 2)) * 0.125, -1), in[2])};
       },
       {f32({8, 1024, 64}), f32({8, 1024, 64}), f32({8, 1024, 64})}},
      {"matmul", "matmul of f32[1024,1024] by f32[1024,1024]: one BLAS call",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{matmul(in[0], in[1])}; },
       {f32({1024, 1024}), f32({1024, 1024})}},
      {"linear", "linear(x, w): f32[256,784] times the transpose of f32[1024,784], the MLP's first layer; BLAS reads w transposed",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{linear(in[0], in[1])}; },
       {f32({256, 784}), f32({1024, 784})}},
      {"mlp", "the MLP's forward pass: relu(linear) 784 -> 1024 -> 1024, then linear to 10, batch 256 (matmuls between kernels)",
       [](const std::vector<Tensor>& in) {
         Tensor h = relu(linear(in[0], in[1], in[2]));
         h = relu(linear(h, in[3], in[4]));
         return std::vector<Tensor>{linear(h, in[5], in[6])};
       },
       {f32({256, 784}), f32({1024, 784}), f32({1024}), f32({1024, 1024}), f32({1024}), f32({10, 1024}), f32({10})}},
      {"layernorm", "layer norm over the last dim of f32[8192,1024] with weight and bias (two-pass mean and variance)",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{layerNorm(in[0], {1024}, in[1], in[2])}; },
       {f32({8192, 1024}), f32({1024}), f32({1024})}},
      {"relu_dropout", "relu then dropout (p = 0.1, default generator) on f32[8192,1024]: one kernel",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{reluDropout(in[0])}; },
       {f32({8192, 1024})}},
      {"relu_dropout_layernorm",
       "relu, dropout (p = 0.1) and layer norm with weight and bias over the last dim of f32[8192,1024]",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{reluDropoutLayerNorm(in[0], in[1], in[2])}; },
       {f32({8192, 1024}), f32({1024}), f32({1024})}},
      {"relu_dropout_layernorm_train",
       "relu_dropout_layernorm forward and backward from an upstream gradient g (y.backward(g)): y and the "
       "gradients of x, w and b",
       [](const std::vector<Tensor>& in) { return reluDropoutLayerNormTrain(in[0], in[1], in[2], in[3]); },
       {f32({8192, 1024}), f32({1024}), f32({1024}), f32({8192, 1024})}},
      {"bias_gelu", "broadcasting bias-add + GELU (exact) on f32[4096,4096] + f32[4096]",
       [](const std::vector<Tensor>& in) { return std::vector<Tensor>{biasGelu(in[0], in[1])}; },
       {f32({4096, 4096}), f32({4096})}},
      {"transformer_block",
       "a pre-LN transformer block forward, seq 512, d 512, 8 heads, MLP 2048: layer norms, QKV and output "
       "projections, per-head fused attention (scaledDotProductAttention), GELU, residuals (matmuls through the BLAS)",
       [](const std::vector<Tensor>& in) {
         return std::vector<Tensor>{transformerBlock(
             in[0], {in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10], in[11], in[12]},
             kTransformer.heads)};
       },
       transformerBlockInputs()},
      {"mlp_train_step",
       "one AdamW training step of an MLP 784-1024-1024-10 (forward, crossEntropy, backward, optimizer step) on a "
       "batch of 256: parameters, moments and gradients are written back (one model, made at the first call)",
       [](const std::vector<Tensor>& in) {
         static MlpTrainStep* step = new MlpTrainStep();  // state for the process's life
         return std::vector<Tensor>{(*step)(in[0], in[1])};
       },
       MlpTrainStep::inputTypes()},
      {"mlp_train_step_bf16_autocast",
       "mlp_train_step with its forward pass and loss under kiln::autocast(cpu, bf16): the linear layers in bf16, "
       "the loss in f32, f32 parameters, gradients and AdamW (one model, made at the first call)",
       [](const std::vector<Tensor>& in) {
         static MlpTrainStep* step = new MlpTrainStep({}, DType::bf16);  // state for the process's life
         return std::vector<Tensor>{(*step)(in[0], in[1])};
       },
       MlpTrainStep::inputTypes()},
      {"transformer_train_step",
       "one AdamW training step of transformer_block (seq 512, d 512, 8 heads, MLP 2048): forward, mseLoss against "
       "a target, backward, optimizer step on the 12 parameters (one model, made at the first call)",
       [](const std::vector<Tensor>& in) {
         static TransformerTrainStep* step = new TransformerTrainStep();  // state for the process's life
         return std::vector<Tensor>{(*step)(in[0], in[1])};
       },
       TransformerTrainStep::inputTypes()},
      {"resnet18_infer",
       "ResNet-18 (torchvision's structure and initialization) in eval mode without gradients on a batch of 8 "
       "3x224x224 images: 20 convolutions, batch norms, ReLUs, max and average pooling, the classifier (one model, "
       "made at the first call)",
       [](const std::vector<Tensor>& in) {
         static ResNet* model = [] {
           auto* m = new ResNet(resnet18());  // state for the process's life
           (*m)->eval();
           return m;
         }();
         NoGradGuard noGrad;
         return std::vector<Tensor>{(*model)(in[0])};
       },
       {f32({ResNetSizes{}.batch, 3, ResNetSizes{}.image, ResNetSizes{}.image})}},
      {"resnet18_train_step",
       "one SGD (momentum 0.9) training step of ResNet-18 on a batch of 8 3x224x224 images: forward in training "
       "mode, crossEntropy, backward, optimizer step (one model, made at the first call)",
       [](const std::vector<Tensor>& in) {
         static ResNetTrainStep* step = new ResNetTrainStep();  // state for the process's life
         return std::vector<Tensor>{(*step)(in[0], in[1])};
       },
       ResNetTrainStep::inputTypes()},
      {"ddp_train_step",
       "one DistributedDataParallel SGD step of an MLP 64-128-128-10 on a batch of 32, three gradient buckets, each "
       "an all_reduce node started as soon as its gradients are computed (a gloo group of one rank)",
       [](const std::vector<Tensor>& in) {
         static DdpTrainStep* step = new DdpTrainStep();  // state for the process's life
         return std::vector<Tensor>{(*step)(in[0], in[1])};
       },
       DdpTrainStep::inputTypes()},
  };
  return kModels;
}
}  // namespace

std::span<const Model> models() { return table(); }

const Model* findModel(const std::string& name) {
  for (const Model& m : table())
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace kiln::tools

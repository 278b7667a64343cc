// The table of kiln-bench workloads (see workload.h). docs/benchmarks.md
// describes each entry; keep the two in step.
#include <fmt/format.h>

#include "runtime/error.h"
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

Workload pending(std::string name, std::string description, std::vector<ir::TensorType> inputTypes, std::string why) {
  Workload w;
  w.name = std::move(name);
  w.description = std::move(description);
  w.inputTypes = std::move(inputTypes);
  w.skipped = std::move(why);
  return w;
}

namespace {
ir::TensorType cpu(DType dtype, Shape shape) { return {dtype, std::move(shape), Device::cpu()}; }
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
      // Issue 3's eager workloads that wait for ops still being built. Each
      // becomes fromModel(...) (or a written-out Workload) when they land.
      pending("relu_dropout_layernorm",
              "layerNorm(dropout(relu(x), 0.1), {1024}, w, b) on f32[8192,1024], default generator",
              {cpu(DType::f32, {8192, 1024}), cpu(DType::f32, {1024}), cpu(DType::f32, {1024})}, "dropout not built"),
      pending("mlp_train_step",
              "one AdamW training step of an MLP 784-1024-1024-10 (Linear-ReLU-Linear-ReLU-Linear, cross_entropy) "
              "on a batch of 256",
              {cpu(DType::f32, {256, 784}), cpu(DType::i64, {256})}, "nn and optim not built"),
  };
  return table;
}

}  // namespace kiln::bench

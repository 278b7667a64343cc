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
  return Workload{model->name, model->summary, [types = model->inputs] { return randnInputs(types); }, model->fn,
                  flops};
}

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
  };
  return table;
}

}  // namespace kiln::bench

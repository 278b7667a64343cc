// End to end: the built-in softmax and layernorm models (the functions
// kiln-bench measures and `irdump --example` traces) compiled equal eager
// bit for bit, at the shapes they are benchmarked at, and each compiles to
// one kernel (fuse-reductions; eager runs one kernel per primitive op).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "frontend/kiln.h"
#include "runtime/executable.h"
#include "tools/common/models.h"

namespace {

using namespace kiln;

TEST(ReductionModels, CompiledEqualsEagerBitForBit) {
  for (const char* name : {"softmax", "layernorm"}) {
    const tools::Model* model = tools::findModel(name);
    ASSERT_TRUE(model) << name;
    Generator gen(17);
    std::vector<Tensor> inputs;
    for (const ir::TensorType& t : model->inputs) inputs.push_back(randn(t.shape, gen));
    const int64_t before = runtime::kernelLaunchCount();
    const std::vector<Tensor> eager = model->fn(inputs);
    const int64_t eagerKernels = runtime::kernelLaunchCount() - before;
    detail::CompileEngine engine([fn = model->fn](const std::vector<Tensor>& in) { return fn(in); }, CompileOptions{});
    const std::vector<Tensor> compiled = engine.call(inputs);
    ASSERT_EQ(eager.size(), compiled.size());
    const auto e = eager[0].toVector(), c = compiled[0].toVector();
    size_t mismatches = 0;
    for (size_t i = 0; i < e.size(); ++i)
      mismatches +=
          !(std::bit_cast<uint32_t>(e[i]) == std::bit_cast<uint32_t>(c[i]) || (std::isnan(e[i]) && std::isnan(c[i])));
    EXPECT_EQ(mismatches, 0u) << name;
    EXPECT_EQ(eagerKernels, std::string(name) == "softmax" ? 5 : 10) << name;
    EXPECT_EQ(engine.lastNumKernels(), 1) << name << "\n" << engine.lastGraph();
  }
}

}  // namespace

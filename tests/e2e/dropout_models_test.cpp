// End to end: the built-in dropout models (relu_dropout and
// relu_dropout_layernorm, what kiln-bench measures and `irdump --example`
// traces) compiled equal eager bit for bit on three successive calls, each
// drawing a new mask from the default generator, which both advance alike.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "frontend/kiln.h"
#include "runtime/executable.h"
#include "tools/common/models.h"

namespace {

using namespace kiln;

size_t mismatches(const Tensor& a, const Tensor& b) {
  const auto e = a.toVector(), c = b.toVector();
  size_t n = 0;
  for (size_t i = 0; i < e.size(); ++i)
    n += !(std::bit_cast<uint32_t>(e[i]) == std::bit_cast<uint32_t>(c[i]) || (std::isnan(e[i]) && std::isnan(c[i])));
  return n;
}

TEST(DropoutModels, CompiledEqualsEagerBitForBitOnEveryCall) {
  for (const char* name : {"relu_dropout", "relu_dropout_layernorm"}) {
    const tools::Model* model = tools::findModel(name);
    ASSERT_TRUE(model) << name;
    Generator gen(19);
    std::vector<Tensor> inputs;
    for (const ir::TensorType& t : model->inputs) inputs.push_back(randn(t.shape, gen));
    detail::CompileEngine engine([fn = model->fn](const std::vector<Tensor>& in) { return fn(in); }, CompileOptions{});
    manualSeed(1234);
    Tensor previous;
    for (int call = 0; call < 3; ++call) {
      const uint64_t offset = defaultGenerator().offset();
      const Tensor eager = model->fn(inputs)[0];
      defaultGenerator().setOffset(offset);
      const Tensor compiled = engine.call(inputs)[0];
      EXPECT_EQ(defaultGenerator().offset(), offset + 1) << name;
      EXPECT_EQ(mismatches(eager, compiled), 0u) << name << " call " << call;
      if (previous.defined()) {
        EXPECT_GT(mismatches(previous, compiled), 0u) << name << ": the mask was replayed";
      }
      previous = compiled;
    }
    // One kernel each: relu -> dropout -> layer norm is one pass of
    // fuse-reductions (the draws recomputed in each pass over the row).
    EXPECT_EQ(engine.lastNumKernels(), 1) << name << "\n" << engine.lastGraph();
  }
}

}  // namespace

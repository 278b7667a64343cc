// plan-memory end to end (codegen/plan_memory.h): kiln::compile's programs
// share buffers between intermediates, and still equal eager bit for bit,
// on kiln-bench's transformer block (matmuls on views of one QKV result, a
// softmax, multi-result fusions, a residual read long after it is made) and
// on relu -> dropout -> layer_norm forward and backward; the compiled
// transformer block's planned program allocates less at its peak than the
// same program with a buffer per intermediate, by the allocator's stats.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "frontend/kiln.h"
#include "passes/passes.h"
#include "runtime/device_interface.h"
#include "runtime/buffer.h"
#include "tools/common/models.h"

namespace {

using namespace kiln;

/// The model's inputs: normal, scaled down so that the block's values stay
/// in a range where every op matters (standard-normal weights saturate the
/// softmax).
std::vector<Tensor> inputsOf(const tools::Model& m, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> out;
  for (const ir::TensorType& t : m.inputs) out.push_back(randn(t.shape, gen) * 0.05);
  return out;
}

void expectBitEqual(const std::vector<Tensor>& eager, const std::vector<Tensor>& compiled) {
  ASSERT_EQ(eager.size(), compiled.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    ASSERT_EQ(eager[i].type(), compiled[i].type()) << "result " << i;
    const std::vector<float> a = eager[i].toVector(), b = compiled[i].toVector();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "result " << i;
  }
}

/// Runs model `name` eagerly and compiled from one generator state.
void expectCompiledEqualsEager(const std::string& name) {
  SCOPED_TRACE(name);
  const tools::Model* m = tools::findModel(name);
  ASSERT_NE(m, nullptr);
  const std::vector<Tensor> in = inputsOf(*m, 3);
  manualSeed(11);
  const uint64_t offset = defaultGenerator().offset();
  const std::vector<Tensor> eager = m->fn(in);
  defaultGenerator().setOffset(offset);
  detail::CompileEngine engine(m->fn, CompileOptions{});
  expectBitEqual(eager, engine.call(in));
}

TEST(MemoryPlan, CompiledModelsEqualEager) {
  for (const char* name : {"transformer_block", "relu_dropout_layernorm_train", "mlp"})
    expectCompiledEqualsEager(name);
}

TEST(MemoryPlan, TheTransformerBlocksPlanSharesBuffersAndLowersThePeak) {
  const tools::Model* m = tools::findModel("transformer_block");
  ASSERT_NE(m, nullptr);
  Trace trace = kiln::trace(m->fn, m->inputs, m->name);
  ASSERT_EQ(trace.graph->numInputs(), static_cast<int>(m->inputs.size())) << "no captures, no draws";
  passes::PassManager(CompileOptions{}.pipeline).run(*trace.graph);
  const runtime::Executable planned = codegen::compileGraph(*trace.graph, Device::cpu());
  runtime::Executable unplanned = planned;
  unplanned.slotBuffers.clear();
  unplanned.buffers.clear();
  // The block's intermediates: [512,1536] QKV, [8,512,512] scores (8 MiB)
  // and probabilities, [512,2048] MLP activations, several [512,512]: the
  // scores die at the softmax, whose result dies at p·v, so the plan packs
  // them into fewer bytes.
  EXPECT_LT(planned.intermediateBytes(), unplanned.intermediateBytes());
  EXPECT_LT(planned.buffers.size(), static_cast<size_t>(planned.numKernels()));

  const std::vector<Tensor> in = inputsOf(*m, 5);
  std::vector<std::shared_ptr<runtime::Buffer>> buffers;
  for (const Tensor& t : in) buffers.push_back(t.impl()->storage);
  runtime::DeviceInterface& alloc = runtime::deviceInterface(Device::cpu());
  auto peakOf = [&](const runtime::Executable& exe, std::vector<std::shared_ptr<runtime::Buffer>>& out) {
    alloc.resetPeakMemoryStats();
    const int64_t before = alloc.memoryStats().allocatedBytes;
    out = exe.run(buffers);
    return alloc.memoryStats().peakAllocatedBytes - before;
  };
  std::vector<std::shared_ptr<runtime::Buffer>> a, b;
  const int64_t peakUnplanned = peakOf(unplanned, a), peakPlanned = peakOf(planned, b);
  // By at least what the plan saves, less the allocator's rounding (to
  // 2 MiB above 1 MiB) of the buffers that grew.
  EXPECT_LT(peakPlanned, peakUnplanned);
  EXPECT_GE(peakUnplanned - peakPlanned,
            static_cast<int64_t>(unplanned.intermediateBytes() - planned.intermediateBytes()) -
                static_cast<int64_t>(planned.buffers.size()) * (2 << 20));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(std::memcmp(a[0]->hostData(), b[0]->hostData(), 512 * 512 * sizeof(float)), 0);
}

}  // namespace

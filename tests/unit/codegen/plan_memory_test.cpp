// plan-memory (codegen/plan_memory.h): intermediates whose lifetimes do not
// overlap share a buffer, nothing named by one step shares, inputs and
// outputs are never planned, buffers are per device, best fit picks the
// smallest buffer that fits and grows the largest free one otherwise, a
// small long-lived slot does not pin a big buffer (the plan reaches the
// most bytes live at once there), no plan is below that bound; on
// compiled graphs (matmuls between kernels, a multi-result fusion, a value
// read again much later) the planned program computes exactly what the same
// program computes with a buffer per slot, and allocates less at its peak.
#include "codegen/plan_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "codegen/compile_graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/passes.h"
#include "runtime/allocator.h"
#include "runtime/buffer.h"

namespace {

using namespace kiln;
using runtime::Executable;
using runtime::LibraryStep;

/// An executable whose steps name `stepSlots` (never run: the plan only
/// reads which slots each step names). Slot sizes are `bytes`.
Executable steps(std::vector<size_t> bytes, std::vector<std::vector<int>> stepSlots, std::vector<int> inputs,
                 std::vector<int> outputs, std::vector<Device> devices = {}) {
  Executable exe;
  for (size_t s = 0; s < bytes.size(); ++s) exe.slots.push_back({bytes[s], devices.empty() ? Device::cpu() : devices[s]});
  for (auto& slots : stepSlots) exe.steps.emplace_back(LibraryStep{"step", nullptr, std::move(slots), {}, {}});
  exe.inputSlots = std::move(inputs);
  exe.outputSlots = std::move(outputs);
  return exe;
}

TEST(PlanMemory, AChainsIntermediatesTakeTurnsInTwoBuffers) {
  // x -> a -> b -> c -> d -> out: a and c never live at once, nor b and d.
  // Slots: 0 x, 1 a, 2 b, 3 c, 4 d, 5 out.
  Executable exe = steps({64, 64, 64, 64, 64, 64}, {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}, {0}, {5});
  codegen::MemoryPlanStats stats = codegen::planMemory(exe);
  EXPECT_EQ(stats.slots, 4);
  EXPECT_EQ(stats.buffers, 2);
  EXPECT_EQ(stats.bytesBefore, 256u);
  EXPECT_EQ(stats.bytesAfter, 128u);
  EXPECT_EQ(exe.slotBuffers[1], exe.slotBuffers[3]);
  EXPECT_EQ(exe.slotBuffers[2], exe.slotBuffers[4]);
  EXPECT_NE(exe.slotBuffers[1], exe.slotBuffers[2]);
  EXPECT_EQ(exe.slotBuffers[0], -1) << "an input is the caller's";
  EXPECT_EQ(exe.slotBuffers[5], -1) << "an output is handed back";
  EXPECT_EQ(exe.intermediateBytes(), 128u);
}

TEST(PlanMemory, AValueReadLaterKeepsItsBuffer) {
  // a is read again by the last step: nothing born after it may take its buffer.
  // Slots: 0 x, 1 a, 2 b, 3 c, 4 out = f(c, a).
  Executable exe = steps({64, 64, 64, 64, 64}, {{0, 1}, {1, 2}, {2, 3}, {3, 1, 4}}, {0}, {4});
  codegen::planMemory(exe);
  EXPECT_NE(exe.slotBuffers[1], exe.slotBuffers[2]);
  EXPECT_NE(exe.slotBuffers[1], exe.slotBuffers[3]);
  EXPECT_NE(exe.slotBuffers[2], exe.slotBuffers[3]) << "b and c meet in one step";
}

TEST(PlanMemory, SlotsOfOneStepNeverShare) {
  // A step that reads a (its last use) and writes b: kernel parameters are
  // noalias, so b may not reuse a's buffer in that step.
  Executable exe = steps({64, 64, 64, 64}, {{0, 1}, {1, 2}, {2, 3}}, {0}, {3});
  codegen::planMemory(exe);
  EXPECT_NE(exe.slotBuffers[1], exe.slotBuffers[2]);
}

TEST(PlanMemory, BuffersArePerDevice) {
  const Device cpu = Device::cpu(), gpu = Device::cuda(0);
  // a on the cpu dies before b on cuda:0 is born; they still cannot share.
  Executable exe = steps({64, 64, 64, 64}, {{0, 1}, {1}, {2}, {2, 3}}, {0}, {3}, {cpu, cpu, gpu, cpu});
  codegen::MemoryPlanStats stats = codegen::planMemory(exe);
  EXPECT_EQ(stats.buffers, 2);
  EXPECT_NE(exe.slotBuffers[1], exe.slotBuffers[2]);
  EXPECT_EQ(exe.buffers[exe.slotBuffers[2]].device, gpu);
}

TEST(PlanMemory, BestFitTakesTheSmallestBufferThatFitsAndGrowsTheLargestOtherwise) {
  // Step 0 makes a (100 B) and b (1000 B), both dead after step 1. Step 2
  // makes c (80 B): it takes a's buffer, the smallest that fits. Step 3
  // makes d (2000 B) while c lives: b's buffer, the only free one, grows.
  // Slots: 0 x, 1 a, 2 b, 3 c, 4 d, 5 out.
  Executable exe = steps({8, 100, 1000, 80, 2000, 8}, {{0, 1, 2}, {1, 2}, {0, 3}, {3, 4}, {4, 5}}, {0}, {5});
  codegen::MemoryPlanStats stats = codegen::planMemory(exe);
  EXPECT_EQ(exe.slotBuffers[3], exe.slotBuffers[1]);
  EXPECT_EQ(exe.slotBuffers[4], exe.slotBuffers[2]);
  EXPECT_EQ(stats.buffers, 2);
  EXPECT_EQ(stats.bytesAfter, 100u + 2000u);
}

TEST(PlanMemory, ASmallLongLivedSlotDoesNotPinABigBuffer) {
  // a (1000 B) lives over steps 0-1, b (10 B) over 2-5, c (1000 B) over
  // 3-4. In step order b would take a's free buffer and pin it, and c would
  // need a second 1000 B one (2000 B in all); a and c can share, and b alone
  // costs 10 B: 1010 B, the most ever live at once (step 3: b and c), so no
  // plan does better (Note [Two packings, the smaller kept]).
  // Slots: 0 x, 1 a, 2 b, 3 c, 4 out.
  Executable exe = steps({8, 1000, 10, 1000, 8}, {{0, 1}, {1}, {0, 2}, {3}, {3}, {2, 4}}, {0}, {4});
  codegen::MemoryPlanStats stats = codegen::planMemory(exe);
  EXPECT_EQ(stats.liveBytes, 1010u);
  EXPECT_EQ(stats.bytesAfter, 1010u);
  EXPECT_EQ(stats.buffers, 2);
  EXPECT_EQ(exe.slotBuffers[1], exe.slotBuffers[3]);
  EXPECT_NE(exe.slotBuffers[2], exe.slotBuffers[1]);
}

TEST(PlanMemory, RandomProgramsNeverShareLiveSlots) {
  // Random step lists: every planned slot fits its buffer and on its device,
  // and two slots in one buffer have disjoint step ranges.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int numSlots = 2 + static_cast<int>(rng() % 12), numSteps = 1 + static_cast<int>(rng() % 10);
    std::vector<size_t> bytes;
    std::vector<Device> devices;
    for (int s = 0; s < numSlots; ++s) {
      bytes.push_back(8 * (1 + rng() % 64));
      devices.push_back(rng() % 4 ? Device::cpu() : Device::cuda(0));
    }
    std::vector<std::vector<int>> stepSlots(numSteps);
    for (auto& slots : stepSlots)
      for (int s = 0; s < numSlots; ++s)
        if (rng() % 3 == 0) slots.push_back(s);
    Executable exe = steps(bytes, stepSlots, {0}, {numSlots - 1}, devices);
    const codegen::MemoryPlanStats stats = codegen::planMemory(exe);
    EXPECT_GE(stats.bytesAfter, stats.liveBytes) << "trial " << trial << ": below the lower bound";
    EXPECT_LE(stats.bytesAfter, stats.bytesBefore) << "trial " << trial;
    std::vector<int> first(numSlots, numSteps), last(numSlots, -1);
    for (int i = 0; i < numSteps; ++i)
      for (int s : stepSlots[i]) first[s] = std::min(first[s], i), last[s] = std::max(last[s], i);
    ASSERT_EQ(exe.slotBuffers.size(), static_cast<size_t>(numSlots));
    EXPECT_EQ(exe.slotBuffers[0], -1);
    EXPECT_EQ(exe.slotBuffers[numSlots - 1], -1);
    for (int a = 0; a < numSlots; ++a) {
      const int b = exe.slotBuffers[a];
      if (b < 0) continue;
      EXPECT_GE(exe.buffers[b].bytes, bytes[a]);
      EXPECT_EQ(exe.buffers[b].device, devices[a]);
      for (int c = a + 1; c < numSlots; ++c) {
        if (exe.slotBuffers[c] != b) continue;
        EXPECT_TRUE(last[a] < first[c] || last[c] < first[a])
            << "trial " << trial << ": slots " << a << " and " << c << " share buffer " << b << " while both live";
      }
    }
  }
}

// --- compiled graphs -------------------------------------------------------

/// The graph of `text`, fused as kiln::compile fuses it.
std::unique_ptr<ir::Graph> fusedGraph(const std::string& text) {
  std::unique_ptr<ir::Graph> g = ir::parseGraph(text, "plan_memory_test");
  passes::PassManager("canonicalize,cse,dce,fuse-reductions,fuse-elementwise").run(*g);
  return g;
}

std::shared_ptr<runtime::Buffer> randomFloats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto buf = runtime::allocateBuffer(Device::cpu(), static_cast<size_t>(n) * sizeof(float));
  auto* p = static_cast<float*>(buf->hostData());
  for (int64_t i = 0; i < n; ++i) p[i] = normal(rng);
  return buf;
}

struct Run {
  std::vector<std::shared_ptr<runtime::Buffer>> outputs;
  int64_t peakBytes = 0;  ///< the allocator's peak during the run, above what was allocated before it
};

Run runMeasured(const Executable& exe, const std::vector<std::shared_ptr<runtime::Buffer>>& inputs) {
  runtime::HostAllocator& alloc = runtime::HostAllocator::instance();
  alloc.resetPeakStats();
  const int64_t before = alloc.stats().allocatedBytes;
  Run r;
  r.outputs = exe.run(inputs);
  r.peakBytes = alloc.stats().peakAllocatedBytes - before;
  return r;
}

/// Runs `exe` planned and with a buffer per slot, on the same inputs: the
/// outputs must be equal bit for bit (the unplanned program is the
/// reference: no slot shares memory there). Returns the two runs.
std::pair<Run, Run> runBothWays(const Executable& exe, const std::vector<std::shared_ptr<runtime::Buffer>>& inputs) {
  Executable unplanned = exe;
  unplanned.slotBuffers.clear();
  unplanned.buffers.clear();
  Run reference = runMeasured(unplanned, inputs);
  // Dirty the allocator's cache with garbage of the sizes the plan asks for,
  // so that a buffer read before it is written shows up as a difference.
  for (const runtime::SlotSpec& b : exe.buffers) {
    auto junk = runtime::allocateBuffer(b.device, b.bytes);
    std::memset(junk->hostData(), 0x7f, b.bytes);
  }
  Run planned = runMeasured(exe, inputs);
  EXPECT_EQ(planned.outputs.size(), reference.outputs.size());
  for (size_t i = 0; i < planned.outputs.size(); ++i) {
    const size_t bytes = exe.slots[exe.outputSlots[i]].bytes;
    EXPECT_EQ(std::memcmp(planned.outputs[i]->hostData(), reference.outputs[i]->hostData(), bytes), 0) << "output " << i;
  }
  return {planned, reference};
}

TEST(PlanMemory, MatmulsBetweenKernelsShareBuffersAndComputeTheSame) {
  // a = x·w, b = relu(a), c = b·w, d = relu(c), e = d·w, g = relu(e),
  // h = g·w, out = h + a. a is read twice, so b = relu(a) is a step of its
  // own; d, g and out are their matmuls' epilogues, computed in place
  // (Note [Matmul epilogues in compiled programs]): d into c's slot, g into
  // e's, out into h's. Steps: a, b, c (d), e (g), h (out). Of the planned
  // slots a (steps 0-4), b (1-2), c (2-3) and e (3-4), b and e take turns.
  auto g = fusedGraph(R"(
graph @chain(%x: f32[256,256]@cpu, %w: f32[256,256]@cpu) -> (f32[256,256]@cpu) {
  %a = matmul(%x, %w) : f32[256,256]@cpu
  %b = relu(%a) : f32[256,256]@cpu
  %c = matmul(%b, %w) : f32[256,256]@cpu
  %d = relu(%c) : f32[256,256]@cpu
  %e = matmul(%d, %w) : f32[256,256]@cpu
  %g = relu(%e) : f32[256,256]@cpu
  %h = matmul(%g, %w) : f32[256,256]@cpu
  %f = add(%h, %a) : f32[256,256]@cpu
  return %f
}
)");
  Executable exe = codegen::compileGraph(*g, Device::cpu());
  ASSERT_EQ(exe.steps.size(), 5u) << ir::printGraph(*g);
  EXPECT_EQ(exe.numEpilogues(), 3);
  // Slots: x 0, w 1, then one per step's new result: a 2, b 3, c 4, e 5, h 6 (the output).
  ASSERT_EQ(exe.slots.size(), 7u);
  EXPECT_EQ(exe.outputSlots, std::vector<int>{6});
  EXPECT_EQ(exe.slotBuffers[3], exe.slotBuffers[5]) << "b dies at c's step, e is born after";
  for (int s : {3, 4, 5}) EXPECT_NE(exe.slotBuffers[2], exe.slotBuffers[s]) << "a is read by the last step";
  EXPECT_NE(exe.slotBuffers[4], exe.slotBuffers[3]) << "c is born at b's last step";
  EXPECT_NE(exe.slotBuffers[4], exe.slotBuffers[5]) << "e is born at c's last step";
  EXPECT_EQ(exe.buffers.size(), 3u);
  auto [planned, reference] = runBothWays(exe, {randomFloats(256 * 256, 1), randomFloats(256 * 256, 2)});
  // Reference: output + 4 intermediates of 256 KiB; planned: output + 3.
  EXPECT_EQ(reference.peakBytes - planned.peakBytes, 256 * 1024);
}

TEST(PlanMemory, AMultiResultFusionsResultsStayApartAndLive) {
  // p and q are two results of one fusion (both read by later matmuls); s
  // reads q two steps after p's last reader.
  auto g = fusedGraph(R"(
graph @two(%x: f32[128,128]@cpu, %w: f32[128,128]@cpu) -> (f32[128,128]@cpu) {
  %a = matmul(%x, %w) : f32[128,128]@cpu
  %p = relu(%a) : f32[128,128]@cpu
  %q = exp(%a) : f32[128,128]@cpu
  %r = matmul(%p, %w) : f32[128,128]@cpu
  %t = sigmoid(%r) : f32[128,128]@cpu
  %u = matmul(%t, %w) : f32[128,128]@cpu
  %s = matmul(%q, %w) : f32[128,128]@cpu
  %o = add(%u, %s) : f32[128,128]@cpu
  return %o
}
)");
  Executable exe = codegen::compileGraph(*g, Device::cpu());
  codegen::MemoryPlanStats stats = codegen::planMemory(exe);
  EXPECT_LT(stats.bytesAfter, stats.bytesBefore) << ir::printGraph(*g);
  auto [planned, reference] = runBothWays(exe, {randomFloats(128 * 128, 3), randomFloats(128 * 128, 4)});
  EXPECT_LT(planned.peakBytes, reference.peakBytes);
}

TEST(PlanMemory, ReductionsAndTransposedViewsOfIntermediates) {
  // softmax rows of x·w, then read transposed by a matmul (a view of an
  // intermediate, aliasing its slot), then a layer-norm-like reduction.
  auto g = fusedGraph(R"(
graph @attn(%x: f32[64,96]@cpu, %w: f32[96,64]@cpu) -> (f32[64,64]@cpu) {
  %s = matmul(%x, %w) : f32[64,64]@cpu
  %m = amax(%s) {dims = [1], keepdim = 1} : f32[64,1]@cpu
  %d = sub(%s, %m) : f32[64,64]@cpu
  %e = exp(%d) : f32[64,64]@cpu
  %z = sum(%e) {dims = [1], keepdim = 1} : f32[64,1]@cpu
  %p = div(%e, %z) : f32[64,64]@cpu
  %pt = transpose(%p) {perm = [1, 0]} : f32[64,64]@cpu
  %o = matmul(%pt, %s) : f32[64,64]@cpu
  %k = matmul(%o, %pt) : f32[64,64]@cpu
  %r = relu(%k) : f32[64,64]@cpu
  return %r
}
)");
  Executable exe = codegen::compileGraph(*g, Device::cpu());
  runBothWays(exe, {randomFloats(64 * 96, 5), randomFloats(96 * 64, 6)});
}

}  // namespace

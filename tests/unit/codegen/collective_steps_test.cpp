// compileGraph's collective steps (Note [Collective steps] in
// runtime/executable_collectives.cpp, Note [Scheduling collectives] in
// codegen/lowering_collective.cpp), on a gloo group of one rank: an
// all-reduce in place in its operand's slot when nothing else reads that,
// in a copy otherwise; its start right after its operand's producer, its
// wait right before its result's first reader and before any in-place
// update of a donated input.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "codegen/compile_graph.h"
#include "ir/parser.h"
#include "passes/passes.h"
#include "runtime/buffer.h"
#include "runtime/dist_process_group.h"
#include "runtime/error.h"
#include "runtime/profiler_events.h"
#include "tests/common/host_buffers.h"

namespace kiln::codegen {
namespace {

using ::kiln::testing::hostFloats;
using ::kiln::testing::readFloats;

using runtime::CollectiveStep;

/// The id of a gloo group of one rank, made once.
int64_t oneRankGroup() {
  static const std::shared_ptr<runtime::dist::ProcessGroup> group =
      runtime::dist::createProcessGroup("gloo", std::make_shared<runtime::dist::HashStore>(), 0, 1);
  return runtime::dist::groupId(group);
}

runtime::Executable compile(const std::string& text, std::span<const Donation> donations = {}) {
  std::unique_ptr<ir::Graph> g = ir::parseGraph(fmt::format(fmt::runtime(text), oneRankGroup()), "collective_steps");
  passes::PassManager("canonicalize,cse,dce,fuse-reductions,fuse-elementwise").run(*g);
  return compileGraph(*g, Device::cpu(), {}, donations);
}

/// The kinds of the steps, one letter each: k kernel, l library call, c
/// copy, s start, w wait.
std::string shape(const runtime::Executable& exe) {
  std::string s;
  for (const runtime::Step& step : exe.steps) {
    if (std::holds_alternative<runtime::KernelStep>(step)) s += 'k';
    if (std::holds_alternative<runtime::LibraryStep>(step)) s += 'l';
    if (std::holds_alternative<runtime::CopyStep>(step)) s += 'c';
    if (const auto* c = std::get_if<CollectiveStep>(&step)) s += c->phase == CollectiveStep::Phase::start ? 's' : 'w';
  }
  return s;
}

TEST(CollectiveSteps, InPlaceWhenOnlyTheCollectiveReadsItsOperand) {
  runtime::Executable exe = compile(R"(
graph @g(%x: f32[4]@cpu) -> (f32[4]@cpu) {{
  %0 = constant() {{value = 2.0}} : f32[]@cpu
  %1 = mul(%x, %0) : f32[4]@cpu
  %2 = all_reduce(%1) {{group = {0}, op = "sum"}} : f32[4]@cpu
  %3 = constant() {{value = 1.0}} : f32[]@cpu
  %4 = add(%2, %3) : f32[4]@cpu
  return %4
}}
)");
  EXPECT_EQ(shape(exe), "kswk");
  EXPECT_EQ(runtime::stepSlots(exe.steps[1]), std::vector<int>{runtime::stepSlots(exe.steps[0]).back()})
      << "the all-reduce runs in the slot the kernel wrote";
  EXPECT_EQ(exe.collectiveOverlaps(), std::vector<int>{0});
  auto out = exe.run({hostFloats({1, 2, 3, 4})});
  EXPECT_EQ(readFloats(out.at(0), 4), (std::vector<float>{3, 5, 7, 9}));
}

TEST(CollectiveSteps, AProfileShowsTheStartAndTheWaitAsHostRanges) {
  runtime::Executable exe = compile(R"(
graph @g(%x: f32[4]@cpu) -> (f32[4]@cpu) {{
  %0 = constant() {{value = 2.0}} : f32[]@cpu
  %1 = mul(%x, %0) : f32[4]@cpu
  %2 = all_reduce(%1) {{group = {0}, op = "sum"}} : f32[4]@cpu
  %3 = constant() {{value = 1.0}} : f32[]@cpu
  %4 = add(%2, %3) : f32[4]@cpu
  return %4
}}
)");
  ASSERT_EQ(shape(exe), "kswk");
  ASSERT_TRUE(profiler::acquire());
  (void)profiler::drain();
  profiler::setFlags(profiler::kCpu | profiler::kDevice);
  (void)exe.run({hostFloats({1, 2, 3, 4})});
  profiler::setFlags(0);
  const std::vector<profiler::TraceEvent> events = profiler::drain();
  profiler::release();
  std::string order;  // s start, w wait, k kernel launch, in order of start
  for (const profiler::TraceEvent& e : events) {
    if (e.name == "collective_start") order += 's';
    if (e.name == "collective_wait") order += 'w';
    if (e.name == "launch_kernel") order += 'k';
    if (e.category == "collective") {
      EXPECT_EQ(e.detail.rfind("all_reduce_f32 of 16 bytes", 0), 0u) << e.detail;
      EXPECT_EQ(e.kind, profiler::EventKind::range);
    }
  }
  EXPECT_EQ(order, "kswk");
}

TEST(CollectiveSteps, ACopyWhenTheOperandIsReadElsewhereOrIsAnInput) {
  runtime::Executable twice = compile(R"(
graph @g(%x: f32[4]@cpu) -> (f32[4]@cpu) {{
  %0 = constant() {{value = 2.0}} : f32[]@cpu
  %1 = mul(%x, %0) : f32[4]@cpu
  %2 = all_reduce(%1) {{group = {0}, op = "max"}} : f32[4]@cpu
  %3 = add(%2, %1) : f32[4]@cpu
  return %3
}}
)");
  EXPECT_EQ(shape(twice), "kcswk");
  auto out = twice.run({hostFloats({1, 2, 3, 4})});
  EXPECT_EQ(readFloats(out.at(0), 4), (std::vector<float>{4, 8, 12, 16}));
  runtime::Executable input = compile(R"(
graph @g(%x: f32[4]@cpu) -> (f32[4]@cpu) {{
  %0 = all_reduce(%x) {{group = {0}, op = "avg"}} : f32[4]@cpu
  return %0
}}
)");
  EXPECT_EQ(shape(input), "csw");
  auto x = hostFloats({1, 2, 3, 4});
  auto result = input.run({x});
  EXPECT_NE(result.at(0), x) << "the caller's input is never written";
  EXPECT_EQ(readFloats(result.at(0), 4), (std::vector<float>{1, 2, 3, 4}));
}

// A matmul between the collective and its reader overlaps it, wherever the
// node stands in the graph: the start goes up to its operand's producer.
TEST(CollectiveSteps, TheStartGoesUpAndTheWaitDown) {
  for (const char* order : {"before", "after"}) {
    const std::string matmul = "  %m = matmul(%y, %y) : f32[8,8]@cpu\n";
    const std::string reduce = "  %a = all_reduce(%1) {{group = {0}, op = \"sum\"}} : f32[4]@cpu\n";
    runtime::Executable exe = compile(std::string(R"(
graph @g(%x: f32[4]@cpu, %y: f32[8,8]@cpu) -> (f32[4]@cpu, f32[8,8]@cpu) {{
  %0 = constant() {{value = 2.0}} : f32[]@cpu
  %1 = mul(%x, %0) : f32[4]@cpu
)") + (std::string(order) == "before" ? reduce + matmul : matmul + reduce) +
                                      R"(  %2 = add(%a, %0) : f32[4]@cpu
  return %2, %m
}}
)");
    EXPECT_EQ(shape(exe), "kslwk") << "all_reduce " << order << " the matmul";
    EXPECT_EQ(exe.collectiveOverlaps(), std::vector<int>{1}) << order;
  }
}

// %p's update is donated (computed into %p's buffer) and does not read the
// all-reduce; the wait still comes before it, so that a failed collective
// leaves %p as it was.
TEST(CollectiveSteps, WaitsComeBeforeTheUpdateOfADonatedInput) {
  const std::vector<Donation> donate{{0, 0}};
  runtime::Executable exe = compile(R"(
graph @g(%p: f32[4]@cpu, %g: f32[4]@cpu, %y: f32[8,8]@cpu) -> (f32[4]@cpu, f32[4]@cpu, f32[8,8]@cpu) {{
  %0 = constant() {{value = 2.0}} : f32[]@cpu
  %1 = mul(%g, %0) : f32[4]@cpu
  %a = all_reduce(%1) {{group = {0}, op = "sum"}} : f32[4]@cpu
  %m = matmul(%y, %y) : f32[8,8]@cpu
  %2 = sub(%p, %0) : f32[4]@cpu
  %3 = add(%a, %0) : f32[4]@cpu
  return %2, %3, %m
}}
)",
                                    donate);
  ASSERT_EQ(exe.outputSlots[0], exe.inputSlots[0]) << "the update is donated";
  EXPECT_EQ(shape(exe), "kslwkk") << "wait, then the in-place update, then the reader";
  auto p = hostFloats({1, 2, 3, 4});
  auto out = exe.run({p, hostFloats({1, 1, 1, 1}), hostFloats(std::vector<float>(64, 0.0f))});
  EXPECT_EQ(readFloats(p, 4), (std::vector<float>{-1, 0, 1, 2}));
  EXPECT_EQ(readFloats(out.at(1), 4), (std::vector<float>{4, 4, 4, 4}));
}

}  // namespace
}  // namespace kiln::codegen

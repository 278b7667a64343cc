// compileGraph's donations (Note [Donated buffers] in codegen/compile_graph.cpp):
// a result computed into its input's buffer when that is safe, a buffer of
// its own otherwise; the values are the same either way.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "codegen/compile_graph.h"
#include "ir/parser.h"
#include "passes/passes.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "tests/common/host_buffers.h"

namespace kiln::codegen {
namespace {

using ::kiln::testing::hostFloats;
using ::kiln::testing::readFloats;

std::unique_ptr<ir::Graph> fusedGraph(const std::string& text) {
  std::unique_ptr<ir::Graph> g = ir::parseGraph(text, "donation_test");
  passes::PassManager("canonicalize,cse,dce,fuse-reductions,fuse-elementwise").run(*g);
  return g;
}

/// Whether output `o` of `exe` is computed into input `i`'s slot.
bool inPlace(const runtime::Executable& exe, int i, int o) {
  return exe.outputSlots.at(static_cast<size_t>(o)) == exe.inputSlots.at(static_cast<size_t>(i));
}

// p - lr * g: the update of a parameter p, donated to its new value.
constexpr const char* kUpdate = R"(
graph @update(%p: f32[6]@cpu, %g: f32[6]@cpu) -> (f32[6]@cpu) {
  %0 = constant() {value = 0.5} : f32[]@cpu
  %1 = mul(%g, %0) : f32[6]@cpu
  %2 = sub(%p, %1) : f32[6]@cpu
  return %2
}
)";

TEST(Donation, AnElementwiseUpdateIsComputedIntoItsInput) {
  auto g = fusedGraph(kUpdate);
  const std::vector<Donation> donate{{0, 0}};
  runtime::Executable exe = compileGraph(*g, Device::cpu(), {}, donate);
  ASSERT_TRUE(inPlace(exe, 0, 0));
  auto p = hostFloats({1, 2, 3, 4, 5, 6});
  auto grad = hostFloats({2, 2, 2, -2, -2, -2});
  auto out = exe.run({p, grad});
  EXPECT_EQ(out.at(0), p);  // the input's buffer, written
  EXPECT_EQ(readFloats(p, 6), (std::vector<float>{0, 1, 2, 5, 6, 7}));
  // Without the donation: a buffer of its own, the same values, p untouched.
  runtime::Executable plain = compileGraph(*g, Device::cpu());
  EXPECT_FALSE(inPlace(plain, 0, 0));
  auto q = hostFloats({1, 2, 3, 4, 5, 6});
  auto out2 = plain.run({q, grad});
  EXPECT_EQ(readFloats(out2.at(0), 6), (std::vector<float>{0, 1, 2, 5, 6, 7}));
  EXPECT_EQ(readFloats(q, 6), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Donation, AnInputReadAfterTheUpdateKeepsItsBuffer) {
  // %p is read by a second kernel (a reduction) after the update: writing
  // the update into it would change what that kernel reads.
  auto g = fusedGraph(R"(
graph @later(%p: f32[2,3]@cpu, %g: f32[2,3]@cpu) -> (f32[2,3]@cpu, f32[2]@cpu) {
  %0 = sub(%p, %g) : f32[2,3]@cpu
  %1 = sum(%p) {dims = [1], keepdim = 0} : f32[2]@cpu
  return %0, %1
}
)");
  const std::vector<Donation> donate{{0, 0}};
  runtime::Executable exe = compileGraph(*g, Device::cpu(), {}, donate);
  // Which runs first is the graph's order; if the sum came after the
  // update, the donation must have been refused.
  auto p = hostFloats({1, 2, 3, 4, 5, 6});
  auto out = exe.run({p, hostFloats({1, 1, 1, 1, 1, 1})});
  EXPECT_EQ(readFloats(out.at(0), 6), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(readFloats(out.at(1), 2), (std::vector<float>{6, 15}));
}

TEST(Donation, ReadsThroughAnotherLayoutOrAReductionAreRefused) {
  // The update reads p transposed: element (i, j) of the result needs p's
  // (j, i), which an in-place write would already have changed.
  auto transposed = fusedGraph(R"(
graph @t(%p: f32[3,3]@cpu) -> (f32[3,3]@cpu) {
  %0 = transpose(%p) {perm = [1, 0]} : f32[3,3]@cpu
  %1 = add(%p, %0) : f32[3,3]@cpu
  return %1
}
)");
  const std::vector<Donation> donate{{0, 0}};
  runtime::Executable exe = compileGraph(*transposed, Device::cpu(), {}, donate);
  EXPECT_FALSE(inPlace(exe, 0, 0));
  auto p = hostFloats({0, 1, 2, 3, 4, 5, 6, 7, 8});
  auto out = exe.run({p});
  EXPECT_EQ(readFloats(out.at(0), 9), (std::vector<float>{0, 4, 8, 4, 8, 12, 8, 12, 16}));
  // A result of a reduction kernel is not donated (rows are read whole).
  auto reduced = fusedGraph(R"(
graph @r(%p: f32[4]@cpu, %x: f32[4,8]@cpu) -> (f32[4]@cpu) {
  %0 = sum(%x) {dims = [1], keepdim = 0} : f32[4]@cpu
  %1 = sub(%p, %0) : f32[4]@cpu
  return %1
}
)");
  EXPECT_FALSE(inPlace(compileGraph(*reduced, Device::cpu(), {}, donate), 0, 0));
}

TEST(Donation, AResultReturnedTwiceOrAnInputReturnedAreNotDonated) {
  auto twice = fusedGraph(R"(
graph @twice(%p: f32[6]@cpu, %g: f32[6]@cpu) -> (f32[6]@cpu, f32[6]@cpu) {
  %0 = sub(%p, %g) : f32[6]@cpu
  return %0, %0
}
)");
  const std::vector<Donation> first{{0, 0}};
  EXPECT_FALSE(inPlace(compileGraph(*twice, Device::cpu(), {}, first), 0, 0));
  auto returned = fusedGraph(R"(
graph @ret(%p: f32[6]@cpu, %g: f32[6]@cpu) -> (f32[6]@cpu, f32[6]@cpu) {
  %0 = sub(%p, %g) : f32[6]@cpu
  return %0, %p
}
)");
  runtime::Executable exe = compileGraph(*returned, Device::cpu(), {}, first);
  EXPECT_FALSE(inPlace(exe, 0, 0));
  auto p = hostFloats({1, 2, 3, 4, 5, 6});
  auto out = exe.run({p, hostFloats({1, 1, 1, 1, 1, 1})});
  EXPECT_EQ(readFloats(out.at(1), 6), (std::vector<float>{1, 2, 3, 4, 5, 6}));  // p as it was
}

TEST(Donation, NoDonationInAGraphThatChecksItsData) {
  // index_select fails on an index out of range when it runs: a donated
  // input written before it would be lost on that error.
  auto g = fusedGraph(R"(
graph @gather(%p: f32[6]@cpu, %t: f32[5,6]@cpu, %i: i64[2]@cpu) -> (f32[6]@cpu, f32[2,6]@cpu) {
  %0 = neg(%p) : f32[6]@cpu
  %1 = index_select(%t, %i) {dim = 0} : f32[2,6]@cpu
  return %0, %1
}
)");
  const std::vector<Donation> donate{{0, 0}};
  EXPECT_FALSE(inPlace(compileGraph(*g, Device::cpu(), {}, donate), 0, 0));
}

TEST(Donation, AKernelAfterEveryCheckTakesItsInput) {
  // The gather runs, and checks, first (a training step's loss); the update
  // after it may take p's buffer, and a failing check leaves p as it was.
  auto g = fusedGraph(R"(
graph @gather(%p: f32[6]@cpu, %t: f32[5,6]@cpu, %i: i64[2]@cpu, %g: f32[6]@cpu) -> (f32[6]@cpu, f32[2,6]@cpu) {
  %0 = index_select(%t, %i) {dim = 0} : f32[2,6]@cpu
  %1 = sub(%p, %g) : f32[6]@cpu
  return %1, %0
}
)");
  const std::vector<Donation> donate{{0, 0}};
  runtime::Executable exe = compileGraph(*g, Device::cpu(), {}, donate);
  ASSERT_TRUE(inPlace(exe, 0, 0));
  auto p = hostFloats({1, 2, 3, 4, 5, 6});
  auto t = hostFloats(std::vector<float>(30, 1.0f));
  auto index = runtime::allocateBuffer(Device::cpu(), 2 * sizeof(int64_t));
  const int64_t bad[2] = {1, 7};
  std::memcpy(index->hostData(), bad, sizeof bad);
  auto grad = hostFloats({2, 2, 2, 2, 2, 2});
  EXPECT_THROW(exe.run({p, t, index, grad}), kiln::Error);
  EXPECT_EQ(readFloats(p, 6), (std::vector<float>{1, 2, 3, 4, 5, 6})) << "a failed call leaves p as it was";
  const int64_t good[2] = {1, 4};
  std::memcpy(index->hostData(), good, sizeof good);
  exe.run({p, t, index, grad});
  EXPECT_EQ(readFloats(p, 6), (std::vector<float>{-1, 0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace kiln::codegen

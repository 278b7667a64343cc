// Library-call steps of Executable::run: a hand-written LibraryFn gets its
// buffers (operands then result, each at its byte offset) and its integer
// arguments, runs between kernel steps in order, counts as a launch, and a
// kiln::Error it throws reaches the caller.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/error.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

// out[i] = in[i] * args[0] for i < args[1]; throws when args[0] is 0.
void scaleCall(std::span<void* const> buffers, std::span<const int64_t> args) {
  KILN_CHECK(args[0] != 0, "scale: factor 0 is not allowed");
  const float* in = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int64_t i = 0; i < args[1]; ++i) out[i] = in[i] * static_cast<float>(args[0]);
}

// A kernel step: out[i] = in[i] + 1.
void addOne(void* const* buffers, const int64_t*, int64_t begin, int64_t end) {
  const float* in = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int64_t i = begin; i < end; ++i) out[i] = in[i] + 1.0f;
}

std::shared_ptr<Buffer> floats(const std::vector<float>& values) {
  auto buf = allocateBuffer(Device::cpu(), values.size() * sizeof(float));
  std::memcpy(buf->hostData(), values.data(), values.size() * sizeof(float));
  return buf;
}

// Slots: 0 = x (input, 8 floats), 1 = 3 * x[2..6) (library call reading at
// a byte offset), 2 = that + 1 (kernel).
Executable program(int64_t factor) {
  Executable exe;
  exe.slots = {
      {8 * sizeof(float), Device::cpu()}, {4 * sizeof(float), Device::cpu()}, {4 * sizeof(float), Device::cpu()}};
  exe.inputSlots = {0};
  exe.outputSlots = {2};
  exe.steps.emplace_back(LibraryStep{"scale", &onHost<&scaleCall>, {0, 1}, {factor, 4}, {2 * sizeof(float), 0}});
  exe.steps.emplace_back(KernelStep{"add_one", loadHostKernel("add_one", &addOne), {1, 2}, {}, LaunchShape{4, 1}, {}});
  return exe;
}

TEST(LibraryStep, RunsBetweenKernelsWithItsOffsetsAndArgs) {
  Executable exe = program(3);
  EXPECT_EQ(exe.numKernels(), 2);
  EXPECT_EQ(exe.numLibraryCalls(), 1);
  auto x = floats({0, 1, 2, 3, 4, 5, 6, 7});
  const int64_t before = kernelLaunchCount();
  auto out = exe.run({x});
  EXPECT_EQ(kernelLaunchCount() - before, 2) << "a library call counts as a launch";
  const float* o = static_cast<const float*>(out[0]->hostData());
  EXPECT_EQ(std::vector<float>(o, o + 4), (std::vector<float>{7, 10, 13, 16}));
}

TEST(LibraryStep, AnErrorItThrowsReachesTheCaller) {
  Executable exe = program(0);
  auto x = floats({0, 1, 2, 3, 4, 5, 6, 7});
  try {
    exe.run({x});
    FAIL() << "expected a kiln::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "scale: factor 0 is not allowed");
  }
  EXPECT_EQ(static_cast<const float*>(x->hostData())[2], 2.0f) << "the input is untouched";
}

}  // namespace
}  // namespace kiln::runtime

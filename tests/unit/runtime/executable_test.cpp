// Unit tests for Executable::run with hand-written kernels that follow the
// CPU kernel ABI (plain C++ functions, no codegen): inputs are bound to their
// slots without copies, intermediates and outputs are allocated, steps run in
// order over the whole iteration domain (split by the global thread pool),
// integer arguments reach the kernel, an output that is an input returns the
// caller's buffer, kernelLaunchCount counts one per step, and a wrong number
// or size of inputs is reported as a kiln bug.
#include "runtime/executable.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/error.h"

namespace kiln::runtime {
namespace {

// out[i] = in[i] * args[0] + args[1]
void scaleShift(void* const* buffers, const int64_t* args, int64_t begin, int64_t end) {
  const float* in = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int64_t i = begin; i < end; ++i) out[i] = in[i] * static_cast<float>(args[0]) + static_cast<float>(args[1]);
}

// out[i] = a[i] + b[i]
void addKernel(void* const* buffers, const int64_t*, int64_t begin, int64_t end) {
  const float* a = static_cast<const float*>(buffers[0]);
  const float* b = static_cast<const float*>(buffers[1]);
  float* out = static_cast<float*>(buffers[2]);
  for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
}

// counts[i] += 1: shows that every element is visited exactly once.
void countVisits(void* const* buffers, const int64_t*, int64_t begin, int64_t end) {
  int32_t* counts = static_cast<int32_t*>(buffers[0]);
  for (int64_t i = begin; i < end; ++i) counts[i] += 1;
}

std::shared_ptr<Buffer> floats(const std::vector<float>& values) {
  auto buf = allocateBuffer(Device::cpu(), values.size() * sizeof(float));
  std::memcpy(buf->hostData(), values.data(), values.size() * sizeof(float));
  return buf;
}

const float* data(const std::shared_ptr<Buffer>& b) { return static_cast<const float*>(b->hostData()); }

// Slots: 0 = x (input), 1 = y (input), 2 = t = 3x + 1 (intermediate), 3 = t + y (output).
Executable twoStepProgram(int64_t n) {
  Executable exe;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  exe.slots = {{bytes, Device::cpu()}, {bytes, Device::cpu()}, {bytes, Device::cpu()}, {bytes, Device::cpu()}};
  exe.inputSlots = {0, 1};
  exe.outputSlots = {3};
  exe.steps.push_back(
      KernelStep{"scale_shift", loadHostKernel("scale_shift", &scaleShift), {0, 2}, {3, 1}, LaunchShape{n, 16}, {}});
  exe.steps.push_back(KernelStep{"add", loadHostKernel("add", &addKernel), {2, 1, 3}, {}, LaunchShape{n, 16}, {}});
  return exe;
}

TEST(Executable, RunsStepsInOrderOverSlots) {
  constexpr int64_t n = 1000;
  Executable exe = twoStepProgram(n);
  EXPECT_EQ(exe.numKernels(), 2);
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = static_cast<float>(-2 * i);
  }
  auto xb = floats(x), yb = floats(y);
  auto outs = exe.run({xb, yb});
  ASSERT_EQ(outs.size(), 1u);
  ASSERT_GE(outs[0]->bytes(), n * sizeof(float));
  EXPECT_NE(outs[0], xb);
  EXPECT_NE(outs[0], yb);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(data(outs[0])[i], 3.0f * i + 1.0f - 2.0f * i) << i;  // = i + 1
  // Inputs are read, not written.
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(data(xb)[i], static_cast<float>(i));
}

TEST(Executable, KernelLaunchCountCountsEachStep) {
  Executable exe = twoStepProgram(64);
  auto x = floats(std::vector<float>(64, 1.0f)), y = floats(std::vector<float>(64, 2.0f));
  const int64_t before = kernelLaunchCount();
  exe.run({x, y});
  EXPECT_EQ(kernelLaunchCount() - before, 2);
  exe.run({x, y});
  EXPECT_EQ(kernelLaunchCount() - before, 4);
}

TEST(Executable, InputsAreBoundWithoutCopies) {
  // One step that writes into its input slot: the caller's buffer changes.
  constexpr int64_t n = 4096;
  Executable exe;
  exe.slots = {{n * sizeof(int32_t), Device::cpu()}};
  exe.inputSlots = {0};
  exe.outputSlots = {0};
  exe.steps.push_back(KernelStep{"count", loadHostKernel("count", &countVisits), {0}, {}, LaunchShape{n, 64}, {}});
  auto buf = allocateBuffer(Device::cpu(), n * sizeof(int32_t));
  std::memset(buf->hostData(), 0, n * sizeof(int32_t));
  auto outs = exe.run({buf});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0], buf) << "an output that is an input returns the caller's buffer";
  const int32_t* counts = static_cast<const int32_t*>(buf->hostData());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(counts[i], 1) << "element " << i << " visited " << counts[i] << " times";
}

TEST(Executable, LargeDomainIsCoveredExactlyOnce) {
  // Big enough for the global pool to split it; the grain is not a divisor.
  constexpr int64_t n = 1 << 20;
  Executable exe;
  exe.slots = {{n * sizeof(int32_t), Device::cpu()}};
  exe.inputSlots = {0};
  exe.outputSlots = {0};
  exe.steps.push_back(KernelStep{"count", loadHostKernel("count", &countVisits), {0}, {}, LaunchShape{n, 1000}, {}});
  exe.steps.push_back(KernelStep{"count", loadHostKernel("count", &countVisits), {0}, {}, LaunchShape{n, 1000}, {}});
  auto buf = allocateBuffer(Device::cpu(), n * sizeof(int32_t));
  std::memset(buf->hostData(), 0, n * sizeof(int32_t));
  exe.run({buf});
  const int32_t* counts = static_cast<const int32_t*>(buf->hostData());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(counts[i], 2) << i;
}

TEST(Executable, ProgramWithoutInputsAllocatesItsOutputs) {
  // An output slot no input binds gets a fresh buffer of the slot's size.
  constexpr int64_t n = 10;
  Executable exe;
  exe.slots = {{n * sizeof(float), Device::cpu()}, {n * sizeof(float), Device::cpu()}};
  exe.outputSlots = {1, 0};
  // scaleShift reads slot 0 (garbage is fine) and with args {0, 7} writes 7s.
  exe.steps.push_back(KernelStep{"fill7", loadHostKernel("fill7", &scaleShift), {0, 1}, {0, 7}, LaunchShape{n, 1}, {}});
  exe.steps.push_back(KernelStep{"fill5", loadHostKernel("fill5", &scaleShift), {1, 0}, {0, 5}, LaunchShape{n, 1}, {}});
  auto outs = exe.run({});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_NE(outs[0], outs[1]);
  EXPECT_GE(outs[0]->bytes(), n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(data(outs[0])[i], 7.0f);
    EXPECT_EQ(data(outs[1])[i], 5.0f);
  }
}

TEST(Executable, WrongInputsAreAKilnBug) {
  Executable exe = twoStepProgram(100);
  auto ok = floats(std::vector<float>(100, 1.0f));
  auto small = floats(std::vector<float>(99, 1.0f));
  EXPECT_THROW(exe.run({ok}), InternalError);
  EXPECT_THROW(exe.run({ok, ok, ok}), InternalError);
  EXPECT_THROW(exe.run({ok, small}), InternalError);
  EXPECT_THROW(exe.run({ok, nullptr}), InternalError);
  EXPECT_NO_THROW(exe.run({ok, ok}));
}

TEST(Executable, InputsAreReadFromTheirOffsetsAndStepsFromTheirs) {
  // Input 0 starts 2 floats into its buffer (a view); the second step writes
  // the upper half of slot 1, the first its lower half (two pieces of one
  // result, like a cat).
  constexpr int64_t n = 3;
  Executable exe;
  exe.slots = {{n * sizeof(float), Device::cpu()}, {2 * n * sizeof(float), Device::cpu()}};
  exe.inputSlots = {0};
  exe.outputSlots = {1};
  exe.steps.push_back(KernelStep{"low", loadHostKernel("low", &scaleShift), {0, 1}, {1, 0}, LaunchShape{n, 1}, {}});
  exe.steps.push_back(KernelStep{
      "high", loadHostKernel("high", &scaleShift), {0, 1}, {10, 0}, LaunchShape{n, 1}, {0, n * sizeof(float)}});
  auto in = floats({-1, -1, 1, 2, 3});
  auto outs = exe.run({in}, {2 * sizeof(float)});
  EXPECT_EQ(std::vector<float>(data(outs[0]), data(outs[0]) + 2 * n), (std::vector<float>{1, 2, 3, 10, 20, 30}));
  EXPECT_THROW(exe.run({in}, {3 * sizeof(float)}), InternalError) << "the view would run past its buffer";
}

}  // namespace
}  // namespace kiln::runtime

// Eager ops: values against the scalar formulas, broadcasting, scalars, the
// eager caches, kernel counts, the allocator's reuse, and the errors bad
// input gets.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "codegen/kernel_cache.h"
#include "common/error_of.h"
#include "frontend/kiln.h"
#include "ir/scalar_eval.h"
#include "runtime/device_interface.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;

bool sameBits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (a != a && b != b);
}

const std::vector<float> kValues = {-3.5f, -1.0f, -0.0f, 0.0f,     1e-40f,    0.5f,
                                    1.0f,  2.0f,  88.0f, INFINITY, -INFINITY, NAN};

TEST(Eager, UnaryOpsEqualTheScalarFormulasBitForBit) {
  Tensor x = fromVector(kValues);
  struct Case {
    ir::Op op;
    Tensor (*fn)(const Tensor&);
  };
  for (const Case& c :
       {Case{ir::Op::neg, neg}, Case{ir::Op::relu, relu}, Case{ir::Op::exp, kiln::exp}, Case{ir::Op::log, kiln::log},
        Case{ir::Op::sqrt, kiln::sqrt}, Case{ir::Op::tanh, kiln::tanh}, Case{ir::Op::sigmoid, sigmoid}}) {
    std::vector<float> got = c.fn(x).toVector();
    for (size_t i = 0; i < kValues.size(); ++i) {
      float want = ir::evalScalarF32(c.op, std::vector<float>{kValues[i]});
      EXPECT_TRUE(sameBits(got[i], want))
          << ir::opName(c.op) << "(" << kValues[i] << ") = " << got[i] << ", want " << want;
    }
  }
}

TEST(Eager, ValuesAreCloseToLibm) {
  Tensor x = fromVector({0.1f, 0.5f, 1.0f, 3.0f});
  auto e = kiln::exp(x).toVector(), l = kiln::log(x).toVector(), t = kiln::tanh(x).toVector();
  auto s = sigmoid(x).toVector();
  const float xs[] = {0.1f, 0.5f, 1.0f, 3.0f};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(e[i], std::exp(xs[i]), 1e-6 * std::exp(xs[i]));
    EXPECT_NEAR(l[i], std::log(xs[i]), 1e-6);
    EXPECT_NEAR(t[i], std::tanh(xs[i]), 1e-6);
    EXPECT_NEAR(s[i], 1.0 / (1.0 + std::exp(-xs[i])), 1e-6);
  }
}

TEST(Eager, BinaryOpsBroadcastLikeNumPy) {
  Tensor a = fromVector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = fromVector({10, 20, 30}, {3});
  Tensor col = fromVector({100, 200}, {2, 1});
  EXPECT_EQ((a + row).toVector(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((a * col).toVector(), (std::vector<float>{100, 200, 300, 800, 1000, 1200}));
  Tensor outer = row - col;  // [3] - [2,1] -> [2,3]
  EXPECT_EQ(outer.shape(), (Shape{2, 3}));
  EXPECT_EQ(outer.toVector(), (std::vector<float>{-90, -80, -70, -190, -180, -170}));
  EXPECT_EQ(maximum(a, fromVector({3}, {1})).toVector(), (std::vector<float>{3, 3, 3, 4, 5, 6}));
  EXPECT_EQ(minimum(a, 2.5).toVector(), (std::vector<float>{1, 2, 2.5, 2.5, 2.5, 2.5}));
}

TEST(Eager, ScalarsOnEitherSide) {
  Tensor x = fromVector({1, 2, 4});
  EXPECT_EQ((2.0 - x).toVector(), (std::vector<float>{1, 0, -2}));
  EXPECT_EQ((1.0 / x).toVector(), (std::vector<float>{1, 0.5, 0.25}));
  EXPECT_EQ((x / 2.0).toVector(), (std::vector<float>{0.5, 1, 2}));
  EXPECT_EQ((-x).toVector(), (std::vector<float>{-1, -2, -4}));
}

TEST(Eager, ScalarValuesShareOneKernelAndShapesShareIt) {
  // Sizes no other test (and no earlier repetition) uses, so that the counts
  // do not depend on test order.
  static int64_t fresh = 1237;
  const int64_t n = fresh, m = fresh + 1;
  fresh += 2;
  Tensor x = ones({n}), w = ones({m});  // (each fill an executable of its own: its shape is new)
  (void)(x * 3.0);
  auto before = codegen::KernelCache::instance().stats();
  auto eagerBefore = detail::eagerStats();
  Tensor y = x * 5.0;  // another scalar: same executable
  Tensor z = w * 7.0;  // another size: new executable, same kernel
  EXPECT_EQ(y.toVector(), std::vector<float>(n, 5.0f));
  EXPECT_EQ(z.toVector()[m - 1], 7.0f);
  EXPECT_EQ(codegen::KernelCache::instance().stats().misses, before.misses) << "no kernel was compiled";
  EXPECT_EQ(detail::eagerStats().graphsBuilt, eagerBefore.graphsBuilt + 1);
}

TEST(Eager, EachOpIsOneKernelLaunch) {
  Tensor x = randn({1000});
  int64_t before = runtime::kernelLaunchCount();
  Tensor y = kiln::sqrt(relu(x) + 1.0);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 3);
  EXPECT_EQ(y.numel(), 1000);
}

TEST(Eager, RepeatedStepsReuseCachedMemory) {
  Tensor x = randn({1 << 18});
  auto step = [&] { return kiln::tanh(x * 2.0 + 1.0); };
  step();
  step();
  runtime::DeviceInterface& alloc = runtime::deviceInterface(Device::cpu());
  const int64_t reserved = alloc.memoryStats().reservedBytes;
  const int64_t fromOs = alloc.memoryStats().numOsAllocations;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(alloc.memoryStats().reservedBytes, reserved);
  EXPECT_EQ(alloc.memoryStats().numOsAllocations, fromOs);
}

TEST(Eager, LargeTensorsSplitAcrossThreadsGiveTheSameBits) {
  // Big enough for the thread pool to split it; compare with the formulas.
  Tensor x = randn({300001});
  std::vector<float> got = kiln::exp(x).toVector(), in = x.toVector();
  size_t bad = 0;
  for (size_t i = 0; i < in.size(); ++i)
    bad += !sameBits(got[i], ir::evalScalarF32(ir::Op::exp, std::vector<float>{in[i]}));
  EXPECT_EQ(bad, 0u);
}

TEST(EagerErrors, MismatchedShapesNameTheOpAndBothTypes) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  EXPECT_EQ(errorOf([&] { add(a, b); }), "add: shapes do not broadcast, got f32[2,3]@cpu and f32[4]@cpu");
  EXPECT_EQ(errorOf([&] { maximum(b, a); }), "maximum: shapes do not broadcast, got f32[4]@cpu and f32[2,3]@cpu");
}

TEST(EagerErrors, UnsupportedDTypeAndUndefinedTensors) {
  // Mixed dtypes promote (dtypes_test.cpp has the rules); bool arithmetic is an error.
  Tensor i = zeros({2}, DType::i64);
  EXPECT_EQ(relu(i).dtype(), DType::i64);
  EXPECT_EQ(add(zeros({2}), i).dtype(), DType::f32);
  Tensor b = zeros({2}, DType::boolean);
  EXPECT_EQ(errorOf([&] { neg(b); }),
            "neg: dtype bool is not supported (bool takes cast, comparisons, where, maximum and minimum), got "
            "bool[2]@cpu");
  EXPECT_EQ(errorOf([&] { relu(Tensor()); }), "relu: argument 0 is an undefined tensor");
}

TEST(EagerErrors, FactoriesAndAccessors) {
  EXPECT_EQ(errorOf([] {
              fromVector({1, 2, 3}, {2, 2});
            }),
            "fromVector: 3 values cannot fill shape [2,2] (4 elements)");
  EXPECT_EQ(errorOf([] { zeros({2, -1}); }), "full: negative dimension in shape [2,-1]");
  EXPECT_EQ(errorOf([] { zeros({2}).item(); }), "item: expected a tensor with one element, got f32[2]@cpu");
  if (std::string why; !isAvailable(DeviceType::cuda, &why)) {
    EXPECT_EQ(errorOf([] { zeros({2}, DType::f32, Device::cuda(0)); }), "full: cannot make a tensor on cuda:0: " + why);
  }
  EXPECT_EQ(errorOf([] { arange(0, 1, 0); }),
            "arange: expected finite bounds and a non-zero step, got start=0, end=1, step=0");
}

TEST(EagerErrors, AFailedOpLeavesItsInputsIntact) {
  Tensor a = fromVector({1, 2, 3});
  EXPECT_THROW(add(a, zeros({2})), Error);
  EXPECT_EQ(a.toVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ((a + 1.0).toVector(), (std::vector<float>{2, 3, 4}));
}

TEST(Factories, ValuesAndShapes) {
  EXPECT_EQ(full({2, 2}, 1.5).toVector(), (std::vector<float>(4, 1.5f)));
  EXPECT_EQ(ones({3}).toVector(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(arange(5).toVector(), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25).toVector(), (std::vector<float>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(3, 0, -1).toVector(), (std::vector<float>{3, 2, 1}));
  Tensor s = full({}, 2.0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 2.0f);
}

TEST(Factories, RandnIsSeededAndStandardNormal) {
  Generator g1(42), g2(42), g3(43);
  auto a = randn({100000}, g1).toVector();
  auto b = randn({100000}, g2).toVector();
  auto c = randn({100000}, g3).toVector();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(randn({100000}, g1).toVector(), a) << "the generator advances";
  EXPECT_EQ(g1.offset(), 2u);
  double sum = 0, sq = 0;
  for (float v : a) sum += v, sq += double(v) * v;
  double mean = sum / a.size(), var = sq / a.size() - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.02);
}

}  // namespace

// End to end: compiled equals eager bit for bit on elementwise chains (with
// broadcasting and scalars), the fused chain takes one kernel, and bad input
// gets a clear kiln::Error.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "frontend/kiln.h"
#include "runtime/executable.h"
#include "tools/common/models.h"

namespace {

using kiln::Tensor;

using kiln::tools::chain8;      // the 8-op chains kiln-bench measures
using kiln::tools::chain8Math;

void expectBitsEqual(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  size_t mismatches = 0, first = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = std::bit_cast<uint32_t>(a[i]) == std::bit_cast<uint32_t>(b[i]) || (std::isnan(a[i]) && std::isnan(b[i]));
    if (!same && mismatches++ == 0) first = i;
  }
  EXPECT_EQ(mismatches, 0u) << "first at " << first << ": " << a[first] << " vs " << b[first];
}

TEST(Chain, CompiledEqualsEagerBitForBit) {
  kiln::Generator gen(7);
  Tensor x = kiln::randn({1000, 37}, gen) * 3.0;
  for (auto* chain : {&chain8, &chain8Math}) {
    auto f = kiln::compile([chain](const Tensor& t) { return chain(t); });
    Tensor compiled = f(x);
    Tensor eager = chain(x);
    expectBitsEqual(compiled.toVector(), eager.toVector());
    EXPECT_EQ(f.lastNumKernels(), 1) << f.lastGraph();
  }
}

TEST(Chain, BroadcastingBiasReluOneKernel) {
  kiln::Generator gen(3);
  Tensor x = kiln::randn({33, 65}, gen), b = kiln::randn({65}, gen), c = kiln::randn({33, 1}, gen);
  auto fn = [](const Tensor& x, const Tensor& b, const Tensor& c) { return kiln::tanh(kiln::relu(x + b) * c); };
  auto f = kiln::compile(fn);
  Tensor compiled = f(x, b, c);
  expectBitsEqual(compiled.toVector(), fn(x, b, c).toVector());
  EXPECT_EQ(f.lastNumKernels(), 1) << f.lastGraph();
  EXPECT_EQ(compiled.shape(), (kiln::Shape{33, 65}));
}

TEST(Chain, SoftplusFusedEqualsEagerBitForBit) {
  kiln::Generator gen(11);
  Tensor x = kiln::randn({257, 129}, gen) * 30.0, b = kiln::randn({129}, gen);
  for (auto [beta, threshold] : {std::pair{1.0, 20.0}, std::pair{2.0, 5.0}}) {
    auto fn = [beta, threshold](const Tensor& x, const Tensor& b) {
      return kiln::softplus(x * 0.5 + b, beta, threshold) * x;
    };
    auto f = kiln::compile(fn);
    Tensor compiled = f(x, b);
    expectBitsEqual(compiled.toVector(), fn(x, b).toVector());
    EXPECT_EQ(f.lastNumKernels(), 1) << f.lastGraph();
  }
}

}  // namespace

// End to end with mixed dtypes: a chain that promotes and casts through
// f16, bf16, i32, f64 and bool, fused into one kernel, equals eager bit for
// bit, though eager runs each op (and each promotion cast) as its own kernel
// and rounds every f16/bf16 result in memory (Note [Eager equals compiled]).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "frontend/kiln.h"

namespace {

using kiln::DType;
using kiln::Tensor;

/// A half-precision epilogue: scale and shift in f16, activations in f16 and
/// bf16, an integer offset, a masked select in f64, a bool mask out.
std::vector<Tensor> mixedChain(const Tensor& x, const Tensor& offset) {
  Tensor h = x.to(DType::f16) * 1.5 + 0.25;                                              // f16, scalars stay f16
  h = kiln::sigmoid(h) * kiln::tanh(h) + offset;                                         // f16 + i32 -> f16
  Tensor b = kiln::exp(h.to(DType::bf16) * -0.5);                                        // bf16
  Tensor mask = (b > h) != (offset < 3);                                                 // bf16 vs f16 compares in f32
  Tensor d = kiln::where(mask, b.to(DType::f64) / 3, kiln::sqrt(kiln::relu(h) + 1e-3));  // f64
  Tensor out = kiln::clamp(d, -1, 1).to(DType::f32) - x;
  return {out, h, mask};
}

void expectBitsEqual(const Tensor& compiled, const Tensor& eager) {
  ASSERT_EQ(compiled.type(), eager.type());
  std::vector<float> a = compiled.toVector(), b = eager.toVector();
  size_t mismatches = 0, first = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same =
        std::bit_cast<uint32_t>(a[i]) == std::bit_cast<uint32_t>(b[i]) || (std::isnan(a[i]) && std::isnan(b[i]));
    if (!same && mismatches++ == 0) first = i;
  }
  EXPECT_EQ(mismatches, 0u) << "first at " << first << " of " << eager.str();
}

TEST(MixedDTypes, CompiledEqualsEagerBitForBitInOneKernel) {
  kiln::Generator gen(11);
  Tensor x = kiln::randn({1000, 37}, gen) * 4.0;
  std::vector<int32_t> offsets(37000);
  for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = static_cast<int32_t>(i % 97) - 48;
  Tensor off = kiln::fromVector(offsets, {1000, 37});
  auto f = kiln::compile([](const Tensor& x, const Tensor& o) { return mixedChain(x, o); });
  std::vector<Tensor> compiled = f(x, off);
  std::vector<Tensor> eager = mixedChain(x, off);
  EXPECT_EQ(f.lastNumKernels(), 1) << f.lastGraph();
  ASSERT_EQ(compiled.size(), 3u);
  EXPECT_EQ(compiled[0].dtype(), DType::f32);
  EXPECT_EQ(compiled[1].dtype(), DType::f16);
  EXPECT_EQ(compiled[2].dtype(), DType::boolean);
  expectBitsEqual(compiled[0], eager[0]);
  std::vector<uint16_t> hc(37000), he(37000);
  std::memcpy(hc.data(), compiled[1].data<kiln::Half>(), 2 * hc.size());
  std::memcpy(he.data(), eager[1].data<kiln::Half>(), 2 * he.size());
  size_t halfMismatches = 0;
  for (size_t i = 0; i < hc.size(); ++i) {
    const bool nan = (hc[i] & 0x7fff) > 0x7c00 && (he[i] & 0x7fff) > 0x7c00;
    halfMismatches += hc[i] != he[i] && !nan;
  }
  EXPECT_EQ(halfMismatches, 0u);
  EXPECT_EQ(compiled[2].toVector<bool>(), eager[2].toVector<bool>());
  // The chain is not trivially constant: the mask takes both values.
  std::vector<bool> m = eager[2].toVector<bool>();
  EXPECT_NE(std::count(m.begin(), m.end(), true), 0);
  EXPECT_NE(std::count(m.begin(), m.end(), false), 0);
}

}  // namespace

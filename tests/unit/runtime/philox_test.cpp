// Unit tests for Philox4x32-10 against the known-answer vectors that ship
// with D. E. Shaw Research's Random123 (file kat_vectors, lines
// "philox4x32 10 ..."; the same vectors are in DEShawResearch/fs123,
// core123/ut/ut_philox.cpp), at compile time and at run time, and for
// uniformFromBits, which maps 32 random bits to a float in (0, 1].
#include "runtime/philox.h"

#include <gtest/gtest.h>

namespace kiln::runtime {
namespace {

struct Kat {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

// Random123 kat_vectors, philox4x32 with 10 rounds: counter, key, result.
constexpr Kat kKats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    // The digits of pi.
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

// philox4x32_10 is constexpr: kernels and tests may rely on that.
static_assert(philox4x32_10(kKats[0].counter, kKats[0].key) == kKats[0].expected);
static_assert(philox4x32_10(kKats[2].counter, kKats[2].key) == kKats[2].expected);

TEST(Philox, MatchesRandom123KnownAnswers) {
  for (const Kat& kat : kKats) {
    PhiloxCounter got = philox4x32_10(kat.counter, kat.key);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(got[i], kat.expected[i]) << std::hex << "word " << i << " for counter " << kat.counter[0];
  }
}

TEST(Philox, IsAPureFunctionOfCounterAndKey) {
  const PhiloxCounter c = {1, 2, 3, 4};
  const PhiloxKey k = {5, 6};
  EXPECT_EQ(philox4x32_10(c, k), philox4x32_10(c, k));
  // Neighbouring counters and keys give unrelated blocks (no word repeats).
  const PhiloxCounter base = philox4x32_10(c, k);
  const PhiloxCounter nextCounter = philox4x32_10({2, 2, 3, 4}, k);
  const PhiloxCounter nextKey = philox4x32_10(c, {6, 6});
  for (int i = 0; i < 4; ++i) {
    EXPECT_NE(base[i], nextCounter[i]) << i;
    EXPECT_NE(base[i], nextKey[i]) << i;
  }
}

TEST(Philox, UniformFromBitsIsInZeroOneInclusiveOfOne) {
  // (top 24 bits + 1) / 2^24.
  EXPECT_EQ(uniformFromBits(0u), 1.0f / 16777216.0f);
  EXPECT_GT(uniformFromBits(0u), 0.0f);
  EXPECT_EQ(uniformFromBits(0xffu), 1.0f / 16777216.0f) << "the low 8 bits are dropped";
  EXPECT_EQ(uniformFromBits(0xffffffffu), 1.0f);
  EXPECT_EQ(uniformFromBits(0x7fffff00u), 0.5f);
  EXPECT_EQ(uniformFromBits(0x80000000u), 0.5f + 1.0f / 16777216.0f);
  // Monotone in the used bits, and every value exactly representable.
  float prev = 0.0f;
  for (uint32_t top = 0; top < (1u << 24); top += 4099) {
    float u = uniformFromBits(top << 8);
    ASSERT_GT(u, prev);
    ASSERT_LE(u, 1.0f);
    ASSERT_EQ(static_cast<double>(u), (static_cast<double>(top) + 1.0) / 16777216.0);
    prev = u;
  }
}

}  // namespace
}  // namespace kiln::runtime

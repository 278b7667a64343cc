// Philox4x32-10, the counter-based generator behind every random number in
// kiln (DESIGN.md §8): a draw is a pure function of (key, counter), so any
// element can be drawn independently, in any order, on any device, and eager
// and compiled code agree. Constants are those of Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3" (SC'11), as used by cuRAND and PyTorch.
#pragma once

#include <array>
#include <cstdint>

namespace kiln::runtime {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

constexpr PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * c[0];
    uint64_t p1 = uint64_t(kMul1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

/// A uniform float in (0, 1] from 32 random bits (24 of them used).
constexpr float uniformFromBits(uint32_t bits) { return (static_cast<float>(bits >> 8) + 1.0f) * (1.0f / 16777216.0f); }

}  // namespace kiln::runtime

// What the tools say about the machine they run on: the CPU's model, and
// what kiln compiles CPU kernels for (shared by kiln-bench, kiln-bench-dist
// and kiln-env).
#pragma once

#include <string>

namespace kiln::tools {

/// The CPU's model name from /proc/cpuinfo ("AMD EPYC 7B13"), or "" when
/// it says none.
std::string cpuModelName();

/// What compiled CPU kernels are vectorized for, as one phrase:
/// "znver3 (AVX2, 256-bit vectors)" (codegen::cpuVectorTarget).
std::string compiledForText();

/// How a typical convolution (ResNet's 64-channel 3x3 layer, batch 8, f32)
/// runs here without measuring: "onednn_blocked: jit:avx512_core" (Note
/// [Choosing a convolution algorithm] in runtime/conv.cpp); kiln-env and
/// kiln-bench print it.
std::string typicalConvAlgorithm();

}  // namespace kiln::tools

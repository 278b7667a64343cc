// The machine facts of tools/common/machine.h.
#include "tools/common/machine.h"

#include <fmt/format.h>

#include <fstream>

#include "codegen/cpu_compiler.h"
#include "runtime/conv.h"

namespace kiln::tools {

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

std::string compiledForText() {
  const codegen::CpuVectorTarget t = codegen::cpuVectorTarget();
  return fmt::format("{} ({}, {}-bit vectors)", t.cpu, t.isa, t.vectorBits);
}

std::string typicalConvAlgorithm() {
  runtime::ConvCall k;
  k.n = 8, k.c = 64, k.h = 56, k.w = 56, k.o = 64, k.kh = 3, k.kw = 3, k.ho = 56, k.wo = 56, k.padTop = 1,
  k.padLeft = 1;
  k.xStrides = k.yStrides = runtime::contiguousStrides(8, 64, 56, 56);
  k.wStrides = runtime::contiguousStrides(64, 64, 3, 3);
  return runtime::detail::convImplementation(k);
}

}  // namespace kiln::tools

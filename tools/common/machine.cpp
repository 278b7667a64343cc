// The machine facts of tools/common/machine.h.
#include "tools/common/machine.h"

#include <fmt/format.h>

#include <fstream>

#include "codegen/cpu_compiler.h"

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

}  // namespace kiln::tools

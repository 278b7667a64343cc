// The lines of KILN_LOG=codegen (codegen/codegen_log.h).
#include "codegen/codegen_log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <vector>

namespace kiln::codegen {

namespace {
std::string_view role(const KernelParam& p) {
  if (p.inout) return "inout";
  if (p.output) return p.outer ? "out (per row)" : "out";
  return p.outer ? "in (per row)" : "in";
}
}  // namespace

std::string describeKernelStep(const LoweredKernel& lowered, const runtime::LaunchShape& shape) {
  const Kernel& k = lowered.kernel;
  const std::vector<int64_t>& args = lowered.launch.args;
  const auto rank = static_cast<size_t>(k.rank);
  auto row = [&](size_t r) {
    const size_t at = std::min(args.size(), r * rank);
    return std::span<const int64_t>(args).subspan(at, std::min(rank, args.size() - at));
  };
  std::string line = k.isReduction()
                         ? fmt::format("kernel {}: reduction over the last {} of {} dims, sizes [{}], {} rows", k.name,
                                       k.reduceRank, k.rank, fmt::join(row(0), ","), lowered.launch.numel)
                         : fmt::format("kernel {}: elementwise of rank {}, sizes [{}], {} elements", k.name, k.rank,
                                       fmt::join(row(0), ","), lowered.launch.numel);
  // The CPU splits by grain; a GPU launch has a grid of blocks.
  if (shape.grid == std::array<int64_t, 3>{1, 1, 1} && shape.block == std::array<int64_t, 3>{1, 1, 1})
    line += fmt::format(", grain {}", shape.grain);
  else
    line += fmt::format(", grid [{}], block [{}], {} bytes shared", fmt::join(shape.grid, ","),
                        fmt::join(shape.block, ","), shape.sharedBytes);
  line += ", params ";
  for (size_t p = 0; p < k.params.size(); ++p) {
    const KernelParam& param = k.params[p];
    line += fmt::format("{}{} {} {} strides [{}]", p ? "; " : "", p, role(param), dtypeName(param.dtype),
                        fmt::join(row(1 + p), ","));
    if (p < lowered.bindings.size() && lowered.bindings[p].offset != 0)
      line += fmt::format(" from element {}", lowered.bindings[p].offset);
  }
  return line;
}

std::string describeCopyStep(std::string_view name, size_t bytes, std::span<const int64_t> offsets) {
  std::string line = fmt::format("copy {}: {} bytes", name, bytes);
  if (offsets.size() == 2) line += fmt::format(", from byte {} into byte {}", offsets[0], offsets[1]);
  return line;
}

std::string describeLibraryStep(std::string_view name, std::span<const int64_t> args) {
  return fmt::format("library call {}: args [{}]", name, fmt::join(args, ","));
}

}  // namespace kiln::codegen

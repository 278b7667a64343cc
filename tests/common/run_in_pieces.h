// Runs a compiled CPU reduction kernel the way the thread pool may: over all
// its output rows in one call, then again in pieces, so that tests can check
// that no result depends on where the rows are split.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "codegen/cpu_compiler.h"
#include "codegen/kernel.h"

namespace kiln::codegen {

/// Runs `k` (its buffers: `inputs`, then one output of `outCount` elements)
/// over output rows [0, rows) in one call, then into a second output in the
/// pieces [0, c0), [c0, c1), ..., [c_last, rows) for the given cuts; returns
/// both outputs.
template <class Out>
std::pair<std::vector<Out>, std::vector<Out>> runWholeAndInPieces(const Kernel& k, std::vector<void*> inputs,
                                                                  int64_t rows, size_t outCount,
                                                                  const std::vector<int64_t>& args,
                                                                  std::vector<int64_t> cuts) {
  CompiledCpuKernel compiled = compileCpuKernel(k);
  std::vector<Out> whole(outCount), pieces(outCount);
  std::vector<void*> buffers = std::move(inputs);
  buffers.push_back(whole.data());
  compiled.fn(buffers.data(), args.data(), 0, rows);
  buffers.back() = pieces.data();
  cuts.push_back(rows);
  int64_t begin = 0;
  for (int64_t cut : cuts) {
    compiled.fn(buffers.data(), args.data(), begin, cut);
    begin = cut;
  }
  return {std::move(whole), std::move(pieces)};
}

}  // namespace kiln::codegen

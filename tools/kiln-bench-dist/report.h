// kiln-bench-dist's output: markdown tables on stdout (ready for
// docs/benchmarks.md) and the JSON rows, kiln-bench's conventions: one
// object per row, snake_case fields, null where there is no number.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "tools/kiln-bench-dist/torch_side.h"

namespace kiln::bench::dist {

/// Adds the torch columns and the ratios to the all-reduce rows: torch's
/// rows (from runTorch) where there are, else torch_error. Ratios are of bus
/// bandwidths (kiln / other), null where a side is missing.
void addComparisons(nlohmann::json& rows, const TorchInfo& torch, const nlohmann::json& torchRowsByProcesses);

/// The all-reduce table, the DDP table and its verdicts.
void printTables(std::ostream& os, const nlohmann::json& rows, const std::string& machine, const TorchInfo& torch);

/// "2 cores (AMD EPYC 9B14), loopback".
std::string machineLine();

}  // namespace kiln::bench::dist

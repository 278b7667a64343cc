// The torch.distributed side of kiln-bench-dist: tools/kiln-bench-dist/
// torch_dist_bench.py (installed next to the executable as
// kiln-bench-dist-torch.py) under $KILN_TORCH_PYTHON (default python3), run
// as a job of ranks of its own after kiln's side at the same process count.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/kiln-bench-dist/launch.h"
#include "tools/kiln-bench-dist/options.h"

namespace kiln::bench::dist {

struct TorchInfo {
  std::string version;  ///< empty when unavailable
  std::string error;    ///< why not: "torch not importable: ..."
  bool available() const { return error.empty(); }
};

/// Whether torch.distributed can be imported (one process, bounded).
TorchInfo probeTorch(const Options& options, const std::string& workDir, run::SignalWatcher& signals);

/// torch.distributed's all-reduce medians at `nprocs` processes: the
/// script's {"rows": [{"bytes", "ms", "iters"}, ...]}.
nlohmann::json runTorch(const Options& options, int nprocs, const std::string& workDir, run::SignalWatcher& signals);

/// This executable's directory.
std::string selfDir();

}  // namespace kiln::bench::dist

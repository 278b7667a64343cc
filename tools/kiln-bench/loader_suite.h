// kiln-bench --suite loader: data::DataLoader's throughput with a slow
// per-sample transform at 0, 1 and 2 workers (docs/data.md, "Throughput").
#pragma once

#include <iosfwd>

#include "tools/kiln-bench/options.h"

namespace kiln::bench {

/// Runs the loader suite, prints its table to `out`, writes --json if
/// asked; returns the exit status.
int runLoaderSuite(const Options& options, std::ostream& out);

}  // namespace kiln::bench

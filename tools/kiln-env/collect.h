// What kiln-env reports, gathered into one JSON document: `--json` prints
// it as it is, and the table (table.h) is rendered from it, so the two
// never disagree. The fields are listed in docs/kiln-env.md.
#pragma once

#include <nlohmann/json.hpp>

namespace kiln::env {

/// kiln's build, the system, the CPU side, every backend found (or not) at
/// run time with its version or why it is unusable, the device kinds and
/// devices with their properties, each GPU's NVML status, and the
/// environment variables that change what kiln finds.
nlohmann::json collect();

}  // namespace kiln::env

// kiln-env's human-readable report, rendered from the JSON document that
// collect() makes (so the table shows nothing the JSON does not hold).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln::env {

/// One section per part of the report: kiln's build, the system and CPU
/// side, the backends (yes/no, version, where it was found or why not), the
/// device kinds, the devices with their properties, each GPU's NVML status
/// and processes, and the environment variables that matter.
std::string renderTable(const nlohmann::json& report);

}  // namespace kiln::env

// kiln-env: what kiln finds on this machine, like PyTorch's
// `python -m torch.utils.collect_env` with nvidia-smi's table: kiln's
// build, the CPU side, each backend found at run time (the CUDA driver,
// NVRTC, cuBLAS, cuBLASLt, cuDNN, NCCL, NVML, OpenCL) with its version or
// why it cannot be used, the devices with their properties, and each
// NVIDIA GPU's NVML status. See docs/kiln-env.md.
//
//   kiln-env                 a table
//   kiln-env --json          one JSON object on stdout
//   kiln-env --get POINTER   one value of it (scripts/gpu-check.sh asks
//                            /backends/cuda_driver/available without a JSON parser)
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "tools/kiln-env/collect.h"
#include "tools/kiln-env/table.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln-env: kiln's build, the backends found at run time, devices and GPUs"};
  bool json = false;
  app.add_flag("--json", json, "print one JSON object instead of the table (fields: docs/kiln-env.md)");
  std::string pointer;
  app.add_option("--get", pointer,
                 "print only the value at this JSON pointer, e.g. /backends/cuda_driver/reason (strings unquoted)");
  CLI11_PARSE(app, argc, argv);
  try {
    const nlohmann::json report = kiln::env::collect();
    if (!pointer.empty()) {
      const nlohmann::json& value = report.at(nlohmann::json::json_pointer(pointer));
      std::cout << (value.is_string() ? value.get<std::string>() : value.dump()) << "\n";
    } else if (json)
      std::cout << report.dump(2) << "\n";
    else
      std::cout << kiln::env::renderTable(report);
    std::cout.flush();
    return std::cout ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln-env: error: " << e.what() << "\n";
    return 1;
  }
}

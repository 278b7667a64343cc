// The table of kiln-env (table.h). Absent values (JSON null) print as "-".
#include "tools/kiln-env/table.h"

#include <fmt/format.h>

namespace kiln::env {
namespace {

using nlohmann::json;

std::string str(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string gib(const json& bytes) {
  return bytes.is_number() ? fmt::format("{:.1f} GiB", bytes.get<double>() / (1 << 30)) : "-";
}

std::string yesNo(const json& v) { return v.is_boolean() && v.get<bool>() ? "yes" : "no"; }

// The backends in the order and with the names the table shows them.
constexpr std::pair<const char*, const char*> kBackends[] = {{"cuda_driver", "CUDA driver"},
                                                             {"nvrtc", "NVRTC"},
                                                             {"cublas", "cuBLAS"},
                                                             {"cublaslt", "cuBLASLt"},
                                                             {"cudnn", "cuDNN"},
                                                             {"nccl", "NCCL"},
                                                             {"nvml", "NVML"},
                                                             {"opencl", "OpenCL"}};

}  // namespace

std::string renderTable(const json& r) {
  std::string out;
  auto line = [&](const std::string& text) { out += text + "\n"; };
  const json& k = r["kiln"];
  line(fmt::format("kiln {}, {} build{}, {}, C++ {}", str(k["version"]), str(k["build_type"]),
                   k["sanitizers"].is_null() ? "" : " with -fsanitize=" + str(k["sanitizers"]), str(k["compiler"]),
                   str(k["cxx_standard"])));
  line(fmt::format("  {:<14}{}", "build id", str(k["build_id"])));
  line(fmt::format("  {:<14}{}, {}, {}", "llvm", str(k["llvm"]), str(k["target_triple"]), str(k["target_cpu"])));
  const json& s = r["system"];
  line(fmt::format("  {:<14}{}, {} {}, glibc {}", "system", str(s["os"]), str(s["kernel"]), str(s["machine"]),
                   str(s["glibc"])));
  line(fmt::format("  {:<14}{}, {} cores, kiln threads {}", "cpu", str(s["cpu"]), str(s["cores"]),
                   str(r["cpu"]["threads"])));
  line(fmt::format("  {:<14}{}, threads: {}", "blas", str(r["cpu"]["blas"]),
                   r["cpu"]["blas_threading"] == "pool" ? "kiln's pool (KILN_BLAS_THREADING=pool)"
                                                        : "OpenBLAS's own (KILN_BLAS_THREADING=blas)"));
  line(fmt::format("  {:<14}{}", "blas choice", str(r["cpu"]["blas_choice"])));
  line(fmt::format("  {:<14}{}", "bf16 choice", str(r["cpu"]["bf16_matmul_choice"])));
  line(fmt::format("  {:<14}{}", "conv", str(r["cpu"]["conv"])));
  line(fmt::format("  {:<14}{}", "compiled for", str(r["cpu"]["compiled_for"])));

  line("\nbackends found at run time");
  line(fmt::format("  {:<14}{:<7}{:<14}{}", "backend", "usable", "version", "library, or why not"));
  for (const auto& [key, name] : kBackends) {
    const json& b = r["backends"][key];
    std::string version = str(b.value("version", json(nullptr)));
    if (key == std::string("nvml")) version = str(b["driver_version"]);
    std::string where =
        b["available"].get<bool>() ? str(b.value("library", b.value("device", json(nullptr)))) : str(b["reason"]);
    if (key == std::string("cuda_driver") && b["available"].get<bool>())
      where += fmt::format(", {} GPU(s)", str(b["device_count"]));
    if (key == std::string("nvml") && b["available"].get<bool>())
      where += fmt::format(", {} GPU(s)", str(b["gpu_count"]));
    line(fmt::format("  {:<14}{:<7}{:<14}{}", name, yesNo(b["available"]), version, where));
  }

  line("\ndevice kinds");
  for (const json& d : r["device_kinds"])
    line(fmt::format("  {:<14}{:<7}{}", str(d["kind"]), yesNo(d["available"]),
                     d["available"].get<bool>() ? fmt::format("{} device(s)", str(d["count"])) : str(d["reason"])));

  line("\ndevices");
  for (const json& d : r["devices"]) {
    if (d.contains("error")) {
      line(fmt::format("  {:<14}error: {}", str(d["device"]), str(d["error"])));
      continue;
    }
    line(fmt::format("  {:<14}{}, driver {}{}, {}, {} compute units", str(d["device"]), str(d["name"]),
                     str(d["driver_version"]), d["arch"].is_null() ? "" : ", " + str(d["arch"]), gib(d["total_memory"]),
                     str(d["compute_units"])));
  }

  line("\nNVIDIA GPUs (NVML)");
  const json& nvml = r["backends"]["nvml"];
  if (!nvml["available"].get<bool>()) line("  unavailable: " + str(nvml["reason"]));
  if (nvml["available"].get<bool>() && r["gpus"].empty()) line("  none");
  for (const json& g : r["gpus"]) {
    if (g.contains("error")) {
      line(fmt::format("  {:<3}error: {}", str(g["index"]), str(g["error"])));
      continue;
    }
    auto percent = [](const json& v) { return v.is_null() ? std::string("-") : str(v) + "%"; };
    auto watts = [](const json& v) { return v.is_null() ? std::string("-") : fmt::format("{:.0f}", v.get<double>()); };
    line(fmt::format("  {:<3}{}, {}", str(g["index"]), str(g["name"]), str(g["uuid"])));
    line(fmt::format("     memory {} of {}, utilization {} (memory {}), {} C, power {} of {} W", gib(g["memory_used"]),
                     gib(g["memory_total"]), percent(g["gpu_utilization"]), percent(g["memory_utilization"]),
                     str(g["temperature"]), watts(g["power_draw"]), watts(g["power_limit"])));
    for (const json& p : g["processes"])
      line(fmt::format("     pid {:<8} {:<16} {}", str(p["pid"]), str(p["name"]),
                       p["used_memory"].is_null()
                           ? std::string("-")
                           : fmt::format("{:.0f} MiB", p["used_memory"].get<double>() / (1 << 20))));
    if (g["processes"].empty()) line("     no compute processes");
  }

  line("\nenvironment");
  if (r["environment"].empty()) line("  (no KILN_, CUDA_ or POCL_ variables, LD_LIBRARY_PATH or OCL_ICD_VENDORS set)");
  for (const auto& [name, value] : r["environment"].items()) line(fmt::format("  {}={}", name, str(value)));
  return out;
}

}  // namespace kiln::env

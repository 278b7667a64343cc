// kiln-env, run as a user runs it: the table and --json (parsed with
// nlohmann_json) hold every section; the CUDA driver says why it cannot be
// used where there is none; the CPU is listed as a device; an override to a
// missing library is reported; and, through the fake libnvidia-ml
// (tests/fakes/fake_nvml.c), a GPU's status and processes reach both forms.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace {

using nlohmann::json;

struct Process {
  int status = -1;
  std::string out;
};

/// Runs kiln-env with `args`, environment assignments `env` in front
/// ("A=b C=d"), and returns its exit status and stdout.
Process kilnEnv(const std::string& args, const std::string& env = "") {
  const std::string command = (env.empty() ? "" : "env " + env + " ") + KILN_ENV_BIN + " " + args + " 2>/dev/null";
  Process run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buffer;
  for (size_t n; (n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) run.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

json kilnEnvJson(const std::string& env = "") {
  const Process run = kilnEnv("--json", env);
  EXPECT_EQ(run.status, 0);
  return json::parse(run.out);  // throws, failing the test, when it is not JSON
}

/// Whether this machine has a CUDA driver, asked without kiln.
bool driverLoads() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return handle != nullptr;
}

TEST(KilnEnv, JsonHasEverySectionAndTheCpuDevice) {
  const json r = kilnEnvJson();
  for (const char* section : {"kiln", "system", "cpu", "backends", "device_kinds", "devices", "gpus", "environment"})
    EXPECT_TRUE(r.contains(section)) << section;
  EXPECT_EQ(r["kiln"]["version"], KILN_VERSION);
  EXPECT_TRUE(r["kiln"]["llvm"].get<std::string>().starts_with("LLVM 19.")) << r["kiln"]["llvm"];
  if (!r["kiln"]["build_id"].is_null()) {
    EXPECT_TRUE(std::regex_match(r["kiln"]["build_id"].get<std::string>(), std::regex("[0-9a-f]{16,}")));
  }
  EXPECT_GE(r["cpu"]["threads"].get<int>(), 1);
  EXPECT_TRUE(r["cpu"]["blas"].get<std::string>().starts_with("OpenBLAS")) << r["cpu"]["blas"];
  for (const char* backend : {"cuda_driver", "nvrtc", "cublas", "cublaslt", "cudnn", "nccl", "nvml", "opencl"}) {
    const json& b = r["backends"][backend];
    ASSERT_TRUE(b.is_object()) << backend;
    // Usable, or says why not; never both, never neither.
    EXPECT_EQ(b["available"].get<bool>(), b["reason"].is_null()) << backend << ": " << b.dump();
  }
  ASSERT_FALSE(r["devices"].empty());
  EXPECT_EQ(r["devices"][0]["device"], "cpu");
  EXPECT_FALSE(r["devices"][0].contains("error")) << r["devices"][0].dump();
  EXPECT_FALSE(r["devices"][0]["name"].get<std::string>().empty());
  EXPECT_EQ(r["device_kinds"][0]["kind"], "cpu");
  EXPECT_EQ(r["device_kinds"][0]["available"], true);
  EXPECT_EQ(r["device_kinds"][0]["count"], 1);
}

TEST(KilnEnv, TheCudaDriverSaysWhyItCannotBeUsed) {
  const json r = kilnEnvJson();
  const json& driver = r["backends"]["cuda_driver"];
  const Process table = kilnEnv("");
  ASSERT_EQ(table.status, 0);
  if (driverLoads()) {
    EXPECT_EQ(driver["library"], "libcuda.so.1");
    if (driver["available"].get<bool>()) {
      EXPECT_GT(driver["device_count"].get<int>(), 0);
    }
    GTEST_SKIP() << "this machine has a CUDA driver: " << driver.dump();
  }
  EXPECT_EQ(driver["available"], false);
  EXPECT_TRUE(driver["library"].is_null());
  EXPECT_EQ(driver["device_count"], 0);
  const std::string reason = driver["reason"].get<std::string>();
  EXPECT_TRUE(reason.starts_with("no CUDA driver: libcuda.so.1: ")) << reason;
  EXPECT_TRUE(reason.ends_with("; install the NVIDIA driver")) << reason;
  // The table's line says the same.
  EXPECT_NE(table.out.find("  CUDA driver   no     -             " + reason + "\n"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("\ndevices\n  cpu "), std::string::npos) << table.out;
  // Without a driver, CUDA is not a usable device kind, and says why.
  for (const json& kind : r["device_kinds"]) {
    if (kind["kind"] != "cuda") continue;
    EXPECT_EQ(kind["available"], false);
    EXPECT_FALSE(kind["reason"].get<std::string>().empty());
  }
}

TEST(KilnEnv, AnOverrideToAMissingLibraryIsReported) {
  const json r = kilnEnvJson("KILN_CUDNN_LIBRARY=/nonexistent/libcudnn.so.9");
  const json& cudnn = r["backends"]["cudnn"];
  EXPECT_EQ(cudnn["available"], false);
  EXPECT_TRUE(cudnn["version"].is_null());
  EXPECT_TRUE(cudnn["reason"].get<std::string>().starts_with("cuDNN not found: /nonexistent/libcudnn.so.9: "))
      << cudnn["reason"];
  EXPECT_EQ(r["environment"]["KILN_CUDNN_LIBRARY"], "/nonexistent/libcudnn.so.9");
}

TEST(KilnEnv, EachGpusNvmlStatusAndProcessesAreShown) {
  const std::string fake = std::string("KILN_NVML_LIBRARY=") + KILN_FAKE_NVML;
  const json r = kilnEnvJson(fake);
  const json& nvml = r["backends"]["nvml"];
  EXPECT_EQ(nvml["available"], true) << nvml.dump();
  EXPECT_EQ(nvml["driver_version"], "580.95.05");
  EXPECT_EQ(nvml["gpu_count"], 2);
  ASSERT_EQ(r["gpus"].size(), 2u);
  const json& g = r["gpus"][0];
  EXPECT_EQ(g["name"], "Fake GPU Zero");
  EXPECT_EQ(g["memory_total"], int64_t{80} << 30);
  EXPECT_EQ(g["gpu_utilization"], 37);
  EXPECT_EQ(g["power_draw"], 123.456);
  ASSERT_EQ(g["processes"].size(), 2u);
  EXPECT_EQ(g["processes"][0]["name"], "kiln-env");  // the fake reports its caller
  EXPECT_EQ(g["processes"][0]["used_memory"], 512 << 20);
  EXPECT_TRUE(g["processes"][1]["used_memory"].is_null());
  EXPECT_TRUE(r["gpus"][1]["temperature"].is_null());
  EXPECT_EQ(r["gpus"][1]["processes"].size(), 11u);

  const Process table = kilnEnv("", fake);
  EXPECT_NE(table.out.find("  0  Fake GPU Zero, GPU-00000000-fake\n"
                           "     memory 3.0 GiB of 80.0 GiB, utilization 37% (memory 12%), 45 C, power 123 of 700 W\n"),
            std::string::npos)
      << table.out;
  EXPECT_TRUE(std::regex_search(table.out, std::regex("     pid [0-9]+ +kiln-env +512 MiB\n"))) << table.out;
  EXPECT_NE(table.out.find("     pid 999999999 -                -\n"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("  1  Fake GPU One, GPU-11111111-fake\n"
                           "     memory 0.0 GiB of 80.0 GiB, utilization 0% (memory 0%), - C, power - of - W\n"),
            std::string::npos)
      << table.out;
}

TEST(KilnEnv, NvmlWithoutADriverIsUnavailableWithTheReason) {
  const Process table = kilnEnv("", "KILN_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(table.status, 0);
  EXPECT_NE(table.out.find("NVIDIA GPUs (NVML)\n  unavailable: no NVML: /nonexistent/libnvidia-ml.so.1: "),
            std::string::npos)
      << table.out;
}

TEST(KilnEnv, GetPrintsOneValueAndRefusesAPathThatIsNotThere) {
  const json r = kilnEnvJson();
  const Process available = kilnEnv("--get /backends/cuda_driver/available");
  EXPECT_EQ(available.status, 0);
  EXPECT_EQ(available.out, r["backends"]["cuda_driver"]["available"].dump() + "\n");
  const Process kind = kilnEnv("--get /devices/0/device");
  EXPECT_EQ(kind.out, "cpu\n");  // strings unquoted
  EXPECT_NE(kilnEnv("--get /backends/no_such_backend").status, 0);
  EXPECT_NE(kilnEnv("--get not-a-pointer").status, 0);
}

TEST(KilnEnv, HelpAndABadFlag) {
  const Process help = kilnEnv("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--json"), std::string::npos) << help.out;
  EXPECT_NE(kilnEnv("--no-such-flag").status, 0);
}

}  // namespace

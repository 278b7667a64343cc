// runtime::nvml: what a machine without NVML is told (no library, a library
// that is not NVML, a driver that does not initialize), and, through a fake
// libnvidia-ml (tests/fakes/fake_nvml.c), that every field nvidia-smi shows
// reaches a GpuStatus: fields a GPU does not support stay unknown, a
// process list longer than the first buffer is asked again, and process
// names come from /proc.
#include "runtime/nvml.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/scoped_env.h"
#include "runtime/dynamic_library.h"

namespace kiln::runtime::nvml {
namespace {

using testutil::ScopedEnv;

/// This test binary's name as the kernel keeps it in /proc/<pid>/comm: the
/// file name it was run as, cut to 15 characters.
std::string thisProgram() { return std::string(program_invocation_short_name).substr(0, 15); }

TEST(Nvml, NoLibrarySaysWhatWasTriedAndWhereNvmlComesFrom) {
  const std::vector<std::string> missing = {"/nonexistent/lib/libnvidia-ml.so.1"};
  const Nvml nvml = Nvml::open(missing);
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.library(), "");
  EXPECT_EQ(nvml.deviceCount(), 0);
  EXPECT_EQ(nvml.reason().rfind("no NVML: /nonexistent/lib/libnvidia-ml.so.1: ", 0), 0u) << nvml.reason();
  EXPECT_TRUE(nvml.reason().ends_with("; NVML comes with the NVIDIA driver (libnvidia-ml.so.1)")) << nvml.reason();
  EXPECT_EQ(errorOf([&] { nvml.status(); }), "nvml: unavailable: " + nvml.reason());
  EXPECT_EQ(errorOf([&] { nvml.processes(0); }), "nvml: unavailable: " + nvml.reason());
}

TEST(Nvml, TheOverrideToAMissingPathIsReportedNotReplaced) {
  ScopedEnv missing("KILN_NVML_LIBRARY", "/nonexistent/nvml/libnvidia-ml.so.1");
  EXPECT_EQ(nvmlCandidates(), std::vector<std::string>{"/nonexistent/nvml/libnvidia-ml.so.1"});
  const Nvml nvml = Nvml::open(nvmlCandidates());
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.reason().rfind("no NVML: /nonexistent/nvml/libnvidia-ml.so.1: ", 0), 0u) << nvml.reason();
}

TEST(Nvml, WithoutTheOverrideTheDriversLibraryIsLookedFor) {
  ScopedEnv unset("KILN_NVML_LIBRARY", nullptr);
  EXPECT_EQ(nvmlCandidates(), std::vector<std::string>{"libnvidia-ml.so.1"});
}

TEST(Nvml, ALibraryWithoutNvmlsEntryPointsIsRefusedByName) {
  const Nvml nvml = Nvml::open(std::vector<std::string>{"libm.so.6"});
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.library(), "libm.so.6");
  EXPECT_EQ(nvml.reason().rfind("libm.so.6 is not a usable NVML (a driver older than 470?): libm.so.6 has no symbol "
                                "nvmlInit_v2",
                                0),
            0u)
      << nvml.reason();
}

// On a machine without the NVIDIA driver (CI) NVML is unavailable and says
// so; on a GPU machine it is available and sees a GPU. Which one this is is
// decided by loading libnvidia-ml.so.1 directly, not by asking nvml().
TEST(Nvml, ThisMachinesNvmlMatchesWhetherTheDriversLibraryLoads) {
  const std::vector<std::string> soname = {"libnvidia-ml.so.1"};
  const bool present = DynamicLibrary::open(soname).loaded();
  const Nvml& nvml = runtime::nvml::nvml();
  std::cout << "[ info ] NVML: "
            << (nvml.available() ? fmt::format("{} GPUs, driver {}", nvml.deviceCount(), nvml.driverVersion())
                                 : nvml.reason())
            << "\n";
  EXPECT_EQ(&nvml, &runtime::nvml::nvml());  // opened once
  if (!present) {
    EXPECT_FALSE(nvml.available());
    EXPECT_EQ(nvml.reason().rfind("no NVML: libnvidia-ml.so.1: ", 0), 0u) << nvml.reason();
    EXPECT_THROW(nvml.status(), Error);
    return;
  }
  ASSERT_TRUE(nvml.available()) << nvml.reason();
  EXPECT_FALSE(nvml.driverVersion().empty());
  for (const GpuStatus& s : nvml.status()) {
    EXPECT_FALSE(s.name.empty());
    EXPECT_GT(s.memoryTotal, 0);
  }
}

#ifdef KILN_FAKE_NVML
const std::vector<std::string> kFake = {KILN_FAKE_NVML};

TEST(NvmlFake, EveryFieldReachesTheStatus) {
  const Nvml nvml = Nvml::open(kFake);
  ASSERT_TRUE(nvml.available()) << nvml.reason();
  EXPECT_EQ(nvml.library(), KILN_FAKE_NVML);
  EXPECT_EQ(nvml.driverVersion(), "580.95.05");
  ASSERT_EQ(nvml.deviceCount(), 2);
  const std::vector<GpuStatus> all = nvml.status();
  ASSERT_EQ(all.size(), 2u);

  const GpuStatus& g = all[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.name, "Fake GPU Zero");
  EXPECT_EQ(g.uuid, "GPU-00000000-fake");
  EXPECT_EQ(g.memoryUsed, int64_t{3} << 30);
  EXPECT_EQ(g.memoryTotal, int64_t{80} << 30);
  EXPECT_EQ(g.gpuUtilization, 37);
  EXPECT_EQ(g.memoryUtilization, 12);
  EXPECT_EQ(g.temperature, 45);
  EXPECT_DOUBLE_EQ(g.powerDraw, 123.456);
  EXPECT_DOUBLE_EQ(g.powerLimit, 700.0);
  ASSERT_EQ(g.processes.size(), 2u);
  EXPECT_EQ(g.processes[0].pid, getpid());
  EXPECT_EQ(g.processes[0].usedMemory, int64_t{512} << 20);
  EXPECT_EQ(g.processes[0].name, thisProgram());
  // A PID this process cannot see, and memory NVML does not know.
  EXPECT_EQ(g.processes[1].pid, 999999999);
  EXPECT_EQ(g.processes[1].usedMemory, -1);
  EXPECT_EQ(g.processes[1].name, "");
}

TEST(NvmlFake, UnsupportedSensorsStayUnknownAndLongProcessListsAreAskedAgain) {
  const Nvml nvml = Nvml::open(kFake);
  ASSERT_TRUE(nvml.available()) << nvml.reason();
  const GpuStatus g = nvml.status(1);
  EXPECT_EQ(g.name, "Fake GPU One");
  EXPECT_EQ(g.memoryUsed, 0);
  EXPECT_EQ(g.temperature, -1);
  EXPECT_EQ(g.powerDraw, -1);
  EXPECT_EQ(g.powerLimit, -1);
  // Eleven processes, more than the first buffer of eight.
  const std::vector<GpuProcess> p = nvml.processes(1);
  ASSERT_EQ(p.size(), 11u);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i].usedMemory, static_cast<int64_t>(i + 1) << 20) << i;
  EXPECT_EQ(g.processes.size(), 11u);
}

TEST(NvmlFake, AGpuThatDoesNotExistIsAnError) {
  const Nvml nvml = Nvml::open(kFake);
  EXPECT_EQ(errorOf([&] { nvml.status(2); }), "nvml: no GPU 2 (NVML sees 2)");
  EXPECT_EQ(errorOf([&] { nvml.processes(-1); }), "nvml: no GPU -1 (NVML sees 2)");
}

TEST(NvmlFake, ADriverThatIsNotLoadedIsReportedWithNvmlsError) {
  ScopedEnv fail("FAKE_NVML_FAIL_INIT", "1");
  const Nvml nvml = Nvml::open(kFake);
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.library(), KILN_FAKE_NVML);
  EXPECT_EQ(nvml.reason(), "nvmlInit_v2 failed: Driver Not Loaded (9); is the NVIDIA driver loaded?");
}
#endif

TEST(Nvml, ProcessNamesComeFromProc) {
  EXPECT_EQ(processName(getpid()), thisProgram());
  EXPECT_EQ(processName(999999999), "");
}

}  // namespace
}  // namespace kiln::runtime::nvml

// runtime::cuda::probeLibrary: cuBLAS, cuBLASLt, cuDNN and NCCL found at run
// time — where each is looked for, what a missing one (an override to a
// path that does not exist) or a wrong one is told, and, where the CUDA
// toolkit's files are present, the version each reports.
#include "runtime/cuda_libraries.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "common/scoped_env.h"

namespace kiln::runtime::cuda {
namespace {

using testutil::ScopedEnv;

struct Expect {
  Library library;
  const char* variable;
  const char* soname;  ///< the preferred one
  const char* symbol;
};
const Expect kExpect[] = {
    {Library::cublas, "KILN_CUBLAS_LIBRARY", "libcublas.so.13", "cublasGetProperty"},
    {Library::cublasLt, "KILN_CUBLASLT_LIBRARY", "libcublasLt.so.13", "cublasLtGetVersion"},
    {Library::cudnn, "KILN_CUDNN_LIBRARY", "libcudnn.so.9", "cudnnGetVersion"},
    {Library::nccl, "KILN_NCCL_LIBRARY", "libnccl.so.2", "ncclGetVersion"},
};

TEST(CudaLibraries, AnOverrideToAMissingPathIsReportedAsNotFound) {
  for (const Expect& e : kExpect) {
    const std::string name(libraryName(e.library));
    const std::string path = "/nonexistent/cuda/lib64/" + std::string(e.soname);
    ScopedEnv missing(e.variable, path.c_str());
    const std::vector<std::string> candidates = libraryCandidates(e.library);
    EXPECT_EQ(candidates, std::vector<std::string>{path}) << name;
    const LibraryProbe probe = probeLibrary(e.library, candidates);
    EXPECT_FALSE(probe.found) << name;
    EXPECT_EQ(probe.path, "") << name;
    EXPECT_EQ(probe.version, "") << name;
    EXPECT_EQ(probe.reason.rfind(name + " not found: " + path + ": ", 0), 0u) << probe.reason;
    EXPECT_NE(probe.reason.find("No such file or directory"), std::string::npos) << probe.reason;
    EXPECT_TRUE(probe.reason.ends_with(std::string(" or set ") + e.variable + " to its path")) << probe.reason;
  }
}

TEST(CudaLibraries, SonamesComeFirstThenTheToolkitsFolders) {
  ScopedEnv home("CUDA_HOME", "/opt/cuda-home");
  for (const Expect& e : kExpect) {
    ScopedEnv unset(e.variable, nullptr);
    const std::vector<std::string> c = libraryCandidates(e.library);
    ASSERT_GE(c.size(), 3u);
    EXPECT_EQ(c[0], e.soname);
    EXPECT_NE(std::find(c.begin(), c.end(), "/opt/cuda-home/lib64/" + std::string(e.soname)), c.end());
    EXPECT_EQ(c.back().rfind("/usr/local/cuda/lib64/lib", 0), 0u) << c.back();
  }
}

TEST(CudaLibraries, ALibraryWithoutTheVersionFunctionIsNotThatLibrary) {
  for (const Expect& e : kExpect) {
    const LibraryProbe probe = probeLibrary(e.library, std::vector<std::string>{"libm.so.6"});
    EXPECT_FALSE(probe.found);
    EXPECT_EQ(probe.path, "libm.so.6");
    EXPECT_EQ(probe.reason.rfind(
                  fmt::format("libm.so.6 is not {}: libm.so.6 has no symbol {}", libraryName(e.library), e.symbol), 0),
              0u)
        << probe.reason;
  }
}

TEST(CudaLibraries, VersionsAreDecodedAsEachLibraryEncodesThem) {
  EXPECT_EQ(formatVersion(Library::cublasLt, 130100), "13.1.0");
  EXPECT_EQ(formatVersion(Library::cublas, 120908), "12.9.8");
  EXPECT_EQ(formatVersion(Library::cudnn, 91900), "9.19.0");
  EXPECT_EQ(formatVersion(Library::cudnn, 8907), "8.9.7");  // cuDNN 8: major·1000
  EXPECT_EQ(formatVersion(Library::nccl, 22809), "2.28.9");
  EXPECT_EQ(formatVersion(Library::nccl, 2708), "2.7.8");  // NCCL before 2.9: major·1000
}

// The toolkit's own files, where they are: each loads and reports a version
// whose major is its soname's. Skipped, with the reason, where the file is
// not there.
TEST(CudaLibraries, TheToolkitsLibrariesReportTheirVersions) {
  int checked = 0;
  for (const Expect& e : kExpect) {
    const std::string name(libraryName(e.library));
    std::string file;
    for (const std::string& folder : toolkitLibraryFolders())
      if (std::filesystem::exists(folder + "/" + e.soname)) file = folder + "/" + e.soname;
    if (file.empty()) {
      std::cout << "[ skip ] " << name << ": no " << e.soname << " in the toolkit's folders\n";
      continue;
    }
    const LibraryProbe probe = probeLibrary(e.library, std::vector<std::string>{file});
    std::cout << "[ info ] " << name << " " << probe.version << " at " << probe.path << "\n";
    ASSERT_TRUE(probe.found) << probe.reason;
    EXPECT_EQ(probe.reason, "");
    EXPECT_EQ(probe.path, file);
    EXPECT_TRUE(std::regex_match(probe.version, std::regex(R"(\d+\.\d+\.\d+)"))) << probe.version;
    const std::string major = std::string(e.soname).substr(std::string(e.soname).rfind('.') + 1);
    EXPECT_EQ(probe.version.rfind(major + ".", 0), 0u) << name << " " << probe.version << " from " << e.soname;
    EXPECT_EQ(probe.version, formatVersion(e.library, probe.rawVersion));
    ++checked;
  }
  if (checked == 0)
    GTEST_SKIP() << fmt::format("no CUDA library in the toolkit's folders ({})",
                                fmt::join(toolkitLibraryFolders(), ", "));
}

TEST(CudaLibraries, TheDefaultProbeIsMadeOnce) {
  for (const Expect& e : kExpect) {
    const LibraryProbe& probe = probeLibrary(e.library);
    EXPECT_EQ(&probe, &probeLibrary(e.library));
    EXPECT_EQ(probe.library, e.library);
    EXPECT_EQ(probe.found, probe.reason.empty()) << probe.reason;
    EXPECT_EQ(probe.found, !probe.version.empty());
  }
}

}  // namespace
}  // namespace kiln::runtime::cuda

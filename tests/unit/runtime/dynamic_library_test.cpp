// runtime::DynamicLibrary: the first candidate that loads, the loader's
// reasons for those that do not, and symbols resolved or refused by name;
// runtime::LibrarySearch: where a library is looked for.
#include "runtime/dynamic_library.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/scoped_env.h"

namespace kiln::runtime {
namespace {

TEST(DynamicLibrary, OpensTheFirstCandidateThatLoadsAndCallsItsFunction) {
  const std::vector<std::string> candidates = {"/nonexistent/libkiln_missing.so.1", "libm.so.6"};
  const DynamicLibrary m = DynamicLibrary::open(candidates);
  ASSERT_TRUE(m.loaded()) << m.error();
  EXPECT_EQ(m.name(), "libm.so.6");
  EXPECT_EQ(m.error(), "");
  std::string why;
  auto* cosine = reinterpret_cast<double (*)(double)>(m.symbol("cos", &why));
  ASSERT_NE(cosine, nullptr) << why;
  EXPECT_EQ(cosine(0.5), std::cos(0.5));
}

TEST(DynamicLibrary, NoCandidateLoadsSaysWhichWereTriedAndWhy) {
  const std::vector<std::string> candidates = {"/nonexistent/a/libx.so.1", "libkiln_no_such_library.so.7"};
  const DynamicLibrary none = DynamicLibrary::open(candidates);
  EXPECT_FALSE(none.loaded());
  EXPECT_EQ(none.name(), "");
  // Each candidate, in order, with the loader's reason.
  const std::string& e = none.error();
  const size_t first = e.find("/nonexistent/a/libx.so.1: ");
  const size_t second = e.find("; libkiln_no_such_library.so.7: ");
  EXPECT_EQ(first, 0u) << e;
  EXPECT_NE(second, std::string::npos) << e;
  EXPECT_NE(e.find("No such file or directory", first), std::string::npos) << e;
  std::string why;
  EXPECT_EQ(none.symbol("cos", &why), nullptr);
  EXPECT_EQ(why.rfind("cos is not loaded (", 0), 0u) << why;
}

TEST(DynamicLibrary, AMissingSymbolIsNamed) {
  const std::vector<std::string> candidates = {"libm.so.6"};
  const DynamicLibrary m = DynamicLibrary::open(candidates);
  ASSERT_TRUE(m.loaded()) << m.error();
  std::string why;
  EXPECT_EQ(m.symbol("kiln_no_such_function", &why), nullptr);
  EXPECT_EQ(why.rfind("libm.so.6 has no symbol kiln_no_such_function: ", 0), 0u) << why;
}

TEST(DynamicLibrary, NoCandidatesIsAnError) {
  const DynamicLibrary none = DynamicLibrary::open({});
  EXPECT_FALSE(none.loaded());
  EXPECT_EQ(none.error(), "no library to open");
}

using kiln::testutil::ScopedEnv;

TEST(LibrarySearch, SonamesThenEachFolderWithoutRepeats) {
  ScopedEnv unset("KILN_TEST_LIBRARY", nullptr);
  const LibrarySearch search{
      "KILN_TEST_LIBRARY", {"libx.so.2", "libx.so.1"}, {"/opt/x/lib64", "/opt/y/", "", "/opt/x/lib64"}};
  EXPECT_EQ(search.candidates(),
            (std::vector<std::string>{"libx.so.2", "libx.so.1", "/opt/x/lib64/libx.so.2", "/opt/x/lib64/libx.so.1",
                                      "/opt/y/libx.so.2", "/opt/y/libx.so.1"}));
}

TEST(LibrarySearch, TheOverrideIsTheOnlyCandidate) {
  ScopedEnv set("KILN_TEST_LIBRARY", "/elsewhere/libx.so");
  const LibrarySearch search{"KILN_TEST_LIBRARY", {"libx.so.1"}, {"/opt/x/lib64"}};
  EXPECT_EQ(search.candidates(), std::vector<std::string>{"/elsewhere/libx.so"});
  // A missing override is then reported, not replaced by another copy.
  const DynamicLibrary library = DynamicLibrary::open(search.candidates());
  EXPECT_FALSE(library.loaded());
  EXPECT_EQ(library.error().rfind("/elsewhere/libx.so: ", 0), 0u) << library.error();
}

TEST(LibrarySearch, AnEmptyOverrideIsIgnored) {
  ScopedEnv empty("KILN_TEST_LIBRARY", "");
  const LibrarySearch search{"KILN_TEST_LIBRARY", {"libx.so.1"}, {}};
  EXPECT_EQ(search.candidates(), std::vector<std::string>{"libx.so.1"});
}

}  // namespace
}  // namespace kiln::runtime

// docs/passes.md has a section for every registered pass (DESIGN.md §5).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/source_dir.h"
#include "passes/pass_manager.h"

namespace {

TEST(PassesDoc, EveryRegisteredPassHasASection) {
  auto path = kiln::testutil::sourceDir() / "docs" / "passes.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::set<std::string> sections;
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("## ")) sections.insert(line.substr(3));
  std::set<std::string> registered;
  for (const auto& p : kiln::passes::allPasses()) registered.insert(std::string(p.name));
  EXPECT_EQ(sections, registered);
}

}  // namespace

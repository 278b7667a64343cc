// docs/ops.md lists exactly the ops of ir/Ops.def, with their kinds and
// arities (DESIGN.md §3).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "common/source_dir.h"
#include "ir/op_registry.h"

namespace {

using namespace kiln;

std::string kindName(ir::OpKind kind) {
  switch (kind) {
    case ir::OpKind::elementwise: return "elementwise";
    case ir::OpKind::reduction: return "reduction";
    case ir::OpKind::movement: return "movement";
    case ir::OpKind::library: return "library";
    case ir::OpKind::collective: return "collective";
    case ir::OpKind::control: return "control";
    case ir::OpKind::constant: return "constant";
  }
  return "?";
}

TEST(OpsDoc, ListsEveryOpOfOpsDefWithItsKindAndArity) {
  auto path = testutil::sourceDir() / "docs" / "ops.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  // | `name` | kind | arity | ...
  std::regex row(R"(^\| `([a-z_0-9]+)` \| ([a-z]+) \| (any|[0-9]+) \|)");
  std::map<std::string, std::pair<std::string, std::string>> documented;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      EXPECT_TRUE(documented.emplace(m[1], std::make_pair(m[2].str(), m[3].str())).second) << "listed twice: " << m[1];
    }
  }
  for (const ir::OpInfo& op : ir::allOps()) {
    auto it = documented.find(std::string(op.name));
    if (it == documented.end()) {
      ADD_FAILURE() << "docs/ops.md does not list " << op.name;
      continue;
    }
    EXPECT_EQ(it->second.first, kindName(op.kind)) << op.name;
    EXPECT_EQ(it->second.second, op.arity < 0 ? "any" : std::to_string(op.arity)) << op.name;
    documented.erase(it);
  }
  for (const auto& [name, _] : documented) ADD_FAILURE() << "docs/ops.md lists " << name << ", which Ops.def does not have";
}

}  // namespace

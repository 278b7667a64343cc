// Every chunk of every lit input that parses and verifies round-trips:
// printed, parsed and printed again, it gives the same text (issue: "a
// round-trip test over every example graph and every lit input"). Chunks
// that are negative tests (they hold `expected-error`) must fail instead.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/source_dir.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/error.h"

namespace {

using namespace kiln;

TEST(LitRoundTrip, EveryLitInputPrintsBackTheSame) {
  const auto root = testutil::sourceDir() / "tests" / "lit";
  int files = 0, graphs = 0, negatives = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    // Inputs/ holds deliberately wrong files that tests feed to irdump.
    if (entry.path().extension() != ".kir" || entry.path().parent_path().filename() == "Inputs") continue;
    ++files;
    std::ifstream in(entry.path());
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    const std::string name = entry.path().filename().string();
    for (const ir::SourceChunk& chunk : ir::splitInputFile(text)) {
      const bool negative = chunk.text.find("expected-error") != std::string_view::npos;
      try {
        ir::ParseResult parsed = ir::parseSource(chunk.text, name, chunk.firstLine);
        for (const auto& g : parsed.graphs) ir::verify(*g, &parsed.locations);
        EXPECT_FALSE(negative) << name << ":" << chunk.firstLine << ": a negative test parsed and verified";
        for (const auto& g : parsed.graphs) {
          const std::string once = ir::printGraph(*g);
          auto again = ir::parseGraph(once, "printed.kir");
          ir::verify(*again);
          EXPECT_EQ(ir::printGraph(*again), once) << name << ":" << chunk.firstLine;
          ++graphs;
        }
      } catch (const Error& e) {
        EXPECT_TRUE(negative) << name << ":" << chunk.firstLine << ": " << e.what();
        ++negatives;
      }
    }
  }
  EXPECT_GE(files, 10) << "lit inputs not found under " << root;
  EXPECT_GE(graphs, 30);
  EXPECT_GE(negatives, 10);
}

}  // namespace

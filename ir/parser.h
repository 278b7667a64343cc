// The IR text parser (DESIGN.md §4; the grammar is in docs/ir.md): reads what
// ir::printGraph writes, so that `printGraph(parse(printGraph(g)))` is
// `printGraph(g)`, and hand-written .kir files for lit tests and irdump.
// Errors throw kiln::Error prefixed `file:line:col: ` that say what was
// expected and what was found; no input crashes the parser. The parser checks
// the syntax, names (each defined once, used only where visible) and that a
// graph returns what its header declares; whether ops, types and fusion bodies
// agree with the op registry is the verifier's job (ir/verifier.h), to which
// the parser hands the source location of every node.
//
//   ir::ParseResult r = ir::parseSource(text, "t.kir");
//   for (auto& g : r.graphs) ir::verify(*g, &r.locations);
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// A place in a source file: 1-based line and column (columns count bytes).
struct Location {
  int line = 0;
  int col = 0;
};

/// Where the parser read each node and graph, so that diagnostics on parsed
/// input carry `file:line:col`. Keyed by address: valid for the graphs as
/// parsed. Once a pass has erased nodes, a new node may reuse a freed address,
/// so verify an edited graph without this table.
struct SourceLocations {
  std::string file;
  std::map<const Node*, Location> nodes;     ///< a node's first result name
  std::map<const Graph*, Location> graphs;   ///< `graph`, or a fusion body's `^`
  std::map<const Graph*, Location> returns;  ///< a graph's or a body's `return`

  /// "file:line:col".
  std::string str(Location loc) const;
  /// "file:line:col: " for a parsed node, "" for any other.
  std::string prefix(const Node* node) const;
  /// "file:line:col: " of a parsed graph's `return`, "" for any other graph.
  std::string returnPrefix(const Graph* graph) const;
};

struct ParseResult {
  std::vector<std::unique_ptr<Graph>> graphs;  ///< in the order written
  SourceLocations locations;
};

/// Fusion bodies nest at most this deep; deeper input is an error, not a
/// stack overflow.
inline constexpr int kMaxNesting = 64;

/// Parses every graph in `text` (none is fine: an empty file has no graphs).
/// `filename` prefixes error messages; `firstLine` is the line number of
/// `text`'s first line, for a chunk cut out of a larger file by
/// splitInputFile. Throws kiln::Error on the first error.
ParseResult parseSource(std::string_view text, std::string_view filename, int firstLine = 1);
/// parseSource without the locations.
std::vector<std::unique_ptr<Graph>> parseModule(std::string_view text, std::string_view filename, int firstLine = 1);
/// Parses a text that holds exactly one graph.
std::unique_ptr<Graph> parseGraph(std::string_view text, std::string_view filename, int firstLine = 1);

/// One piece of a file cut at its `// -----` lines (lit's split-input-file
/// convention): a view into the file and the line number its text starts on.
struct SourceChunk {
  std::string_view text;
  int firstLine = 1;
};

/// Cuts `text` at every line that starts (after blanks) with `// -----`; the
/// separator lines belong to no chunk. A file without separators is one chunk.
/// Parse each with parseSource(chunk.text, file, chunk.firstLine) so that
/// errors report lines of the whole file.
std::vector<SourceChunk> splitInputFile(std::string_view text);

}  // namespace kiln::ir

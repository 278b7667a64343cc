// irdump --verify-diagnostics: checks that the errors a .kir file provokes
// are the ones it announces, like mlir-opt's. A line
//
//   // expected-error@+1 {{substring of the message}}
//
// expects an error on the next line (`@+N` N lines below, `@-N` above, no
// `@` the same line) whose message contains the text between the braces.
// Each `// -----` chunk is parsed, verified and run through the pipeline on
// its own; a chunk may hold at most one error (the first stops it).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "ir/parser.h"

namespace kiln::tools {

/// Runs `process` on each chunk of `text` and compares the kiln::Errors it
/// throws with the file's expectations. Returns the number of mismatches,
/// each reported on stderr as `file:line: ...`.
int verifyDiagnostics(std::string_view text, const std::string& file,
                      const std::function<void(const ir::SourceChunk&)>& process);

}  // namespace kiln::tools

// The kiln source tree, for tests that read files from it (Ops.def, docs/,
// fixtures, lit inputs). It comes from CMake (KILN_SOURCE_DIR), not from
// __FILE__, which ccache's base_dir rewriting turns into a relative path.
#pragma once

#include <filesystem>

namespace kiln::testutil {

inline std::filesystem::path sourceDir() { return KILN_SOURCE_DIR; }

}  // namespace kiln::testutil

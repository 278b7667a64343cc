// The GNU build ID of the binary that holds kiln's code generator: a hash
// the linker writes into every ELF file it links (--build-id, on by default
// on Debian and most Linux toolchains), different for every build of
// different code. The disk kernel cache keys on it so that it can look a
// kernel up by its signature, without rendering it first (codegen/disk_cache.h).
#pragma once

#include <string>

namespace kiln::codegen {

/// The build ID, as lowercase hex, of the shared object or executable that
/// contains this function; empty when it has none (a linker without
/// --build-id), in which case callers key on something else.
const std::string& codegenBuildId();

}  // namespace kiln::codegen

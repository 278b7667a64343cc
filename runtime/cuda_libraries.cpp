// The CUDA library probes behind runtime/cuda_libraries.h. Each library is
// one row of a table: its name, override variable, sonames, version entry
// point and how its version number is encoded; no CUDA header is included.
#include "runtime/cuda_libraries.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <mutex>

#include "runtime/dynamic_library.h"
#include "runtime/error.h"

namespace kiln::runtime::cuda {
namespace {

/// How a library's version is asked (its C signature).
enum class Query : uint8_t {
  sizeT,           ///< size_t f(void): cublasLtGetVersion, cudnnGetVersion
  intOut,          ///< int f(int*), 0 on success: ncclGetVersion
  propertyTriple,  ///< int f(int property, int*), MAJOR 0 / MINOR 1 / PATCH 2: cublasGetProperty
};

struct Row {
  Library library;
  const char* name;
  const char* overrideVariable;
  std::vector<std::string> sonames;
  const char* symbol;
  Query query;
  const char* install;  ///< what to install, for the reason
};

// The sonames of this toolkit's major first; a CUDA 12 library also runs on
// a CUDA 13 driver, so the previous major is accepted after it.
const std::array<Row, 4>& rows() {
  static const std::array<Row, 4> table{{
      {Library::cublas,
       "cuBLAS",
       "KILN_CUBLAS_LIBRARY",
       {"libcublas.so.13", "libcublas.so.12"},
       "cublasGetProperty",
       Query::propertyTriple,
       "the CUDA toolkit's cuBLAS (libcublas.so.13)"},
      {Library::cublasLt,
       "cuBLASLt",
       "KILN_CUBLASLT_LIBRARY",
       {"libcublasLt.so.13", "libcublasLt.so.12"},
       "cublasLtGetVersion",
       Query::sizeT,
       "the CUDA toolkit's cuBLAS (libcublasLt.so.13)"},
      {Library::cudnn,
       "cuDNN",
       "KILN_CUDNN_LIBRARY",
       {"libcudnn.so.9"},
       "cudnnGetVersion",
       Query::sizeT,
       "cuDNN 9 for CUDA 13 (libcudnn.so.9)"},
      {Library::nccl,
       "NCCL",
       "KILN_NCCL_LIBRARY",
       {"libnccl.so.2"},
       "ncclGetVersion",
       Query::intOut,
       "NCCL 2 for CUDA 13 (libnccl.so.2)"},
  }};
  return table;
}

const Row& row(Library library) {
  const Row& r = rows().at(static_cast<size_t>(library));
  KILN_ASSERT(r.library == library, "the CUDA library table is out of the enum's order");
  return r;
}

}  // namespace

std::string_view libraryName(Library library) { return row(library).name; }

std::string formatVersion(Library library, int64_t raw) {
  int64_t majorUnit = 10000;
  if (library == Library::cudnn && raw < 90000) majorUnit = 1000;
  if (library == Library::nccl && raw < 10000) majorUnit = 1000;
  return fmt::format("{}.{}.{}", raw / majorUnit, raw % majorUnit / 100, raw % 100);
}

std::vector<std::string> toolkitLibraryFolders() {
  std::vector<std::string> folders;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(variable); home && *home) folders.push_back(std::string(home) + "/lib64");
#ifdef KILN_CUDA_LIBRARY_DIR
  folders.emplace_back(KILN_CUDA_LIBRARY_DIR);
#endif
  folders.emplace_back("/usr/local/cuda/lib64");
  return folders;
}

std::vector<std::string> libraryCandidates(Library library) {
  const Row& r = row(library);
  return LibrarySearch{r.overrideVariable, r.sonames, toolkitLibraryFolders()}.candidates();
}

LibraryProbe probeLibrary(Library library, std::span<const std::string> candidates) {
  const Row& r = row(library);
  LibraryProbe probe;
  probe.library = library;
  const DynamicLibrary loaded = DynamicLibrary::open(candidates);
  if (!loaded.loaded()) {
    probe.reason = fmt::format("{} not found: {}; install {} or set {} to its path", r.name, loaded.error(), r.install,
                               r.overrideVariable);
    return probe;
  }
  probe.path = loaded.name();
  std::string why;
  void* fn = loaded.symbol(r.symbol, &why);
  if (!fn) {
    probe.reason = fmt::format("{} is not {}: {}", loaded.name(), r.name, why);
    return probe;
  }
  int status = 0;
  switch (r.query) {
    case Query::sizeT: probe.rawVersion = static_cast<int64_t>(reinterpret_cast<size_t (*)()>(fn)()); break;
    case Query::intOut: {
      int v = 0;
      status = reinterpret_cast<int (*)(int*)>(fn)(&v);
      probe.rawVersion = v;
      break;
    }
    case Query::propertyTriple: {
      auto property = reinterpret_cast<int (*)(int, int*)>(fn);
      int part[3] = {0, 0, 0};
      for (int p = 0; p < 3 && status == 0; ++p) status = property(p, &part[p]);
      probe.rawVersion = part[0] * 10000 + part[1] * 100 + part[2];
      break;
    }
  }
  if (status != 0 || probe.rawVersion <= 0) {
    probe.reason = fmt::format("{} at {}: {} failed (status {}, version {})", r.name, loaded.name(), r.symbol, status,
                               probe.rawVersion);
    return probe;
  }
  probe.version = formatVersion(library, probe.rawVersion);
  probe.found = true;
  return probe;
}

const LibraryProbe& probeLibrary(Library library) {
  static std::array<LibraryProbe, 4> probes;
  static std::array<std::once_flag, 4> once;
  const auto i = static_cast<size_t>(library);
  std::call_once(once[i], [&] { probes[i] = probeLibrary(library, libraryCandidates(library)); });
  return probes[i];
}

}  // namespace kiln::runtime::cuda

// The CUDA math and communication libraries — cuBLAS, cuBLASLt, cuDNN,
// NCCL — opened at run time (runtime::DynamicLibrary) and asked their
// version: what kiln-env reports, and the loading that kiln's CUDA library
// calls will share. None of them is linked (tests/needed_libraries.sh), so
// kiln starts where they are missing and says why each cannot be used
// (DEVICE_NOTES, "CUDA through dlopen").
//
// Asking a version needs no driver: cuBLASLt and cuDNN load and answer on a
// machine without a GPU (only their handles fail there), so a probe that
// succeeds says the library is present and of that version, not that it
// can run; the CUDA driver's probe (runtime/cuda_driver.h) says that.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime::cuda {

enum class Library : uint8_t { cublas, cublasLt, cudnn, nccl };

/// Every Library, in the order tools report them.
inline constexpr Library kLibraries[] = {Library::cublas, Library::cublasLt, Library::cudnn, Library::nccl};

/// "cuBLAS", "cuBLASLt", "cuDNN", "NCCL".
std::string_view libraryName(Library library);

/// What a library said when probed.
struct LibraryProbe {
  Library library = Library::cublas;
  bool found = false;      ///< loaded and answered its version query
  std::string path;        ///< the candidate that loaded; empty when none did
  int64_t rawVersion = 0;  ///< as the library encodes it (cuDNN 9.19.0: 91900)
  std::string version;     ///< "9.19.0"; empty when not found
  std::string reason;      ///< why it was not found and what to do; empty when found
};

/// "major.minor.patch" from the number `library` reports: cuBLAS(Lt), cuDNN
/// from 9 and NCCL from 2.9 encode major·10000 + minor·100 + patch; cuDNN 8
/// and NCCL before 2.9 major·1000 + minor·100 + patch.
std::string formatVersion(Library library, int64_t rawVersion);

/// The folders of a CUDA toolkit's libraries, tried after the loader's own
/// search: $CUDA_HOME/lib64, $CUDA_PATH/lib64, the lib folder of the
/// toolkit kiln was built with, /usr/local/cuda/lib64.
std::vector<std::string> toolkitLibraryFolders();

/// Where `library` is looked for (runtime::LibrarySearch): its override
/// variable alone when set (KILN_CUBLAS_LIBRARY, KILN_CUBLASLT_LIBRARY,
/// KILN_CUDNN_LIBRARY, KILN_NCCL_LIBRARY); else its sonames (libcublasLt.so.13,
/// then .12; libcudnn.so.9; libnccl.so.2), then those in toolkitLibraryFolders().
std::vector<std::string> libraryCandidates(Library library);

/// Opens the first of `candidates` that loads and asks its version. A
/// fresh probe each call, for tests; probeLibrary(library) probes once.
LibraryProbe probeLibrary(Library library, std::span<const std::string> candidates);

/// The probe of libraryCandidates(library), made on first use.
const LibraryProbe& probeLibrary(Library library);

}  // namespace kiln::runtime::cuda

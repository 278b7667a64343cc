// Which CPU BLAS multiplies f32 on this machine (OpenBLAS or oneDNN), and
// whether bf16 products convert to f32 or run on oneDNN's bf16 matmul,
// each chosen by measurement once per machine (Note [Choosing the BLAS] in
// codegen/blas_choice.cpp), before the CPU target's first matmul.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "codegen/disk_cache.h"
#include "runtime/blas.h"

namespace kiln::codegen {

struct BlasChoice {
  runtime::BlasLibrary library = runtime::BlasLibrary::openblas;
  /// How it was chosen, for the tools: "KILN_BLAS=onednn", "measured on this
  /// machine: OpenBLAS 41.3 ms, oneDNN 38.0 ms", ...
  std::string how;
  /// How bf16 products multiply (Note [Native bf16 products] in
  /// runtime/onednn_matmul.cpp), chosen the same way (KILN_BF16_MATMUL=f32
  /// or onednn forces it), and how.
  runtime::HalfMatmul halfMatmul = runtime::HalfMatmul::viaF32;
  std::string halfHow;
};

/// The process's choice, made on the first call and given to the runtime
/// (runtime::setBlasLibrary): from KILN_BLAS when it is set to openblas or
/// onednn, else (unset or auto) the measurement kept in the disk cache,
/// measured now when there is none. kiln::Error for another KILN_BLAS, or
/// onednn in a build without oneDNN.
const BlasChoice& cpuBlasChoice();

/// The choice for KILN_BLAS value `setting` (nullptr: unset) with `cache`
/// holding measurements under `key` and `measure` timing a library (ms);
/// cpuBlasChoice() with its parts exposed, for tests. Measures only when
/// the cache has no measurement; with the cache off it does not measure
/// (nothing would keep it) and takes OpenBLAS.
BlasChoice chooseBlas(const char* setting, DiskCache& cache, const std::string& key,
                      const std::function<double(runtime::BlasLibrary)>& measure);
/// The same for bf16 products and KILN_BF16_MATMUL's value `setting`.
std::pair<runtime::HalfMatmul, std::string> chooseHalfMatmul(const char* setting, DiskCache& cache,
                                                             const std::string& key,
                                                             const std::function<double(runtime::HalfMatmul)>& measure);

}  // namespace kiln::codegen

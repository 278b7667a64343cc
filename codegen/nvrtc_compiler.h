// NVRTC: compiles the CUDA C that codegen/cuda_renderer.h writes into a cubin
// for one GPU architecture (DESIGN.md §6). No GPU is needed to compile.
//
// This header never includes <nvrtc.h>; codegen/nvrtc_compiler.cpp is built
// with or without the CUDA toolkit (KILN_HAVE_NVRTC), and without it the
// functions below say so instead of failing to link. NVRTC itself is loaded
// at run time, on first use (Note [NVRTC is loaded at run time]).
//
// The compile flags are fixed, because results equal eager ones only with
// them (Note [Eager equals compiled] in ir/scalar_formulas.h): no FMA
// contraction (--fmad=false), IEEE division and square root (-prec-div=true,
// -prec-sqrt=true) and denormals kept (-ftz=false).
#pragma once

#include <span>
#include <string>
#include <vector>

namespace kiln::codegen {

struct CudaBinary {
  std::vector<char> cubin;  ///< an ELF image for cuModuleLoadData
  std::string log;          ///< NVRTC's log (warnings); empty when clean
  double compileMs = 0;     ///< wall time of the NVRTC calls
};

/// Whether this build has NVRTC (KILN_HAVE_NVRTC) and the library loads
/// with every entry point kiln calls; `why` says why not (which files were
/// tried and the loader's reasons, and what to install).
bool nvrtcAvailable(std::string* why = nullptr);

/// "NVRTC 13.0" (the disk cache keys on it); "NVRTC unavailable" without it.
std::string nvrtcVersion();

/// Compiles CUDA C to a cubin for sm_<smArch> (e.g. 80, 90). Flags:
/// --gpu-architecture=sm_XY, --fmad=false, -prec-div=true, -prec-sqrt=true,
/// -ftz=false, --std=c++17. Throws kiln::Error naming the kernel and
/// containing the NVRTC log on failure, or saying that kiln was built without
/// the CUDA toolkit.
CudaBinary compileCudaToCubin(const std::string& source, const std::string& kernelName, int smArch);

namespace detail {
/// Where NVRTC is looked for: $KILN_NVRTC_LIBRARY alone when set; else the
/// soname of the NVRTC kiln was built against, then that file in the
/// build's toolkit. Empty without the toolkit.
std::vector<std::string> nvrtcCandidates();

/// What loading NVRTC from `candidates` gives: the candidate that loaded
/// and its version ("NVRTC 13.0"), or why none is usable. A fresh attempt
/// each call, for tests; kiln itself loads once, from nvrtcCandidates().
struct NvrtcLoad {
  std::string library;
  std::string version;
  std::string error;
};
NvrtcLoad loadNvrtc(std::span<const std::string> candidates);
}  // namespace detail

}  // namespace kiln::codegen

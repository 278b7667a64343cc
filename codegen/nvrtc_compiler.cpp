// NVRTC calls behind codegen/nvrtc_compiler.h. Built in every configuration:
// with KILN_HAVE_NVRTC (the toolkit's <nvrtc.h> was found) it loads NVRTC at
// run time (Note [NVRTC is loaded at run time]); without it every entry
// point reports that kiln was built without the CUDA toolkit, so callers
// (the runtime, kiln-env, the tests) need no #if of their own.
#include "codegen/nvrtc_compiler.h"

#include <fmt/format.h>

#include "runtime/dynamic_library.h"
#include "runtime/error.h"

#if KILN_HAVE_NVRTC
#include <nvrtc.h>

#include <chrono>
#endif

namespace kiln::codegen {

#if KILN_HAVE_NVRTC

// Note [NVRTC is loaded at run time]
// libkiln.so does not link NVRTC: it opens it with dlopen on first use, as
// PyTorch's LazyNVRTC does, so that no CUDA library is a needed library of
// libkiln.so (tests/needed_libraries.sh checks) and kiln starts on machines
// without the toolkit's libraries, saying why CUDA C cannot be compiled
// when asked to. The candidates (runtime::LibrarySearch): $KILN_NVRTC_LIBRARY
// alone when set; else the soname of the NVRTC kiln was built against
// (libnvrtc.so.13), found by the dynamic loader (LD_LIBRARY_PATH,
// ld.so.conf), then the same file in the build's toolkit (KILN_NVRTC_DIR). Only the functions below are resolved;
// their signatures come from that toolkit's <nvrtc.h>, and NVRTC keeps them
// stable within a major version.

namespace {

/// NVRTC's entry points, resolved once.
struct NvrtcApi {
  std::string error;  ///< why NVRTC is unusable; empty when every entry point resolved
  std::string library;
  std::string versionText;  ///< "NVRTC 13.0", asked once when loaded
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) errorString = nullptr;
  decltype(&::nvrtcCreateProgram) createProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) destroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) compileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) getProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) getProgramLog = nullptr;
  decltype(&::nvrtcGetCUBINSize) getCubinSize = nullptr;
  decltype(&::nvrtcGetCUBIN) getCubin = nullptr;
};

template <class F>
void resolve(const runtime::DynamicLibrary& library, const char* name, F& slot, NvrtcApi& api) {
  std::string why;
  slot = reinterpret_cast<F>(library.symbol(name, &why));
  if (!slot && api.error.empty()) api.error = why;
}

/// NVRTC from the first of `candidates` that loads, every entry point
/// resolved and its version asked, or `error` saying what failed.
NvrtcApi loadApi(std::span<const std::string> candidates) {
  NvrtcApi api;
  const runtime::DynamicLibrary library = runtime::DynamicLibrary::open(candidates);
  if (!library.loaded()) {
    api.error = fmt::format(
        "NVRTC could not be loaded ({}); install the CUDA toolkit's NVRTC ({}) or set KILN_NVRTC_LIBRARY to its path",
        library.error(), KILN_NVRTC_SONAME);
    return api;
  }
  api.library = library.name();
  resolve(library, "nvrtcVersion", api.version, api);
  resolve(library, "nvrtcGetErrorString", api.errorString, api);
  resolve(library, "nvrtcCreateProgram", api.createProgram, api);
  resolve(library, "nvrtcDestroyProgram", api.destroyProgram, api);
  resolve(library, "nvrtcCompileProgram", api.compileProgram, api);
  resolve(library, "nvrtcGetProgramLogSize", api.getProgramLogSize, api);
  resolve(library, "nvrtcGetProgramLog", api.getProgramLog, api);
  resolve(library, "nvrtcGetCUBINSize", api.getCubinSize, api);
  resolve(library, "nvrtcGetCUBIN", api.getCubin, api);
  if (!api.error.empty()) {
    api.error = fmt::format("NVRTC at {} is unusable: {}", library.name(), api.error);
    return api;
  }
  int major = 0, minor = 0;
  if (const nvrtcResult r = api.version(&major, &minor); r != NVRTC_SUCCESS)
    api.error = fmt::format("NVRTC at {}: nvrtcVersion failed: {}", library.name(), api.errorString(r));
  else
    api.versionText = fmt::format("NVRTC {}.{}", major, minor);
  return api;
}

const NvrtcApi& nvrtc() {
  static const NvrtcApi api = loadApi(detail::nvrtcCandidates());
  return api;
}

/// Destroys the program on every path out of compileCudaToCubin.
struct ProgramGuard {
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) nvrtc().destroyProgram(&program);
  }
};

std::string programLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtc().getProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');  // size counts the terminating NUL
  if (nvrtc().getProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ' || log.back() == '\r')) log.pop_back();
  return log;
}

void check(nvrtcResult result, const char* call, const std::string& kernelName) {
  KILN_CHECK(result == NVRTC_SUCCESS, "nvrtc: {} failed for kernel {}: {}", call, kernelName,
             nvrtc().errorString(result));
}

}  // namespace

namespace detail {

std::vector<std::string> nvrtcCandidates() {
  return runtime::LibrarySearch{"KILN_NVRTC_LIBRARY", {KILN_NVRTC_SONAME}, {KILN_NVRTC_DIR}}.candidates();
}

NvrtcLoad loadNvrtc(std::span<const std::string> candidates) {
  const NvrtcApi api = loadApi(candidates);
  return {api.library, api.versionText, api.error};
}

}  // namespace detail

bool nvrtcAvailable(std::string* why) {
  const NvrtcApi& api = nvrtc();
  if (why) *why = api.error;
  return api.error.empty();
}

std::string nvrtcVersion() {
  const NvrtcApi& api = nvrtc();
  return api.error.empty() ? api.versionText : "NVRTC unavailable";
}

CudaBinary compileCudaToCubin(const std::string& source, const std::string& kernelName, int smArch) {
  const NvrtcApi& api = nvrtc();
  KILN_CHECK(api.error.empty(), "nvrtc: cannot compile kernel {} for sm_{}: {}", kernelName, smArch, api.error);
  const auto start = std::chrono::steady_clock::now();
  ProgramGuard guard;
  // The program is named after the kernel, so NVRTC's log says `<name>.cu(line): error: ...`.
  const std::string fileName = kernelName + ".cu";
  check(api.createProgram(&guard.program, source.c_str(), fileName.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram",
        kernelName);

  const std::string arch = fmt::format("--gpu-architecture=sm_{}", smArch);
  const char* options[] = {arch.c_str(),      "--fmad=false", "-prec-div=true",
                           "-prec-sqrt=true", "-ftz=false",   "--std=c++17"};
  const nvrtcResult compiled =
      api.compileProgram(guard.program, static_cast<int>(sizeof options / sizeof options[0]), options);
  CudaBinary binary;
  binary.log = programLog(guard.program);
  KILN_CHECK(compiled == NVRTC_SUCCESS, "nvrtc: compiling kernel {} for sm_{} failed ({}):\n{}", kernelName, smArch,
             api.errorString(compiled), binary.log.empty() ? "(no log)" : binary.log);

  size_t size = 0;
  check(api.getCubinSize(guard.program, &size), "nvrtcGetCUBINSize", kernelName);
  // A zero-sized cubin means NVRTC produced PTX only (a virtual compute_XY arch).
  KILN_CHECK(size > 0, "nvrtc: kernel {} for sm_{}: no cubin was produced", kernelName, smArch);
  binary.cubin.resize(size);
  check(api.getCubin(guard.program, binary.cubin.data()), "nvrtcGetCUBIN", kernelName);
  binary.compileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return binary;
}

#else  // !KILN_HAVE_NVRTC

namespace detail {
std::vector<std::string> nvrtcCandidates() { return {}; }
NvrtcLoad loadNvrtc(std::span<const std::string>) {
  return {{}, {}, "kiln was built without the CUDA toolkit (no NVRTC)"};
}
}  // namespace detail

bool nvrtcAvailable(std::string* why) {
  if (why) *why = "kiln was built without the CUDA toolkit (no NVRTC)";
  return false;
}

std::string nvrtcVersion() { return "NVRTC unavailable"; }

CudaBinary compileCudaToCubin(const std::string& source, const std::string& kernelName, int smArch) {
  fail("nvrtc: cannot compile kernel {} for sm_{}: kiln was built without the CUDA toolkit", kernelName, smArch);
}

#endif

}  // namespace kiln::codegen

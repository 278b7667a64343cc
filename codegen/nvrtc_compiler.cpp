// NVRTC calls behind codegen/nvrtc_compiler.h. Built in every configuration:
// with KILN_HAVE_NVRTC it drives the library, without it every entry point
// reports that kiln was built without the CUDA toolkit, so callers (the
// runtime, kiln-env, the tests) need no #if of their own.
#include "codegen/nvrtc_compiler.h"

#include <fmt/format.h>

#include "runtime/error.h"

#if KILN_HAVE_NVRTC
#include <nvrtc.h>

#include <chrono>
#endif

namespace kiln::codegen {

#if KILN_HAVE_NVRTC

namespace {

/// Destroys the program on every path out of compileCudaToCubin.
struct ProgramGuard {
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program) nvrtcDestroyProgram(&program);
  }
};

std::string programLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');  // size counts the terminating NUL
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ' || log.back() == '\r')) log.pop_back();
  return log;
}

void check(nvrtcResult result, const char* call, const std::string& kernelName) {
  KILN_CHECK(result == NVRTC_SUCCESS, "nvrtc: {} failed for kernel {}: {}", call, kernelName,
             nvrtcGetErrorString(result));
}

}  // namespace

// The global ::nvrtcVersion is spelled qualified: ours hides it in this namespace.
bool nvrtcAvailable(std::string* why) {
  int major = 0, minor = 0;
  const nvrtcResult result = ::nvrtcVersion(&major, &minor);
  if (result != NVRTC_SUCCESS) {
    if (why) *why = fmt::format("nvrtcVersion failed: {}", nvrtcGetErrorString(result));
    return false;
  }
  if (why) why->clear();
  return true;
}

std::string nvrtcVersion() {
  int major = 0, minor = 0;
  if (::nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "NVRTC unavailable";
  return fmt::format("NVRTC {}.{}", major, minor);
}

CudaBinary compileCudaToCubin(const std::string& source, const std::string& kernelName, int smArch) {
  const auto start = std::chrono::steady_clock::now();
  ProgramGuard guard;
  // The program is named after the kernel, so NVRTC's log says `<name>.cu(line): error: ...`.
  const std::string fileName = kernelName + ".cu";
  check(nvrtcCreateProgram(&guard.program, source.c_str(), fileName.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram",
        kernelName);

  const std::string arch = fmt::format("--gpu-architecture=sm_{}", smArch);
  const char* options[] = {arch.c_str(),      "--fmad=false", "-prec-div=true",
                           "-prec-sqrt=true", "-ftz=false",   "--std=c++17"};
  const nvrtcResult compiled =
      nvrtcCompileProgram(guard.program, static_cast<int>(sizeof options / sizeof options[0]), options);
  CudaBinary binary;
  binary.log = programLog(guard.program);
  KILN_CHECK(compiled == NVRTC_SUCCESS, "nvrtc: compiling kernel {} for sm_{} failed ({}):\n{}", kernelName, smArch,
             nvrtcGetErrorString(compiled), binary.log.empty() ? "(no log)" : binary.log);

  size_t size = 0;
  check(nvrtcGetCUBINSize(guard.program, &size), "nvrtcGetCUBINSize", kernelName);
  // A zero-sized cubin means NVRTC produced PTX only (a virtual compute_XY arch).
  KILN_CHECK(size > 0, "nvrtc: kernel {} for sm_{}: no cubin was produced", kernelName, smArch);
  binary.cubin.resize(size);
  check(nvrtcGetCUBIN(guard.program, binary.cubin.data()), "nvrtcGetCUBIN", kernelName);
  binary.compileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return binary;
}

#else  // !KILN_HAVE_NVRTC

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

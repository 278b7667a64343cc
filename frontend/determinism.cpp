// setDeterministic and the table of paths that are not deterministic
// (Note [Determinism] in frontend/determinism.h).
#include "frontend/determinism.h"

#include <cstdlib>
#include <string>
#include <string_view>

#include "runtime/determinism.h"
#include "runtime/error.h"

namespace kiln {

void setDeterministic(bool enabled) { runtime::setDeterministic(enabled); }
bool isDeterministic() { return runtime::deterministic(); }

namespace {

/// cuBLAS is bitwise reproducible run to run only with a fixed workspace
/// configuration (NVIDIA's cuBLAS docs, "Results reproducibility").
bool cublasIsDeterministic() {
  const char* config = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  const std::string_view c = config ? config : "";
  return c == ":4096:8" || c == ":16:8";
}

/// An op on a device type that is not deterministic unless
/// `deterministicNow` says it is, and why (with the fix).
struct Nondeterministic {
  ir::Op op;
  DeviceType device;
  bool (*deterministicNow)();
  const char* why;
};

const Nondeterministic kPaths[] = {
    {ir::Op::matmul, DeviceType::cuda, &cublasIsDeterministic,
     "cuBLAS is not deterministic unless CUBLAS_WORKSPACE_CONFIG=:4096:8 (or :16:8) is set in the environment "
     "before the program starts"},
};

}  // namespace

void detail::checkDeterministic(ir::Op op, Device device) {
  if (!runtime::deterministic()) return;
  for (const Nondeterministic& p : kPaths)
    KILN_CHECK(!(p.op == op && p.device == device.type()) || p.deterministicNow(),
               "{}: on {} it has no deterministic implementation as configured, and kiln::setDeterministic(true) is "
               "on: {}",
               ir::opName(op), device.str(), p.why);
}

}  // namespace kiln

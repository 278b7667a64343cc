// kiln-bench --compare-torch: the same workloads measured in PyTorch, in the
// same run. kiln-bench starts tools/kiln-bench/torch_bench.py (installed next
// to it as kiln-bench-torch.py) under KILN_TORCH_PYTHON (default python3)
// once, and after measuring kiln's side of each workload asks it for
// PyTorch's: eager and torch.compile medians, measured the way kiln's are
// (RunPolicy, warm-up excluded, torch.set_num_threads = kiln's pool size).
// The protocol, one JSON object a line over the script's stdin and stdout,
// is described in the script.
//
// PyTorch missing is not an error: TorchSide::start says why it is
// unavailable and kiln-bench prints its own columns only.
#pragma once

#include <sys/types.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/types.h"

namespace kiln::bench {

struct RunPolicy;

/// PyTorch's numbers for one workload.
struct TorchResult {
  std::string error;  ///< why PyTorch could not run it; "" when it ran
  double eagerMs = NAN, eagerFirstMs = NAN;
  int eagerRuns = 0;
  double compiledMs = NAN;  ///< median of the torch.compile'd function's calls
  double compileMs = NAN;   ///< its first call: trace, inductor compile, one run
  int compiledRuns = 0;
  std::string compileError;  ///< why there is no compiled time; "" when there is
};

/// What the header says about the PyTorch side.
struct TorchInfo {
  std::string python;       ///< the interpreter run
  std::string version;      ///< torch.__version__; "" when unavailable
  std::string unavailable;  ///< why there are no PyTorch columns; "" when there are
  int threads = 0;          ///< torch.get_num_threads()
  bool compile = false;     ///< torch.compile is tried
  std::string cpuCapability;  ///< torch.backends.cpu.get_cpu_capability(): "AVX512", "AVX2"; "" when unknown
};

/// One line of flat JSON: an object whose values are strings, numbers,
/// booleans or null (what the script prints). Throws std::runtime_error on
/// anything else.
using FlatJsonValue = std::variant<std::nullptr_t, bool, double, std::string>;
std::map<std::string, FlatJsonValue> parseFlatJson(const std::string& line);

/// The running PyTorch side.
class TorchSide {
 public:
  /// Starts the script and reads its hello. Never throws for a missing
  /// interpreter, script or torch: info().unavailable says what is missing.
  /// On policy.device's kind: cpu or cuda (PyTorch has no OpenCL device:
  /// then the side is unavailable and says so).
  TorchSide(int threads, const RunPolicy& policy, bool compile);
  ~TorchSide();
  TorchSide(const TorchSide&) = delete;
  TorchSide& operator=(const TorchSide&) = delete;

  const TorchInfo& info() const { return info_; }
  bool available() const { return info_.unavailable.empty(); }

  /// Measures workload `name` at input types `inputs` in PyTorch. When the
  /// script dies or answers nonsense the result says so in `error`, lost()
  /// says so too, and the workloads after it get the same error.
  TorchResult run(const std::string& name, const std::vector<ir::TensorType>& inputs);
  /// Why the script stopped answering mid-run; "" while it answers.
  const std::string& lost() const { return lost_; }

 private:
  std::optional<std::string> readLine();
  /// Closes the pipes and waits for the script; says how it ended.
  std::string stop();

  TorchInfo info_;
  std::string lost_;
  pid_t pid_ = -1;
  FILE* toScript_ = nullptr;
  FILE* fromScript_ = nullptr;
};

}  // namespace kiln::bench

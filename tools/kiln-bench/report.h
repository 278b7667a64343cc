// kiln-bench's output: the human table on stdout and the JSON records.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tools/kiln-bench/measure.h"

namespace kiln::bench {

/// What the header line says about the machine.
struct Machine {
  std::string cpu;   ///< model name, "" when unknown
  std::string compiledFor;  ///< what CPU kernels are vectorized for (tools::compiledForText)
  int threads = 0;   ///< threads of runtime::ThreadPool
  std::string blas;  ///< the BLAS and how matmul threads it
  std::string conv;  ///< how CPU convolutions choose their algorithm (Note [Choosing a convolution algorithm])
  std::string device = "cpu";  ///< where the workloads ran: "cpu", or the device and its properties
  struct Copy {
    int64_t bytes = 0;  ///< buffer size
    double gbps = 0;    ///< median over every copy of that size in the run
    int samples = 0;
  };
  std::vector<Copy> copies;
  /// The PyTorch side, with --compare-torch.
  std::optional<TorchInfo> torch;
};

/// Prints the machine line and one row per result.
void printTable(std::ostream& os, const Machine& machine, const std::vector<Result>& results);

/// The results as a JSON array, one object per workload.
std::string toJson(const Machine& machine, const std::vector<Result>& results);

}  // namespace kiln::bench

// What kiln-bench measures: a Workload is a function of tensors with inputs
// to feed it, run two ways, eagerly (the ops called one by one) and through
// kiln::compile. The table is in workloads.cpp; adding a workload is one entry
// there. Most entries name a built-in model of tools/common/models.h, so that
// what `irdump --example NAME` shows is what kiln-bench measures:
//
//   fromModel("bias_relu"),
//
// A workload that needs more than standard-normal f32 inputs (labels, say)
// is written out as a Workload with its own makeInputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frontend/kiln.h"
#include "tools/common/models.h"

namespace kiln::bench {

struct Workload {
  std::string name;
  std::string description;  ///< one line, for --list and the docs
  std::function<std::vector<Tensor>()> makeInputs;
  /// The function measured: called directly for eager, through kiln::compile
  /// for compiled. It may keep state between calls (a training step's
  /// parameters).
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn;
  /// False: eager only, kiln::compile cannot run it yet; its compiled
  /// columns are "-".
  bool compiles = true;
  /// For a workload with state (a training step's parameters and optimizer
  /// state): puts it back to where it started. Called before the first eager
  /// call and before each first compiled call (cold, cached), each of which
  /// then starts from the default generator's state the first eager call
  /// had, so that compiled results can be compared with eager ones. Unset:
  /// no state.
  std::function<void()> resetState;
  /// Floating-point operations of one call (a multiply-add counts two), for
  /// the GFLOP/s columns of compute-bound workloads; 0: not counted.
  double flops = 0;
  /// Items (images) one call processes, for the throughput table's items/s
  /// (a model's batch size); 0: not counted.
  int64_t itemsPerCall = 0;
  /// False: too slow for the default run (a minute or more); run by
  /// `--suite all` (scripts/bench.sh) and by a --filter that matches it.
  bool inDefaultRun = true;
  /// 0: compiled results must equal eager ones bit for bit. Else they may
  /// differ by tolerance·(1 + max |eager|) per element (a workload whose
  /// compiled program runs a fused op the eager ops do not, like attention
  /// written as separate ops: docs/ops.md, "Attention").
  double tolerance = 0;
  /// The types of the inputs makeInputs makes, at which --compare-torch
  /// measures PyTorch (tools/kiln-bench/torch_bench.py, by name).
  std::vector<ir::TensorType> inputTypes;
};

/// Every workload, in the order they run and print.
const std::vector<Workload>& workloads();

/// The workload of the built-in model `name`, at the input types the model
/// declares, with standard-normal inputs, counting `flops` per call. Throws
/// when there is no such model.
Workload fromModel(const std::string& name, double flops = 0);

/// Standard-normal f32 tensors of the given types, from a fixed seed so that
/// every run measures the same data.
std::vector<Tensor> randnInputs(const std::vector<ir::TensorType>& types, uint64_t seed = 42);

}  // namespace kiln::bench

// nn::BatchNorm2d and nn::GroupNorm, as torch.nn's: kiln::batchNorm and
// kiln::groupNorm with a learnable per-channel weight (ones) and bias
// (zeros) when affine, and, for BatchNorm2d with trackRunningStats, the
// buffers running_mean (zeros), running_var (ones) and num_batches_tracked
// (an i64 0-d counter), under PyTorch's names, in the state dict.
#pragma once

#include <cstdint>
#include <optional>

#include "frontend/nn/module.h"

namespace kiln::nn {

class BatchNorm2dImpl : public Module {
 public:
  /// Normalizes [N, numFeatures, H, W] inputs. `momentum` nullopt makes
  /// the running statistics a cumulative average (factor 1 /
  /// num_batches_tracked), as PyTorch's momentum=None; that factor is read
  /// on the host, so under kiln::compile use a number.
  explicit BatchNorm2dImpl(int64_t numFeatures, double eps = 1e-5, std::optional<double> momentum = 0.1,
                           bool affine = true, bool trackRunningStats = true);

  /// Running statistics to zeros and ones, the counter to 0, as PyTorch's reset_running_stats.
  void resetRunningStats();
  /// resetRunningStats, weight to ones and bias to zeros, as PyTorch's reset_parameters.
  void resetParameters();
  /// Training mode (isTraining()) uses and tracks the batch statistics;
  /// evaluation mode uses the running ones, or the batch's without
  /// trackRunningStats, as PyTorch.
  Tensor forward(const Tensor& input) override;

  const int64_t numFeatures;
  const double eps;
  const std::optional<double> momentum;
  Tensor weight;             ///< [numFeatures]; undefined without affine
  Tensor bias;               ///< [numFeatures]; undefined without affine
  Tensor runningMean;        ///< [numFeatures]; undefined without trackRunningStats
  Tensor runningVar;         ///< [numFeatures]; undefined without trackRunningStats
  Tensor numBatchesTracked;  ///< i64 0-d; undefined without trackRunningStats
};
KILN_MODULE(BatchNorm2d);

class GroupNormImpl : public Module {
 public:
  /// numChannels (divisible by numGroups) in numGroups groups.
  GroupNormImpl(int64_t numGroups, int64_t numChannels, double eps = 1e-5, bool affine = true);

  /// weight to ones and bias to zeros, as PyTorch's reset_parameters.
  void resetParameters();
  Tensor forward(const Tensor& input) override;

  const int64_t numGroups, numChannels;
  const double eps;
  Tensor weight;  ///< [numChannels]; undefined without affine
  Tensor bias;    ///< [numChannels]; undefined without affine
};
KILN_MODULE(GroupNorm);

}  // namespace kiln::nn

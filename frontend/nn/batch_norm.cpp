// nn::BatchNorm2d and nn::GroupNorm (frontend/nn/batch_norm.h).
#include "frontend/nn/batch_norm.h"

#include "frontend/autograd/grad_mode.h"
#include "frontend/nn/init.h"
#include "frontend/normalization.h"
#include "frontend/ops.h"
#include "runtime/error.h"

namespace kiln::nn {

BatchNorm2dImpl::BatchNorm2dImpl(int64_t numFeatures_, double eps_, std::optional<double> momentum_, bool affine,
                                 bool trackRunningStats)
    : Module("BatchNorm2d"), numFeatures(numFeatures_), eps(eps_), momentum(momentum_) {
  KILN_CHECK(numFeatures > 0, "BatchNorm2d: expected numFeatures > 0, got {}", numFeatures);
  KILN_CHECK(eps >= 0, "BatchNorm2d: eps must be >= 0, got {}", eps);
  if (affine) {
    weight = registerParameter("weight", ones({numFeatures}));
    bias = registerParameter("bias", zeros({numFeatures}));
  }
  if (trackRunningStats) {
    runningMean = registerBuffer("running_mean", zeros({numFeatures}));
    runningVar = registerBuffer("running_var", ones({numFeatures}));
    numBatchesTracked = registerBuffer("num_batches_tracked", zeros({}, DType::i64));
  }
}

void BatchNorm2dImpl::resetRunningStats() {
  NoGradGuard noGrad;
  if (runningMean.defined()) runningMean.zero_();
  if (runningVar.defined()) runningVar.fill_(1);
  if (numBatchesTracked.defined()) numBatchesTracked.zero_();
}

void BatchNorm2dImpl::resetParameters() {
  resetRunningStats();
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor BatchNorm2dImpl::forward(const Tensor& input) {
  KILN_CHECK(input.defined() && input.dim() == 4, "BatchNorm2d: expected a 4-d input [N, C, H, W], got {}",
             input.defined() ? input.str() : "an undefined tensor");
  double factor = momentum.value_or(0.0);
  if (isTraining() && numBatchesTracked.defined()) {
    {
      NoGradGuard noGrad;
      numBatchesTracked.copy_(numBatchesTracked + 1);  // an integer 1 keeps i64 (add_ takes a double)
    }
    if (!momentum) factor = 1.0 / static_cast<double>(numBatchesTracked.item<int64_t>());
  }
  // Without running statistics the batch's normalize in evaluation mode too.
  const bool useBatchStats = isTraining() || !runningMean.defined();
  return batchNorm(input, runningMean, runningVar, weight, bias, useBatchStats, factor, eps);
}

GroupNormImpl::GroupNormImpl(int64_t numGroups_, int64_t numChannels_, double eps_, bool affine)
    : Module("GroupNorm"), numGroups(numGroups_), numChannels(numChannels_), eps(eps_) {
  KILN_CHECK(numGroups > 0 && numChannels % numGroups == 0,
             "GroupNorm: numChannels must be divisible by numGroups, got numGroups={}, numChannels={}", numGroups,
             numChannels);
  if (affine) {
    weight = registerParameter("weight", ones({numChannels}));
    bias = registerParameter("bias", zeros({numChannels}));
  }
}

void GroupNormImpl::resetParameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor GroupNormImpl::forward(const Tensor& input) { return groupNorm(input, numGroups, weight, bias, eps); }

}  // namespace kiln::nn

// nn::Conv2d and nn::ConvTranspose2d, as torch.nn's: kiln::conv2d /
// kiln::convTranspose2d with parameters "weight" and "bias" of PyTorch's
// shapes and initialization (weight ~ kaimingUniform_(a = √5), bias ~
// U(-1/√fanIn, 1/√fanIn), fanIn from the weight as
// calculateFanInAndFanOut counts it), so state dicts load from PyTorch's.
#pragma once

#include <array>
#include <cstdint>

#include "frontend/conv.h"
#include "frontend/nn/module.h"

namespace kiln::nn {

class Conv2dImpl : public Module {
 public:
  /// weight [outChannels, inChannels / groups, KH, KW], bias [outChannels]
  /// (with `bias`), f32. kiln::Error when groups does not divide both
  /// channel counts.
  Conv2dImpl(int64_t inChannels, int64_t outChannels, std::array<int64_t, 2> kernelSize,
             const Conv2dOptions& options = {}, bool bias = true);
  /// Draws weight and bias anew, as PyTorch's reset_parameters.
  void resetParameters(Generator& generator = defaultGenerator());
  /// input [N, inChannels, H, W] (or [inChannels, H, W]) to [N, outChannels, HO, WO].
  Tensor forward(const Tensor& input) override;

  const int64_t inChannels, outChannels;
  const std::array<int64_t, 2> kernelSize;
  const Conv2dOptions options;
  Tensor weight;  ///< [outChannels, inChannels / groups, KH, KW]
  Tensor bias;    ///< [outChannels]; undefined without bias
};
KILN_MODULE(Conv2d);

class ConvTranspose2dImpl : public Module {
 public:
  /// weight [inChannels, outChannels / groups, KH, KW], bias [outChannels].
  ConvTranspose2dImpl(int64_t inChannels, int64_t outChannels, std::array<int64_t, 2> kernelSize,
                      const ConvTranspose2dOptions& options = {}, bool bias = true);
  void resetParameters(Generator& generator = defaultGenerator());
  Tensor forward(const Tensor& input) override;

  const int64_t inChannels, outChannels;
  const std::array<int64_t, 2> kernelSize;
  const ConvTranspose2dOptions options;
  Tensor weight;  ///< [inChannels, outChannels / groups, KH, KW]
  Tensor bias;    ///< [outChannels]; undefined without bias
};
KILN_MODULE(ConvTranspose2d);

}  // namespace kiln::nn

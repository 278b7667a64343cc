// nn::init: filling tensors with initial values, as torch.nn.init. Each
// function writes into the tensor in place (its handles, in a module and an
// optimizer, see the new values), records no gradient (it runs under a
// NoGradGuard, so parameters that require grad are fine), and returns it.
// Random ones draw once from a kiln::Generator (Philox, DESIGN.md §8; the
// default generator unless one is given): samples are drawn in f32
// (kiln::rand, kiln::randn) and converted to the tensor's dtype.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>

#include "frontend/tensor.h"

namespace kiln::nn::init {

/// The nonlinearity that follows a layer, for calculateGain.
enum class Nonlinearity { linear, conv1d, conv2d, conv3d, sigmoid, tanh, relu, leakyRelu, selu };

/// Whether Kaiming init keeps the variance of the activations (fanIn) or of
/// the gradients (fanOut).
enum class FanMode { fanIn, fanOut };

/// The recommended gain for `nonlinearity`, as torch.nn.init.calculate_gain:
/// 1 for linear, conv and sigmoid; 5/3 for tanh; √2 for relu;
/// √(2 / (1 + slope²)) for leakyRelu with negative slope `param` (0.01 when
/// NaN, PyTorch's None); 3/4 for selu.
double calculateGain(Nonlinearity nonlinearity, double param = std::numeric_limits<double>::quiet_NaN());

/// (fan_in, fan_out) of a weight of at least 2 dims, as PyTorch computes
/// them: size(1) and size(0), each times the product of the sizes after the
/// first two (a convolution's receptive field).
std::pair<int64_t, int64_t> calculateFanInAndFanOut(const Tensor& tensor);

/// Uniform samples in [a, b]: a + (b - a) * u for u = rand() in [0, 1),
/// computed in f32.
const Tensor& uniform_(const Tensor& tensor, double a = 0.0, double b = 1.0, Generator& generator = defaultGenerator());
/// Normal samples: mean + std * randn().
const Tensor& normal_(const Tensor& tensor, double mean = 0.0, double std = 1.0,
                      Generator& generator = defaultGenerator());
const Tensor& constant_(const Tensor& tensor, double value);
const Tensor& zeros_(const Tensor& tensor);
const Tensor& ones_(const Tensor& tensor);

/// He et al. (2015), uniform: U(-bound, bound) with bound = gain * √(3 /
/// fan), gain = calculateGain(nonlinearity, a), fan per `mode`.
const Tensor& kaimingUniform_(const Tensor& tensor, double a = 0.0, FanMode mode = FanMode::fanIn,
                              Nonlinearity nonlinearity = Nonlinearity::leakyRelu,
                              Generator& generator = defaultGenerator());
/// He et al. (2015), normal: N(0, std²) with std = gain / √fan.
const Tensor& kaimingNormal_(const Tensor& tensor, double a = 0.0, FanMode mode = FanMode::fanIn,
                             Nonlinearity nonlinearity = Nonlinearity::leakyRelu,
                             Generator& generator = defaultGenerator());
/// Glorot & Bengio (2010), uniform: U(-a, a) with a = gain * √(6 / (fan_in + fan_out)).
const Tensor& xavierUniform_(const Tensor& tensor, double gain = 1.0, Generator& generator = defaultGenerator());
/// Glorot & Bengio (2010), normal: N(0, std²) with std = gain * √(2 / (fan_in + fan_out)).
const Tensor& xavierNormal_(const Tensor& tensor, double gain = 1.0, Generator& generator = defaultGenerator());

}  // namespace kiln::nn::init

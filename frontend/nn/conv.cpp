// nn::Conv2d and nn::ConvTranspose2d (frontend/nn/conv.h).
#include "frontend/nn/conv.h"

#include <cmath>

#include "frontend/nn/init.h"
#include "runtime/error.h"

namespace kiln::nn {

namespace {
void checkChannels(const char* module, int64_t in, int64_t out, int64_t groups, std::array<int64_t, 2> kernel) {
  KILN_CHECK(in > 0 && out > 0 && groups > 0 && in % groups == 0 && out % groups == 0,
             "{}: expected channel counts divisible by groups, got inChannels={}, outChannels={}, groups={}", module,
             in, out, groups);
  KILN_CHECK(kernel[0] > 0 && kernel[1] > 0, "{}: expected a kernel size > 0, got [{}, {}]", module, kernel[0],
             kernel[1]);
}

/// PyTorch's _ConvNd.reset_parameters.
void reset(Tensor& weight, Tensor& bias, Generator& generator) {
  init::kaimingUniform_(weight, std::sqrt(5.0), init::FanMode::fanIn, init::Nonlinearity::leakyRelu, generator);
  if (bias.defined()) {
    const int64_t fanIn = init::calculateFanInAndFanOut(weight).first;
    const double bound = fanIn > 0 ? 1.0 / std::sqrt(static_cast<double>(fanIn)) : 0.0;
    init::uniform_(bias, -bound, bound, generator);
  }
}
}  // namespace

Conv2dImpl::Conv2dImpl(int64_t in, int64_t out, std::array<int64_t, 2> kernel, const Conv2dOptions& options_,
                       bool bias_)
    : Module("Conv2d"), inChannels(in), outChannels(out), kernelSize(kernel), options(options_) {
  checkChannels("Conv2d", in, out, options.groups, kernel);
  weight = registerParameter("weight", zeros({out, in / options.groups, kernel[0], kernel[1]}));
  if (bias_) bias = registerParameter("bias", zeros({out}));
  resetParameters();
}

void Conv2dImpl::resetParameters(Generator& generator) { reset(weight, bias, generator); }

Tensor Conv2dImpl::forward(const Tensor& input) { return conv2d(input, weight, bias, options); }

ConvTranspose2dImpl::ConvTranspose2dImpl(int64_t in, int64_t out, std::array<int64_t, 2> kernel,
                                         const ConvTranspose2dOptions& options_, bool bias_)
    : Module("ConvTranspose2d"), inChannels(in), outChannels(out), kernelSize(kernel), options(options_) {
  checkChannels("ConvTranspose2d", in, out, options.groups, kernel);
  weight = registerParameter("weight", zeros({in, out / options.groups, kernel[0], kernel[1]}));
  if (bias_) bias = registerParameter("bias", zeros({out}));
  resetParameters();
}

void ConvTranspose2dImpl::resetParameters(Generator& generator) { reset(weight, bias, generator); }

Tensor ConvTranspose2dImpl::forward(const Tensor& input) { return convTranspose2d(input, weight, bias, options); }

}  // namespace kiln::nn

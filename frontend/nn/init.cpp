// nn::init (frontend/nn/init.h), following torch/nn/init.py.
//
// Note [Initialization is eager]
// Initializing a tensor is making state, so it runs eagerly even inside
// kiln::compile (a module made lazily at the first call of a compiled
// function, say): traced, the init's arithmetic on its random draws would
// be a write of the program, and every later call would set the
// parameters back to their first values. As rand and randn inside a traced
// function, it happens once, when the function is traced
// (docs/compile.md, "Limits").
#include "frontend/nn/init.h"

#include <cmath>

#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
#include "frontend/per_call.h"
#include "runtime/error.h"

namespace kiln::nn::init {

namespace {

void checkDefined(const char* what, const Tensor& t) {
  KILN_CHECK(t.defined(), "{}: use of an undefined tensor", what);
  KILN_CHECK(isFloatingPoint(t.dtype()), "{}: expected a floating-point tensor, got {}", what, t.str());
}

int64_t fan(const char* what, const Tensor& t, FanMode mode) {
  KILN_CHECK(t.dim() >= 2, "{}: fan in and fan out need a tensor of at least 2 dims, got {}", what, t.str());
  auto [fanIn, fanOut] = calculateFanInAndFanOut(t);
  return mode == FanMode::fanIn ? fanIn : fanOut;
}

}  // namespace

double calculateGain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::conv1d:
    case Nonlinearity::conv2d:
    case Nonlinearity::conv3d:
    case Nonlinearity::sigmoid: return 1.0;
    case Nonlinearity::tanh: return 5.0 / 3;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leakyRelu: {
      const double slope = std::isnan(param) ? 0.01 : param;
      return std::sqrt(2.0 / (1 + slope * slope));
    }
    case Nonlinearity::selu: return 3.0 / 4;
  }
  fail("calculateGain: unknown nonlinearity {}", static_cast<int>(nonlinearity));
}

std::pair<int64_t, int64_t> calculateFanInAndFanOut(const Tensor& tensor) {
  KILN_CHECK(tensor.defined(), "calculateFanInAndFanOut: use of an undefined tensor");
  KILN_CHECK(tensor.dim() >= 2, "calculateFanInAndFanOut: fan in and fan out need a tensor of at least 2 dims, got {}",
             tensor.str());
  int64_t receptiveField = 1;
  for (int d = 2; d < tensor.dim(); ++d) receptiveField *= tensor.size(d);
  return {tensor.size(1) * receptiveField, tensor.size(0) * receptiveField};
}

const Tensor& uniform_(const Tensor& tensor, double a, double b, Generator& generator) {
  checkDefined("uniform_", tensor);
  KILN_CHECK(a <= b && std::isfinite(a) && std::isfinite(b), "uniform_: expected finite bounds a <= b, got a={}, b={}",
             a, b);
  NoGradGuard noGrad;
  kiln::detail::EagerScope eager;  // Note [Initialization is eager]
  return tensor.copy_(rand(tensor.shape(), generator, tensor.device()) * (b - a) + a);
}

const Tensor& normal_(const Tensor& tensor, double mean, double std, Generator& generator) {
  checkDefined("normal_", tensor);
  KILN_CHECK(std >= 0 && std::isfinite(std) && std::isfinite(mean),
             "normal_: expected a finite mean and a finite std >= 0, got mean={}, std={}", mean, std);
  NoGradGuard noGrad;
  kiln::detail::EagerScope eager;  // Note [Initialization is eager]
  return tensor.copy_(randn(tensor.shape(), generator, tensor.device()) * std + mean);
}

const Tensor& constant_(const Tensor& tensor, double value) {
  KILN_CHECK(tensor.defined(), "constant_: use of an undefined tensor");
  NoGradGuard noGrad;
  kiln::detail::EagerScope eager;  // Note [Initialization is eager]
  return tensor.fill_(value);
}

const Tensor& zeros_(const Tensor& tensor) { return constant_(tensor, 0.0); }
const Tensor& ones_(const Tensor& tensor) { return constant_(tensor, 1.0); }

const Tensor& kaimingUniform_(const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity,
                              Generator& generator) {
  checkDefined("kaimingUniform_", tensor);
  if (tensor.numel() == 0) return tensor;  // PyTorch warns and leaves it
  const double std =
      calculateGain(nonlinearity, a) / std::sqrt(static_cast<double>(fan("kaimingUniform_", tensor, mode)));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(tensor, -bound, bound, generator);
}

const Tensor& kaimingNormal_(const Tensor& tensor, double a, FanMode mode, Nonlinearity nonlinearity,
                             Generator& generator) {
  checkDefined("kaimingNormal_", tensor);
  if (tensor.numel() == 0) return tensor;
  const double std =
      calculateGain(nonlinearity, a) / std::sqrt(static_cast<double>(fan("kaimingNormal_", tensor, mode)));
  return normal_(tensor, 0.0, std, generator);
}

const Tensor& xavierUniform_(const Tensor& tensor, double gain, Generator& generator) {
  checkDefined("xavierUniform_", tensor);
  fan("xavierUniform_", tensor, FanMode::fanIn);  // checks the rank
  if (tensor.numel() == 0) return tensor;
  auto [fanIn, fanOut] = calculateFanInAndFanOut(tensor);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fanIn + fanOut));
  const double a = std::sqrt(3.0) * std;
  return uniform_(tensor, -a, a, generator);
}

const Tensor& xavierNormal_(const Tensor& tensor, double gain, Generator& generator) {
  checkDefined("xavierNormal_", tensor);
  fan("xavierNormal_", tensor, FanMode::fanIn);
  if (tensor.numel() == 0) return tensor;
  auto [fanIn, fanOut] = calculateFanInAndFanOut(tensor);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fanIn + fanOut));
  return normal_(tensor, 0.0, std, generator);
}

}  // namespace kiln::nn::init

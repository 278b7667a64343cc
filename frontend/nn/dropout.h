// nn::Dropout, as torch.nn.Dropout: kiln::dropout in training mode (each
// element zeroed with probability p, the others scaled by 1 / (1 - p)), the
// identity in evaluation mode (`module->eval()`).
#pragma once

#include <optional>

#include "frontend/nn/module.h"

namespace kiln::nn {

class DropoutImpl : public Module {
 public:
  /// Draws from the default generator (kiln::manualSeed seeds it).
  explicit DropoutImpl(double p = 0.5);
  /// Draws from `generator` (a handle: the module shares its state).
  DropoutImpl(double p, Generator generator);

  /// input in evaluation mode (the same tensor); else kiln::dropout(input,
  /// p, true, generator), one draw from the generator per call.
  Tensor forward(const Tensor& input) override;

  const double p;

 private:
  std::optional<Generator> generator_;  ///< none: the default generator
};
KILN_MODULE(Dropout);

}  // namespace kiln::nn

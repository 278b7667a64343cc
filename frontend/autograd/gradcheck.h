// gradcheck: compares the gradients backward() computes with central finite
// differences in f64, as torch.autograd.gradcheck. Every differentiable op
// is tested with it (DESIGN.md §11).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontend/tensor.h"

namespace kiln {

struct GradcheckOptions {
  double eps = 1e-6;   ///< finite-difference step
  double atol = 1e-5;  ///< |analytical - numerical| <= atol + rtol * |numerical|
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  ///< the first mismatch: input, element, output element, both values
  explicit operator bool() const { return ok; }
};

/// Checks d fn(inputs) / d inputs for every input that requires grad (those
/// must be f64): each column of the Jacobian from (fn(x + eps) - fn(x -
/// eps)) / 2 eps, each row from one backward() with a one-hot gradient.
/// `fn` may use views, broadcasting and any dtype inside; its result is read
/// as f64. Cost: two calls per input element and one backward per output
/// element, so keep the tensors small.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace kiln

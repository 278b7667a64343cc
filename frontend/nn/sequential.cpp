// nn::Sequential (frontend/nn/sequential.h).
#include "frontend/nn/sequential.h"

#include <string>

#include "runtime/error.h"

namespace kiln::nn {

void SequentialImpl::push_back(std::shared_ptr<Module> module) {
  KILN_CHECK(module != nullptr, "Sequential: push_back of a null module (an empty holder?)");
  registerModule(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& SequentialImpl::operator[](size_t index) const {
  KILN_CHECK(index < modules_.size(), "Sequential: index {} is out of range for {} modules", index, modules_.size());
  return modules_[index];
}

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (const std::shared_ptr<Module>& m : modules_) x = m->forward(x);
  return x;
}

}  // namespace kiln::nn

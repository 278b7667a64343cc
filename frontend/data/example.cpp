// data::Example's checked accessors (frontend/data/example.h).
#include "frontend/data/example.h"

#include "runtime/error.h"

namespace kiln::data {

const Tensor& Example::data() const {
  KILN_CHECK(!tensors.empty(), "Example::data: the example holds no tensor");
  return tensors[0];
}

const Tensor& Example::target() const {
  KILN_CHECK(tensors.size() >= 2, "Example::target: the example holds {} tensor(s), a target is the second",
             tensors.size());
  return tensors[1];
}

const Tensor& Example::operator[](size_t i) const {
  KILN_CHECK(i < tensors.size(), "Example: tensor {} of an example that holds {}", i, tensors.size());
  return tensors[i];
}

}  // namespace kiln::data

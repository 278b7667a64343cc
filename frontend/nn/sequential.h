// nn::Sequential, as torch.nn.Sequential: modules called in order, each on
// the previous one's output, registered under the names "0", "1", ...
//
//   nn::Sequential mlp(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
//   mlp->push_back(nn::Dropout(0.1));
//   Tensor y = mlp(x);                       // forward through all four
//   Tensor w = mlp->at<nn::LinearImpl>(0).weight;
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <vector>

#include "frontend/nn/module.h"

namespace kiln::nn {

namespace detail {
/// What Sequential takes: a shared_ptr to a module, or a module holder.
template <typename M>
concept SequentialElement = std::convertible_to<std::remove_cvref_t<M>, std::shared_ptr<Module>> ||
    requires(const std::remove_cvref_t<M>& h) {
  { h.ptr() } -> std::convertible_to<std::shared_ptr<Module>>;
};
}  // namespace detail

class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  template <typename... Ms>
  requires(sizeof...(Ms) > 0 && (detail::SequentialElement<Ms> && ...)) explicit SequentialImpl(Ms&&... modules)
      : SequentialImpl() {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  /// Appends `module`, registered under the next index.
  void push_back(std::shared_ptr<Module> module);
  template <typename Holder>
  requires requires(const Holder& h) { h.ptr(); }
  void push_back(const Holder& holder) { push_back(std::shared_ptr<Module>(holder.ptr())); }

  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  /// Module `index`; an error past the end.
  const std::shared_ptr<Module>& operator[](size_t index) const;
  /// Module `index` as an M (`at<nn::LinearImpl>(0)`); an error if it is another type.
  template <typename M>
  M& at(size_t index) const {
    M* m = dynamic_cast<M*>((*this)[index].get());
    KILN_CHECK(m, "Sequential: module {} is a {}, not the type asked for", index, (*this)[index]->name());
    return *m;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

  /// Each module's forward on the previous one's output (the input itself
  /// when empty).
  Tensor forward(const Tensor& input) override;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

KILN_MODULE(Sequential);

}  // namespace kiln::nn

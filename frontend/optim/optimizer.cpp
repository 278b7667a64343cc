// optim::Optimizer (frontend/optim/optimizer.h): groups and their checks.
#include "frontend/optim/optimizer.h"

#include <cmath>
#include <unordered_set>

#include "frontend/autograd/grad_mode.h"
#include "runtime/error.h"

namespace kiln::optim {

Optimizer::Optimizer(const char* name, std::vector<ParamGroup> groups, double defaultLr, double defaultWeightDecay)
    : name_(name), defaultLr_(defaultLr), defaultWeightDecay_(defaultWeightDecay) {
  KILN_CHECK(!groups.empty(), "{}: expected at least one parameter group, got none", name_);
  for (ParamGroup& g : groups) addParamGroup(std::move(g));
}

void Optimizer::addParamGroup(ParamGroup group) {
  const size_t index = groups_.size();
  KILN_CHECK(!group.params.empty(), "{}: parameter group {} is empty (an optimizer needs parameters to update)", name_,
             index);
  if (!group.lr) group.lr = defaultLr_;
  if (!group.weightDecay) group.weightDecay = defaultWeightDecay_;
  KILN_CHECK(*group.lr >= 0 && std::isfinite(*group.lr), "{}: invalid learning rate {} in parameter group {}", name_,
             *group.lr, index);
  KILN_CHECK(*group.weightDecay >= 0 && std::isfinite(*group.weightDecay),
             "{}: invalid weight decay {} in parameter group {}", name_, *group.weightDecay, index);
  std::unordered_set<const TensorImpl*> seen;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) seen.insert(p.impl());
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    KILN_CHECK(p.defined(), "{}: parameter {} of group {} is an undefined tensor", name_, i, index);
    KILN_CHECK(isFloatingPoint(p.dtype()),
               "{}: parameter {} of group {} is {}; only floating-point tensors can be "
               "optimized",
               name_, i, index, p.str());
    KILN_CHECK(p.isLeaf(),
               "{}: parameter {} of group {} ({}) is not a leaf (it was computed by {}); optimize the "
               "leaf it came from",
               name_, i, index, p.str(), p.gradFnName());
    KILN_CHECK(seen.insert(p.impl()).second,
               "{}: parameter {} of group {} ({}) appears twice (in this group or an earlier one)", name_, i, index,
               p.str());
  }
  groups_.push_back(std::move(group));
}

void Optimizer::zeroGrad(bool setToNone) {
  NoGradGuard noGrad;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      if (setToNone)
        p.setGrad({});
      else if (p.grad().defined())
        p.grad().zero_();
    }
}

}  // namespace kiln::optim

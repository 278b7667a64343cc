// optim::Optimizer (frontend/optim/optimizer.h): groups and their checks.
#include "frontend/optim/optimizer.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <optional>
#include <unordered_set>

#include "frontend/autograd/grad_mode.h"
#include "frontend/ops.h"
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

namespace {
Tensor scalarOf(double v) { return full({}, v, DType::f64, Device::cpu()); }
double valueOf(const Tensor& t, const std::string& name, const char* optimizer) {
  KILN_CHECK(t.defined() && t.numel() == 1 && isFloatingPoint(t.dtype()),
             "{}: loadStateDict: {} must be a one-element float tensor, got {}", optimizer, name,
             t.defined() ? t.str() : "an undefined tensor");
  return t.to(DType::f64).item<double>();
}
}  // namespace

nn::OrderedDict<Tensor> Optimizer::stateDict() const {
  nn::OrderedDict<Tensor> d;
  for (size_t g = 0; g < groups_.size(); ++g) {
    d.insert(fmt::format("param_groups.{}.lr", g), scalarOf(*groups_[g].lr));
    d.insert(fmt::format("param_groups.{}.weight_decay", g), scalarOf(*groups_[g].weightDecay));
    if (groups_[g].initialLr) d.insert(fmt::format("param_groups.{}.initial_lr", g), scalarOf(*groups_[g].initialLr));
  }
  size_t i = 0;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      for (auto& [name, t] : paramState(p)) d.insert(fmt::format("state.{}.{}", i, name), t);
      ++i;
    }
  return d;
}

void Optimizer::loadStateDict(const nn::OrderedDict<Tensor>& dict) {
  // Check everything first: a failed load changes nothing.
  std::map<std::string, const Tensor*> left;
  for (const auto& [name, t] : dict.items()) left[name] = &t;
  auto take = [&](const std::string& name) -> const Tensor* {
    auto it = left.find(name);
    if (it == left.end()) return nullptr;
    const Tensor* t = it->second;
    left.erase(it);
    return t;
  };
  std::vector<std::array<std::optional<double>, 3>> groupValues;
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::array<std::optional<double>, 3> v;
    const char* keys[] = {"lr", "weight_decay", "initial_lr"};
    for (int k = 0; k < 3; ++k) {
      const std::string name = fmt::format("param_groups.{}.{}", g, keys[k]);
      if (const Tensor* t = take(name)) v[k] = valueOf(*t, name, name_);
    }
    KILN_CHECK(v[0] && v[1], "{}: loadStateDict: the dict has no lr or weight_decay for parameter group {} (it has {} groups)",
               name_, g, groups_.size());
    groupValues.push_back(v);
  }
  std::vector<std::map<std::string, Tensor>> states;
  size_t i = 0;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      std::map<std::string, Tensor> entries;
      for (const std::string& n : paramStateNames()) {
        const std::string name = fmt::format("state.{}.{}", i, n);
        if (const Tensor* t = take(name)) {
          KILN_CHECK(n == "step" || t->shape() == p.shape(),
                     "{}: loadStateDict: {} is {}, but parameter {} is {}", name_, name, t->str(), i, p.str());
          entries[n] = *t;
        }
      }
      if (!entries.empty() && entries.size() != paramStateNames().size()) {
        std::string missing;
        for (const std::string& n : paramStateNames())
          if (!entries.count(n)) missing += fmt::format("{}state.{}.{}", missing.empty() ? "" : ", ", i, n);
        KILN_CHECK(false, "{}: loadStateDict: parameter {} has part of its state; missing {}", name_, i, missing);
      }
      states.push_back(std::move(entries));
      ++i;
    }
  if (!left.empty()) {
    std::string names;
    for (const auto& [name, t] : left) names += (names.empty() ? "" : ", ") + name;
    KILN_CHECK(false, "{}: loadStateDict: entries this optimizer does not have ({} groups, {} parameters): {}", name_,
               groups_.size(), i, names);
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].lr = groupValues[g][0];
    groups_[g].weightDecay = groupValues[g][1];
    groups_[g].initialLr = groupValues[g][2];
  }
  i = 0;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) setParamState(p, states[i++]);
}

}  // namespace kiln::optim

// nn::Module (frontend/nn/module.h): registration, recursive listing,
// train/eval, to(dtype), state dicts and zeroGrad.
#include "frontend/nn/module.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_set>

#include "frontend/autograd/grad_mode.h"
#include "runtime/device_interface.h"
#include "runtime/error.h"

namespace kiln::nn {

namespace {

// Note [Module tensors stay put]
// A module's tensors are handles shared by the module's members (`weight`),
// its parameter dict, its users (an optimizer holds its parameters) and
// stateDict() values. So nothing that changes a module's tensors may make a
// new tensor: loadStateDict copies into them (copy_, under NoGradGuard), and
// to(dtype) swaps the data inside the same TensorImpl — its dtype, strides
// and storage — keeping its autograd state (requiresGrad, and the gradient,
// converted), as PyTorch's module._apply with param.data = fn(param.data).
// Graphs recorded before the conversion keep their own handles on the old
// storage (Note [Saved tensors]), so they stay valid.
void replaceData(const Tensor& t, const Tensor& value) {
  KILN_ASSERT(!value.requiresGrad() && !t.isTraced() && !value.isTraced());
  TensorImpl* impl = t.impl();
  const TensorImpl* from = value.impl();
  impl->type = from->type;
  impl->strides = from->strides;
  impl->offset = from->offset;
  impl->storage = from->storage;
  impl->isView = false;  // value is a fresh tensor of its own
}

std::string joinKey(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

Tensor Module::forward(const Tensor& input) {
  fail("forward: {} has no forward(Tensor) (got {}); override forward, or call the forward it defines", name_,
       input.str());
}

void Module::checkName(const char* what, const std::string& name) const {
  KILN_CHECK(!name.empty(), "{}: the name is empty", what);
  KILN_CHECK(name.find('.') == std::string::npos,
             "{}: the name \"{}\" contains a '.' (the dot joins a submodule's name to its tensors' names)", what, name);
  const char* kind = parameters_.contains(name) ? "a parameter"
                     : buffers_.contains(name)  ? "a buffer"
                     : children_.contains(name) ? "a submodule"
                                                : nullptr;
  KILN_CHECK(!kind, "{}: {} already has {} named \"{}\"", what, name_, kind, name);
}

Tensor Module::registerParameter(std::string name, Tensor tensor, bool requiresGrad) {
  checkName("registerParameter", name);
  KILN_CHECK(tensor.defined(), "registerParameter: \"{}\" is an undefined tensor", name);
  KILN_CHECK(isFloatingPoint(tensor.dtype()),
             "registerParameter: \"{}\" is {}; parameters are floating-point (register an integer tensor with "
             "registerBuffer)",
             name, tensor.str());
  KILN_CHECK(tensor.isLeaf(),
             "registerParameter: \"{}\" ({}) is not a leaf (it was computed by {}); register detach() of it", name,
             tensor.str(), tensor.gradFnName());
  tensor.setRequiresGrad(requiresGrad);
  return parameters_.insert(std::move(name), std::move(tensor));
}

Tensor Module::registerBuffer(std::string name, Tensor tensor, bool persistent) {
  checkName("registerBuffer", name);
  KILN_CHECK(tensor.defined(), "registerBuffer: \"{}\" is an undefined tensor", name);
  if (!persistent) nonPersistent_.push_back(name);
  return buffers_.insert(std::move(name), std::move(tensor));
}

void Module::addChild(std::string name, std::shared_ptr<Module> module) {
  checkName("registerModule", name);
  KILN_CHECK(module != nullptr, "registerModule: \"{}\" is a null module", name);
  KILN_CHECK(module.get() != this, "registerModule: {} cannot be its own submodule \"{}\"", name_, name);
  children_.insert(std::move(name), std::move(module));
}

void Module::visitTensors(bool buffers, bool recurse, bool dedupe,
                          const std::function<void(const std::string&, const Tensor&, bool)>& fn) const {
  std::unordered_set<const Module*> seenModules;
  std::unordered_set<const TensorImpl*> seenTensors;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& prefix) {
    if (dedupe && !seenModules.insert(&m).second) return;
    for (const auto& [name, t] : buffers ? m.buffers_ : m.parameters_) {
      if (dedupe && !seenTensors.insert(t.impl()).second) continue;
      const bool persistent =
          std::find(m.nonPersistent_.begin(), m.nonPersistent_.end(), name) == m.nonPersistent_.end();
      fn(joinKey(prefix, name), t, persistent);
    }
    if (!recurse) return;
    for (const auto& [name, child] : m.children_) visit(*child, joinKey(prefix, name));
  };
  visit(*this, "");
}

std::vector<Tensor> Module::parameters(bool recurse) const { return namedParameters(recurse).values(); }

OrderedDict<Tensor> Module::namedParameters(bool recurse) const {
  OrderedDict<Tensor> out;
  visitTensors(false, recurse, true, [&](const std::string& key, const Tensor& t, bool) { out.insert(key, t); });
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const { return namedBuffers(recurse).values(); }

OrderedDict<Tensor> Module::namedBuffers(bool recurse) const {
  OrderedDict<Tensor> out;
  visitTensors(true, recurse, true, [&](const std::string& key, const Tensor& t, bool) { out.insert(key, t); });
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const { return children_.values(); }

OrderedDict<std::shared_ptr<Module>> Module::namedChildren() const { return children_; }

void Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& [name, child] : children_) child->apply(fn);
  fn(*this);
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

void Module::replaceTensors(const std::function<bool(const Tensor&)>& applies,
                            const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard noGrad;
  auto replace = [&](const std::string&, const Tensor& t, bool) {
    if (!applies(t)) return;
    const Tensor grad = t.grad();
    const Tensor gradConverted = grad.defined() ? convert(grad) : Tensor();
    replaceData(t, convert(t.detach()));
    if (grad.defined()) t.setGrad(gradConverted);
  };
  visitTensors(false, true, true, replace);
  visitTensors(true, true, true, replace);
}

void Module::to(DType dtype) {
  KILN_CHECK(isFloatingPoint(dtype),
             "to: {} can only be converted to a floating-point dtype (f32, f64, f16, bf16), got {}", name_,
             dtypeName(dtype));
  replaceTensors([&](const Tensor& t) { return isFloatingPoint(t.dtype()) && t.dtype() != dtype; },
                 [&](const Tensor& t) { return t.to(dtype); });
}

void Module::to(Device device) {
  std::string why;
  KILN_CHECK(runtime::isDeviceAvailable(device, &why), "to: cannot move {} to {}: {}", name_, device.str(), why);
  replaceTensors([&](const Tensor& t) { return t.device() != device; }, [&](const Tensor& t) { return t.to(device); });
}

void Module::to(Device device, DType dtype) {
  to(device);
  to(dtype);
}

StateDict Module::stateDict() const {
  StateDict out;
  auto add = [&](const std::string& key, const Tensor& t, bool persistent) {
    if (persistent) out.insert(key, t.detach());
  };
  // Per module its parameters, then its buffers, then its children, as
  // PyTorch's state_dict orders them.
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& prefix) {
    m.visitTensors(false, false, false,
                   [&](const std::string& k, const Tensor& t, bool p) { add(joinKey(prefix, k), t, p); });
    m.visitTensors(true, false, false,
                   [&](const std::string& k, const Tensor& t, bool p) { add(joinKey(prefix, k), t, p); });
    for (const auto& [name, child] : m.children_) visit(*child, joinKey(prefix, name));
  };
  visit(*this, "");
  return out;
}

LoadStateDictResult Module::loadStateDict(const StateDict& dict, bool strict) {
  const StateDict own = stateDict();
  LoadStateDictResult result;
  std::vector<std::string> problems;
  for (const auto& [key, mine] : own) {
    const Tensor* given = dict.find(key);
    if (!given) {
      result.missingKeys.push_back(key);
      if (strict) problems.push_back(fmt::format("missing key \"{}\" (the module's {})", key, mine.str()));
    } else if (!given->defined()) {
      problems.push_back(fmt::format("\"{}\" is an undefined tensor in the state dict", key));
    } else if (given->shape() != mine.shape() || given->dtype() != mine.dtype() || given->device() != mine.device()) {
      problems.push_back(
          fmt::format("\"{}\" is {} in the state dict but {} in the module", key, given->str(), mine.str()));
    }
  }
  for (const auto& [key, given] : dict) {
    if (own.contains(key)) continue;
    result.unexpectedKeys.push_back(key);
    if (strict)
      problems.push_back(
          fmt::format("unexpected key \"{}\" ({}): {} has no parameter or persistent buffer of that name", key,
                      given.str(), name_));
  }
  KILN_CHECK(problems.empty(), "loadStateDict: {}", fmt::join(problems, "; "));
  NoGradGuard noGrad;
  for (const auto& [key, mine] : own) {
    const Tensor* given = dict.find(key);
    if (!given) continue;
    const bool same = given->impl()->storage == mine.impl()->storage &&
                      given->storageOffset() == mine.storageOffset() && given->strides() == mine.strides();
    if (!same) mine.copy_(*given);  // loading a module's own state dict changes nothing
  }
  return result;
}

void Module::zeroGrad(bool setToNone) {
  NoGradGuard noGrad;
  for (const Tensor& p : parameters()) {
    if (setToNone)
      p.setGrad({});
    else if (p.grad().defined())
      p.grad().zero_();
  }
}

}  // namespace kiln::nn

// nn::Module, the base of every layer, as torch.nn.Module and libtorch's
// torch::nn::Module: it registers parameters, buffers and submodules under
// names, lists them recursively with PyTorch's dotted names ("0.weight",
// "encoder.layer.bias"), switches training and evaluation mode, converts its
// floating-point tensors to(dtype), saves and loads a state dict, and zeroes
// gradients. A layer derives from it, registers its tensors in its
// constructor and overrides forward():
//
//   struct NetImpl : kiln::nn::Module {
//     kiln::nn::Linear fc1{nullptr}, fc2{nullptr};
//     NetImpl() : Module("Net") {
//       fc1 = registerModule("fc1", kiln::nn::Linear(4, 8));
//       fc2 = registerModule("fc2", kiln::nn::Linear(8, 2));
//     }
//     kiln::Tensor forward(const kiln::Tensor& x) override { return fc2(kiln::relu(fc1(x))); }
//   };
//   KILN_MODULE(Net);  // Net: a shared handle on a NetImpl, as libtorch's TORCH_MODULE
//
// Modules live in shared_ptrs (a parent and its user share a child), held
// directly or through a ModuleHolder (nn::Linear holds a LinearImpl). The
// tensors a module keeps (its `weight` member, the entry in its parameter
// dict, the stateDict() value) are handles on one TensorImpl, so to(dtype)
// and loadStateDict() change them in place (Note [Module tensors stay put]).
#pragma once

#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/nn/ordered_dict.h"
#include "frontend/tensor.h"

namespace kiln::nn {

/// Parameter and persistent-buffer names to tensors, in registration order
/// (a module's own tensors, then each child's, recursively).
using StateDict = OrderedDict<Tensor>;

/// What loadStateDict() left alone when not strict (as PyTorch's
/// _IncompatibleKeys): keys the module has and the dict lacks, and keys the
/// dict has and the module lacks.
struct LoadStateDictResult {
  std::vector<std::string> missingKeys;
  std::vector<std::string> unexpectedKeys;
};

class Module {
 public:
  /// `name` is the module's type as messages show it ("Linear").
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }

  /// The module's computation on one tensor. The base throws kiln::Error;
  /// a module with other inputs defines its own forward(...) (called
  /// through its ModuleHolder) and cannot sit in a Sequential.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // Registration. Names are non-empty, without '.', and unique among the
  // module's parameters, buffers and submodules; a mistake is a kiln::Error.

  /// Registers `tensor` (a floating-point leaf) as parameter `name` and
  /// marks it setRequiresGrad(requiresGrad). Returns it: the caller keeps a
  /// handle on the same tensor (`weight = registerParameter("weight", ...)`).
  Tensor registerParameter(std::string name, Tensor tensor, bool requiresGrad = true);
  /// Registers a tensor that is state but not a parameter (running
  /// statistics, masks); `persistent` ones are part of the state dict.
  Tensor registerBuffer(std::string name, Tensor tensor, bool persistent = true);
  /// Registers a submodule; its tensors' names get the prefix "name.".
  template <typename M>
  requires std::derived_from<M, Module> std::shared_ptr<M> registerModule(std::string name, std::shared_ptr<M> module) {
    addChild(std::move(name), module);
    return module;
  }
  /// The same for a module held by a ModuleHolder (`nn::Linear(4, 8)`).
  template <typename Holder>
  requires requires(const Holder& h) { h.ptr(); }
  Holder registerModule(std::string name, Holder module) {
    addChild(std::move(name), module.ptr());
    return module;
  }

  // Access, recursive unless `recurse` is false. A tensor (or module)
  // registered under two names is listed once, under the first, as in
  // PyTorch; stateDict() lists every name.

  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<Tensor> namedParameters(bool recurse = true) const;
  /// All buffers, persistent or not.
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<Tensor> namedBuffers(bool recurse = true) const;
  /// The direct submodules, in registration order.
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::shared_ptr<Module>> namedChildren() const;
  /// Calls fn on every submodule, recursively, and then on this module, as
  /// torch.nn.Module.apply (for custom initialization).
  void apply(const std::function<void(Module&)>& fn);

  // Mode and conversion.

  /// Sets training mode on this module and all submodules (Dropout drops
  /// only in training mode). Modules start in training mode.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool isTraining() const { return training_; }

  /// Converts every floating-point parameter and buffer, and their
  /// gradients, to `dtype` (a floating-point dtype), in place: handles on
  /// them stay valid. Integer and bool buffers stay as they are, as in PyTorch.
  void to(DType dtype);
  /// Moves the module to `device`: only the cpu exists yet (kiln has no CUDA
  /// runtime), so any other device is a kiln::Error.
  void to(Device device);
  void to(Device device, DType dtype);

  // State.

  /// Parameter and persistent-buffer names to the tensors, detached (no
  /// gradient) but sharing storage: training changes them too, as in
  /// PyTorch; clone() the values to keep a snapshot.
  StateDict stateDict() const;
  /// Copies the dict's values into this module's tensors (no gradient is
  /// recorded). A value whose shape, dtype or device differs from the
  /// module's tensor is an error (PyTorch converts a dtype; kiln asks for
  /// to() first). With `strict`, a key the dict lacks or the module lacks
  /// is an error too; otherwise they are returned. One error lists every
  /// problem, and the module is left unchanged when it throws.
  LoadStateDictResult loadStateDict(const StateDict& dict, bool strict = true);

  /// Clears the gradient of every parameter (setToNone, as PyTorch's
  /// default) or fills it with zeros.
  void zeroGrad(bool setToNone = true);

 private:
  void addChild(std::string name, std::shared_ptr<Module> module);
  void checkName(const char* what, const std::string& name) const;
  /// Visits (prefix + name, tensor) for the parameters (or buffers) of
  /// this module and its submodules, each module once.
  void visitTensors(bool buffers, bool recurse, bool dedupe,
                    const std::function<void(const std::string&, const Tensor&, bool persistent)>& fn) const;
  /// Replaces the data of every parameter and buffer (here and below) for
  /// which `applies` holds by `convert` of it, and its gradient likewise,
  /// inside the same TensorImpl (to(dtype), to(device)).
  void replaceTensors(const std::function<bool(const Tensor&)>& applies,
                      const std::function<Tensor(const Tensor&)>& convert);

  std::string name_;
  bool training_ = true;
  OrderedDict<Tensor> parameters_;
  OrderedDict<Tensor> buffers_;
  std::vector<std::string> nonPersistent_;
  OrderedDict<std::shared_ptr<Module>> children_;
};

namespace detail {
/// Whether Args is one holder of type H (or derived): a copy, which the
/// variadic constructor must leave to the copy constructor.
template <typename H, typename... Args>
constexpr bool isHolderCopy = false;
template <typename H, typename Arg>
constexpr bool isHolderCopy<H, Arg> = std::derived_from<std::remove_cvref_t<Arg>, H>;
}  // namespace detail

/// A shared handle on a module of type Impl, as libtorch's ModuleHolder:
/// `nn::Linear fc(4, 8)` makes a LinearImpl, `fc(x)` calls its forward,
/// `fc->weight` reaches its members, and copies share the module.
template <typename Impl>
class ModuleHolder {
 public:
  using ContainedType = Impl;

  /// An empty holder, to be assigned later (`nn::Linear fc{nullptr};`).
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit, as libtorch's
  /// A new Impl(args...) (with no arguments: a default-constructed one).
  template <typename... Args>
  requires(std::constructible_from<Impl, Args...> &&
           !detail::isHolderCopy<ModuleHolder, Args...>) explicit ModuleHolder(Args&&... args)
      : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  /// Holds an existing module.
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}  // NOLINT: implicit on purpose

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    KILN_CHECK(impl_, "nn: use of an empty module holder (one made from nullptr and never assigned)");
    return impl_.get();
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool isEmpty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }

  /// The module's operator[] (Sequential's indexing).
  template <typename Arg>
  decltype(auto) operator[](Arg&& arg) const {
    return (*get())[std::forward<Arg>(arg)];
  }

  /// Calls the module's forward with these arguments.
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) const {
    return get()->forward(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::nn

/// Declares `Name`, a ModuleHolder of `NameImpl` (as libtorch's TORCH_MODULE).
#define KILN_MODULE(Name)                                     \
  class Name : public ::kiln::nn::ModuleHolder<Name##Impl> {  \
   public:                                                    \
    using ::kiln::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }

// kiln::autocast, torch.autocast: mixed precision by scope. Inside
//
//   {
//     auto ac = kiln::autocast(kiln::DeviceType::cpu, kiln::DType::bf16);
//     Tensor loss = crossEntropy(model(x), labels);
//   }
//   loss.backward();
//
// ops on tensors of that device type follow PyTorch's autocast lists
// (frontend/amp/autocast_policy.cpp holds them, one line an op): matmul and
// linear run in the scope's dtype, softmax, log_softmax, layer_norm, the
// losses, exp, log, pow, sum and mean in f32, every other op on the dtypes
// it is given, promoted as usual. The casts are ordinary `cast` ops: their
// gradient casts back, so f32 parameters get f32 gradients, and under
// kiln::compile they are traced and fuse with their neighbours.
//
// The state is per thread and per device type (a cpu scope leaves opencl
// tensors alone); scopes nest, and an inner `autocast(type, dtype, false)`
// turns it off. Within the outermost scope the low-precision copy of a leaf
// that requires grad (a parameter) is made once and reused (Note [Autocast
// weight cache] in frontend/amp/autocast.cpp); leaving that scope drops the
// copies. backward() runs with autocast off, as PyTorch's engine does (its
// threads do not inherit the forward's thread-local state).
#pragma once

#include <array>
#include <optional>
#include <string>

#include "runtime/device.h"
#include "runtime/dtype.h"

namespace kiln {

/// An autocast scope: while it lives, ops on tensors of `type` follow the
/// autocast lists with `dtype` (f16 or bf16) as the low precision, or, with
/// `enabled` false, run without autocast. Restores the previous state of
/// `type` when destroyed.
class [[nodiscard]] AutocastGuard {
 public:
  AutocastGuard(DeviceType type, DType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  AutocastGuard(AutocastGuard&&) = delete;
  AutocastGuard& operator=(AutocastGuard&&) = delete;

 private:
  DeviceType type_;
  std::optional<DType> previous_;
};

/// torch.autocast(device_type, dtype, enabled): a scope, as an AutocastGuard.
/// Throws kiln::Error for a dtype other than f16 and bf16.
inline AutocastGuard autocast(DeviceType type, DType dtype, bool enabled = true) { return {type, dtype, enabled}; }

/// Whether autocast is on for `type` on this thread (torch.is_autocast_enabled).
bool isAutocastEnabled(DeviceType type);
/// The low-precision dtype of the innermost enabled scope of `type`, if any.
std::optional<DType> autocastDType(DeviceType type);

namespace detail {

/// The autocast dtype of each device type (none: off), indexed by DeviceType.
using AutocastDTypes = std::array<std::optional<DType>, 3>;
/// This thread's.
AutocastDTypes autocastDTypes();

/// Sets this thread's autocast state to `state` while it lives, as a scope
/// (its weight cache is dropped when it is the outermost); kiln::checkpoint
/// recomputes under the forward's state with one.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastDTypes& state);
  ~AutocastStateGuard();
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  AutocastDTypes saved_;
};

/// Autocast off for every device type while it lives; backward() runs under one.
class AutocastOff : public AutocastStateGuard {
 public:
  AutocastOff() : AutocastStateGuard({}) {}
};

/// The thread's autocast state as text ("" when off everywhere,
/// "cpu:bf16" ...): kiln::compile guards its programs on it.
std::string autocastSignature();

/// Statistics of the weight cache, for tests.
struct AutocastCacheStats {
  int64_t casts = 0;  ///< low-precision copies of leaves made
  int64_t hits = 0;   ///< uses of a copy made before in the same scope
};
AutocastCacheStats autocastCacheStats();

}  // namespace detail
}  // namespace kiln

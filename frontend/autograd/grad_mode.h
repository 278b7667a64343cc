// Whether ops record gradients: on by default, per thread, off inside a
// NoGradGuard (as torch.no_grad()). backward() runs its formulas with it off.
#pragma once

namespace kiln {

/// Whether ops on this thread record their gradient functions.
bool isGradEnabled();

/// Sets the thread's grad mode for its lifetime, then restores it.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

/// No gradients are recorded while it lives (optimizer steps, evaluation).
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

}  // namespace kiln

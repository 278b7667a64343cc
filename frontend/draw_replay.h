// Replayed random draws: how activation checkpointing's recomputation draws
// the same dropout masks and random fills as the forward it repeats.
// Internal to the frontend.
//
// Note [Replayed draws]
// A draw (dropout's, attention's, rand's or randn's) is a pair of 0-d i64
// tensors, the generator's seed and the offset it advanced past (Note
// [Traced draws] in frontend/trace.h): eager tensors, or, inside
// kiln::compile, values of the trace (per-call inputs). Every draw goes
// through detail::draw(). While a DrawRecording lives on the thread, each
// draw is appended to it; while a DrawReplay lives, draws are not made but
// taken from the replayed list in order, without touching any generator. A
// recomputation that replays the forward's list so computes the same masks
// bit for bit, eagerly and traced (where it reads the same per-call values,
// so the compiled program draws once per forward draw, as eagerly), and
// whichever generators the function drew from. It must make the same draws
// as the forward did: DrawReplay::finish() checks the count, and a draw past
// the end or on another device is an error.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontend/tensor.h"

namespace kiln::detail {

using Draw = std::vector<Tensor>;  ///< {seed, offset}

/// A draw for `op` on `device`: replayed, or made by `fresh` (and recorded).
Draw draw(std::string_view op, Device device, const std::function<Draw()>& fresh);

/// Records the thread's draws while alive (nested recordings each see the
/// draws made while they are innermost).
class DrawRecording {
 public:
  DrawRecording();
  ~DrawRecording();
  DrawRecording(const DrawRecording&) = delete;
  DrawRecording& operator=(const DrawRecording&) = delete;
  std::vector<Draw> take() { return std::move(draws_); }

 private:
  friend Draw draw(std::string_view, Device, const std::function<Draw()>&);
  std::vector<Draw> draws_;
  DrawRecording* outer_;
};

/// Replays `draws` in order to the thread's draws while alive; `who` names
/// the replaying function in errors.
class DrawReplay {
 public:
  DrawReplay(const std::vector<Draw>& draws, std::string who);
  ~DrawReplay();
  DrawReplay(const DrawReplay&) = delete;
  DrawReplay& operator=(const DrawReplay&) = delete;
  /// An error unless every replayed draw was taken.
  void finish() const;

 private:
  friend Draw draw(std::string_view, Device, const std::function<Draw()>&);
  const std::vector<Draw>& draws_;
  std::string who_;
  size_t next_ = 0;
  DrawReplay* outer_;
};

}  // namespace kiln::detail

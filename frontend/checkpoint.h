// Training checkpoints: a model's state dict, its optimizer's and LR
// scheduler's state, generators' states, the step and the epoch, in one
// safetensors file (frontend/serialization.h), so that training resumes
// bit for bit in a new process: 10 steps equal 5, save, load, 5 more
// (docs/checkpoints.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frontend/amp/grad_scaler.h"
#include "frontend/nn/module.h"
#include "frontend/optim/lr_scheduler.h"
#include "frontend/optim/optimizer.h"
#include "frontend/random.h"

namespace kiln {

/// What a checkpoint holds; each part may be left out (null, empty).
struct TrainingCheckpoint {
  nn::Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;
  optim::LRScheduler* scheduler = nullptr;
  amp::GradScaler* scaler = nullptr;
  /// Generators by name ("default": kiln::defaultGenerator()); a Generator
  /// is a handle, so loading sets the generator itself.
  std::vector<std::pair<std::string, Generator>> generators = {};
  int64_t step = 0, epoch = 0;
};

/// Writes every part of `c` to `path` (atomically, as kiln::save): names
/// `model.*`, `optimizer.*`, `scheduler.*`, `scaler.*`, `generator.NAME.seed` and
/// `.offset`; step and epoch in the metadata.
void saveCheckpoint(const std::string& path, const TrainingCheckpoint& c);

/// Loads `path` into the parts `c` names (the model with
/// Module::loadStateDict, strict; tensors made on the model's device) and
/// sets c.step and c.epoch. kiln::Error naming the file when it is not a
/// kiln checkpoint, lacks a part `c` asks for, or a part does not fit (the
/// state dicts' own errors); the model is left unchanged when its part
/// does not fit.
void loadCheckpoint(const std::string& path, TrainingCheckpoint& c);

}  // namespace kiln

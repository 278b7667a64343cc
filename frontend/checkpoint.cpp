// saveCheckpoint and loadCheckpoint (frontend/checkpoint.h): the parts'
// state dicts under prefixes in one safetensors file.
#include "frontend/checkpoint.h"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <string_view>

#include "frontend/serialization.h"
#include "runtime/error.h"

namespace kiln {

namespace {
constexpr const char* kFormat = "kiln.training_checkpoint.v1";

void addAll(TensorDict& out, const std::string& prefix, const nn::OrderedDict<Tensor>& part) {
  for (const auto& [name, t] : part.items()) out.insert(prefix + name, t);
}

/// The entries of `all` under `prefix`, the prefix removed.
nn::OrderedDict<Tensor> part(const TensorDict& all, const std::string& prefix) {
  nn::OrderedDict<Tensor> out;
  for (const auto& [name, t] : all.items())
    if (std::string_view(name).starts_with(prefix)) out.insert(name.substr(prefix.size()), t);
  return out;
}

int64_t metadataInt(const SafetensorsFile& f, const std::string& path, const char* key) {
  auto it = f.metadata.find(key);
  KILN_CHECK(it != f.metadata.end(), "loadCheckpoint: {} has no '{}' in its metadata", path, key);
  int64_t v = 0;
  const std::string& text = it->second;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  KILN_CHECK(ec == std::errc() && end == text.data() + text.size(),
             "loadCheckpoint: {}: metadata '{}' is '{}', not an integer", path, key, text);
  return v;
}
}  // namespace

void saveCheckpoint(const std::string& path, const TrainingCheckpoint& c) {
  TensorDict all;
  if (c.model) addAll(all, "model.", c.model->stateDict());
  if (c.optimizer) addAll(all, "optimizer.", c.optimizer->stateDict());
  if (c.scheduler) addAll(all, "scheduler.", c.scheduler->stateDict());
  if (c.scaler) addAll(all, "scaler.", c.scaler->stateDict());
  for (const auto& [name, g] : c.generators) {
    all.insert(fmt::format("generator.{}.seed", name),
               fromVector(std::vector<int64_t>{std::bit_cast<int64_t>(g.seed())}, Shape{}, Device::cpu()));
    all.insert(fmt::format("generator.{}.offset", name),
               fromVector(std::vector<int64_t>{std::bit_cast<int64_t>(g.offset())}, Shape{}, Device::cpu()));
  }
  save(all, path, {{"format", kFormat}, {"step", std::to_string(c.step)}, {"epoch", std::to_string(c.epoch)}});
}

void loadCheckpoint(const std::string& path, TrainingCheckpoint& c) {
  Device device = Device::cpu();
  if (c.model) {
    const nn::StateDict own = c.model->stateDict();
    if (!own.empty()) device = own.items().front().second.device();
  }
  const SafetensorsFile f = load(path, device);
  auto format = f.metadata.find("format");
  KILN_CHECK(format != f.metadata.end() && format->second == kFormat,
             "loadCheckpoint: {} is a safetensors file but not a kiln training checkpoint (its metadata format is "
             "'{}', expected '{}')",
             path, format == f.metadata.end() ? "" : format->second, kFormat);
  auto need = [&](const char* prefix, const char* what) {
    nn::OrderedDict<Tensor> p = part(f.tensors, prefix);
    KILN_CHECK(!p.empty() || std::string_view(prefix) == "optimizer.",
               "loadCheckpoint: {} has no {} state (no '{}*' entries)", path, what, prefix);
    return p;
  };
  const int64_t step = metadataInt(f, path, "step"), epoch = metadataInt(f, path, "epoch");
  std::vector<std::pair<uint64_t, uint64_t>> generatorStates;
  for (const auto& [name, g] : c.generators) {
    const Tensor* seed = f.tensors.find(fmt::format("generator.{}.seed", name));
    const Tensor* offset = f.tensors.find(fmt::format("generator.{}.offset", name));
    KILN_CHECK(seed && offset, "loadCheckpoint: {} has no state for generator '{}'", path, name);
    generatorStates.emplace_back(std::bit_cast<uint64_t>(seed->to(DType::i64).item<int64_t>()),
                                 std::bit_cast<uint64_t>(offset->to(DType::i64).item<int64_t>()));
  }
  if (c.model) c.model->loadStateDict(need("model.", "model"));
  if (c.optimizer) c.optimizer->loadStateDict(need("optimizer.", "optimizer"));
  if (c.scheduler) c.scheduler->loadStateDict(need("scheduler.", "LR scheduler"));
  if (c.scaler) c.scaler->loadStateDict(need("scaler.", "GradScaler"));
  for (size_t i = 0; i < c.generators.size(); ++i) {
    Generator& g = c.generators[i].second;
    g.manualSeed(generatorStates[i].first);
    g.setOffset(generatorStates[i].second);
  }
  c.step = step, c.epoch = epoch;
}

}  // namespace kiln

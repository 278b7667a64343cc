// Trains a small decoder-only transformer to predict the next byte of a text
// (examples/char_transformer.h), with the parts of kiln's training toolkit a
// PyTorch user reaches for (docs/training.md, "Worked example"):
//
// - data::DataLoader over windows of the text, shuffled by a seed, with
//   worker threads, pinned batches and data::DevicePrefetcher on a device;
// - mixed precision (--amp bf16|f16: kiln::autocast; f16 with
//   amp::GradScaler's loss scaling);
// - gradient clipping (nn::utils::clipGradNorm_), AdamW, linear warmup then
//   cosine decay (optim::LinearLR then optim::CosineAnnealingLR);
// - activation checkpointing of every layer (--checkpoint-activations);
// - kiln::compile of the forward and backward (--compile);
// - training checkpoints every --save-every steps, atomic, and --resume,
//   which continues bit for bit where the checkpoint left off;
// - the profiler on a few steps (--profile out.json: a Chrome trace and the
//   table of the slowest ops);
// - a progress line with the step, loss, learning rate, tokens/s and ETA;
// - at the end, the validation loss and a sample of text from the model.
//
//   train_transformer [--text /usr/share/common-licenses/GPL-3] [--device cpu]
//                     [--steps 1000] [--batch 16] [--seq 128] [--stride 1] [--d 128] [--layers 4]
//                     [--amp none|bf16|f16] [--compile] [--checkpoint-activations]
//                     [--save-every 200] [--checkpoint-path train_transformer.safetensors]
//                     [--resume] [--stop-at K] [--profile out.json] [--sample 200]
//
// --stop-at K ends the run after step K as an interruption would (the
// checkpoint is written first); --resume then continues it. The schedule is
// a function of --steps, so a resumed run must be given the same options.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <numbers>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "char_transformer.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string text = "/usr/share/common-licenses/GPL-3";
  std::string device = "cpu";
  int64_t steps = 1000, batch = 16, warmup = 50, stride = 1;
  chargpt::Config model;
  double lr = 1e-3, weightDecay = 0.1, clip = 1.0;
  std::string amp = "none";
  bool compile = false;
  int workers = 2;
  uint64_t seed = 0;
  int64_t saveEvery = 200, stopAt = -1, logEvery = 10;
  std::string checkpointPath = "train_transformer.safetensors";
  bool resume = false;
  std::string profile;
  int64_t sample = 200;
  std::string prompt = "The ";
};

/// "1:02:03" or "2:03".
std::string duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char out[32];
  if (s >= 3600)
    std::snprintf(out, sizeof out, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(out, sizeof out, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return out;
}

/// Linear warmup over `warmup` steps, then cosine decay to 0 at `steps`, as
/// torch's SequentialLR(LinearLR, CosineAnnealingLR): one LRScheduler (so a
/// checkpoint holds it) that hands over at the milestone.
class WarmupCosine : public kiln::optim::LRScheduler {
 public:
  WarmupCosine(kiln::optim::Optimizer& optimizer, int64_t warmup, int64_t steps)
      : LRScheduler(optimizer), warmup_(std::max<int64_t>(warmup, 1)), steps_(std::max(steps, warmup_ + 1)) {
    initialStep();
  }

 private:
  std::vector<double> computeLr() override {
    const int64_t t = lastEpoch_;
    const double factor = t < warmup_ ? static_cast<double>(t + 1) / static_cast<double>(warmup_)
                                      : 0.5 * (1 + std::cos(std::numbers::pi * static_cast<double>(t - warmup_) /
                                                            static_cast<double>(steps_ - warmup_)));
    std::vector<double> lrs;
    for (double base : baseLrs_) lrs.push_back(base * factor);
    return lrs;
  }
  int64_t warmup_, steps_;
};

/// The mean loss over every window of `data`, in eval mode, no grad.
double evaluate(chargpt::CharTransformer& model, const std::shared_ptr<const kiln::data::Dataset>& data,
                const Options& o, kiln::Device device, std::optional<kiln::DType> low) {
  kiln::NoGradGuard noGrad;
  model->eval();
  kiln::data::DataLoader loader(data, {.batchSize = o.batch});
  double sum = 0;
  int64_t n = 0;
  for (kiln::data::Batch& b : kiln::data::DevicePrefetcher(loader, device)) {
    auto ac = kiln::autocast(device.type(), low.value_or(kiln::DType::bf16), low.has_value());
    sum += model->loss(b.data(), b.target()).item() * static_cast<double>(b.data().size(0));
    n += b.data().size(0);
  }
  model->train();
  return sum / static_cast<double>(n);
}

/// `count` bytes continuing `prompt`, each drawn from the model's softmax
/// over the last seq bytes (temperature 0.8) with a seeded engine.
std::string sample(chargpt::CharTransformer& model, const Options& o, kiln::Device device) {
  kiln::NoGradGuard noGrad;
  model->eval();
  std::string text = o.prompt.empty() ? std::string("\n") : o.prompt;
  std::mt19937_64 engine(o.seed);
  for (int64_t i = 0; i < o.sample; ++i) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(text.size()) - o.model.seq);
    std::vector<int64_t> context;
    for (size_t j = static_cast<size_t>(start); j < text.size(); ++j) context.push_back(static_cast<uint8_t>(text[j]));
    const auto t = static_cast<int64_t>(context.size());
    const kiln::Tensor logits = model->forward(kiln::fromVector(context, {1, t}, device));
    const kiln::Tensor probabilities = kiln::softmax(logits.select(1, t - 1).squeeze(0) / 0.8, -1);
    const std::vector<float> p = probabilities.to(kiln::Device::cpu()).toVector<float>();
    std::discrete_distribution<int> next(p.begin(), p.end());
    text += static_cast<char>(next(engine));
  }
  model->train();
  return text;
}

int train(const Options& o) {
  const kiln::Device device = kiln::Device::parse(o.device);
  std::string why;
  if (!kiln::isAvailable(device.type(), &why)) {
    std::fprintf(stderr, "train_transformer: %s cannot be used: %s\n", device.str().c_str(), why.c_str());
    return 2;
  }
  const std::optional<kiln::DType> low =
      o.amp == "none" ? std::nullopt : std::optional<kiln::DType>(*kiln::parseDType(o.amp));

  // The text: 90% to train on, the last 10% to validate.
  auto text = std::make_shared<const std::vector<uint8_t>>(chargpt::loadText(o.text, o.model.seq));
  const size_t split = text->size() * 9 / 10;
  auto trainSet = std::make_shared<chargpt::TextWindows>(text, 0, split, o.model.seq, o.stride);
  auto valSet = std::make_shared<chargpt::TextWindows>(text, split, text->size(), o.model.seq, o.model.seq);
  kiln::data::DataLoader loader(trainSet, {.batchSize = o.batch,
                                           .shuffle = true,
                                           .numWorkers = o.workers,
                                           .pinMemory = !device.isCpu(),
                                           .persistentWorkers = true,
                                           .dropLast = true,
                                           .seed = o.seed});
  const int64_t perEpoch = loader.size();
  KILN_CHECK(perEpoch > 0, "train_transformer: {} training windows of {} bytes make no batch of {}", trainSet->size(),
             o.model.seq + 1, o.batch);

  // The model is made on the CPU from the seed, then moved: the same
  // weights on every device.
  kiln::manualSeed(o.seed);
  chargpt::CharTransformer model(o.model);
  model->to(device);
  int64_t parameterCount = 0;
  for (const kiln::Tensor& p : model->parameters()) parameterCount += p.numel();

  kiln::optim::AdamWOptions adamw;
  adamw.lr = o.lr;
  adamw.weightDecay = o.weightDecay;
  kiln::optim::AdamW optimizer(model->parameters(), adamw);
  WarmupCosine schedule(optimizer, o.warmup, o.steps);
  // Loss scaling only for f16, whose range needs it (bf16 has f32's).
  kiln::amp::GradScaler scaler({.enabled = low == kiln::DType::f16});
  kiln::TrainingCheckpoint state{
      model.ptr().get(), &optimizer, &schedule, &scaler, {{"default", kiln::defaultGenerator()}}};
  if (o.resume) {
    kiln::loadCheckpoint(o.checkpointPath, state);
    std::printf("resumed from %s at step %lld\n", o.checkpointPath.c_str(), static_cast<long long>(state.step));
  }
  std::printf("%s on %s: %lld parameters, %zu bytes of text (%lld batches of %lld x %lld per epoch)%s%s%s\n",
              o.text.c_str(), device.str().c_str(), static_cast<long long>(parameterCount), text->size(),
              static_cast<long long>(perEpoch), static_cast<long long>(o.batch), static_cast<long long>(o.model.seq),
              low ? (", autocast " + o.amp).c_str() : "", o.compile ? ", compiled" : "",
              o.model.checkpoint ? ", activation checkpointing" : "");

  // Forward and backward (compiled with --compile); the loss is multiplied
  // by the scaler's scale, passed in as a tensor so that a compiled program
  // reads it at each call instead of keeping the first one as a constant.
  auto forwardBackward = [&](const kiln::Tensor& x, const kiln::Tensor& y, const kiln::Tensor& scale) {
    optimizer.zeroGrad();
    kiln::Tensor loss;
    {
      auto ac = kiln::autocast(device.type(), low.value_or(kiln::DType::bf16), low.has_value());
      loss = model->loss(x, y);
    }
    (loss * scale).backward();
    return loss;
  };
  std::function<kiln::Tensor(const kiln::Tensor&, const kiln::Tensor&, const kiln::Tensor&)> step = forwardBackward;
  if (o.compile) step = kiln::compile(forwardBackward);

  std::optional<kiln::profiler::Profile> profile;
  if (!o.profile.empty()) {
    // Step 1 compiles (wait), step 2 warms up, steps 3-5 are recorded.
    profile.emplace(kiln::profiler::ProfileOptions{
        .schedule = kiln::profiler::Schedule{.wait = 1, .warmup = 1, .active = 3, .repeat = 1},
        .recordShapes = true,
        .onTraceReady = [&o](kiln::profiler::Profile& p) {
          p.exportChromeTrace(o.profile);
          std::printf("profile: %zu events of %lld steps in %s\n%s", p.events().size(), 3LL, o.profile.c_str(),
                      p.keyAverages().table("self_cpu_time_total", 12).c_str());
        }});
    profile->start();
  }

  const int64_t tokensPerStep = o.batch * o.model.seq;
  const int64_t last = o.stopAt >= 0 ? std::min(o.stopAt, o.steps) : o.steps;
  int64_t stepNo = state.step;
  double lossSum = 0;
  int64_t lossCount = 0;
  auto since = Clock::now();
  int64_t stepsSince = 0;
  double secondsPerStep = 0;  // a running mean, for the ETA
  auto save = [&] {
    state.step = stepNo;
    state.epoch = stepNo / perEpoch;
    kiln::saveCheckpoint(o.checkpointPath, state);
  };
  while (stepNo < last) {
    // The loader's epoch and the batch to start at follow from the step, so
    // a resumed run reads the batches the uninterrupted run reads (and
    // loads none of the ones before).
    loader.setEpoch(static_cast<uint64_t>(stepNo / perEpoch), stepNo % perEpoch);
    for (kiln::data::Batch& batch : kiln::data::DevicePrefetcher(loader, device)) {
      const kiln::Tensor scale = kiln::full({}, scaler.getScale(), kiln::DType::f32, device);
      const kiln::Tensor loss = step(batch.data(), batch.target(), scale);
      scaler.unscale_(optimizer);  // the real gradients, to clip
      kiln::nn::utils::clipGradNorm_(model->parameters(), o.clip);
      scaler.step(optimizer);  // skipped when a gradient is inf or NaN
      scaler.update();
      const double lr = schedule.lastLr()[0];  // this step's
      schedule.step();
      ++stepNo;
      ++stepsSince;
      if (profile) profile->step();

      lossSum += loss.item();
      ++lossCount;
      if (stepNo % o.logEvery == 0 || stepNo == last) {
        const double seconds = std::chrono::duration<double>(Clock::now() - since).count();
        const double now = seconds / static_cast<double>(stepsSince);
        secondsPerStep = secondsPerStep == 0 ? now : 0.7 * secondsPerStep + 0.3 * now;
        std::printf("step %5lld/%lld  loss %.4f  lr %.2e  %8.0f tokens/s  ETA %s\n", static_cast<long long>(stepNo),
                    static_cast<long long>(o.steps), lossSum / static_cast<double>(lossCount), lr,
                    static_cast<double>(tokensPerStep) / now,
                    duration(secondsPerStep * static_cast<double>(o.steps - stepNo)).c_str());
        std::fflush(stdout);
        lossSum = 0;
        lossCount = 0;
        since = Clock::now();
        stepsSince = 0;
      }
      if (o.saveEvery > 0 && stepNo % o.saveEvery == 0) save();
      if (stepNo == last) break;
    }
  }
  if (profile) profile->stop();
  save();
  if (stepNo < o.steps) {
    std::printf("stopped at step %lld; checkpoint %s (--resume continues)\n", static_cast<long long>(stepNo),
                o.checkpointPath.c_str());
    return 0;
  }
  std::printf("validation loss %.6f after %lld steps\n", evaluate(model, valSet, o, device, low),
              static_cast<long long>(stepNo));
  if (o.sample > 0) std::printf("sample:\n%s\n", sample(model, o, device).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train_transformer: a byte-level decoder-only transformer on a text file"};
  Options o;
  app.add_option("--text", o.text, "the corpus: a text file, or `generated`")->capture_default_str();
  app.add_option("--device", o.device, "cpu, opencl[:N] or cuda[:N]")->capture_default_str();
  app.add_option("--steps", o.steps, "optimizer steps in all (the schedule's length)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch", o.batch, "windows per step")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seq", o.model.seq, "context length in bytes")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--stride", o.stride, "bytes between the starts of training windows (1: every offset)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--d", o.model.d, "model width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--heads", o.model.heads, "attention heads")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--layers", o.model.layers, "transformer layers")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--dropout", o.model.dropout, "dropout probability")
      ->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "AdamW's peak learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--warmup", o.warmup, "steps of linear warmup before the cosine decay")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--clip", o.clip, "clip the gradients' norm to this")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--amp", o.amp, "mixed precision: none, bf16 or f16 (f16 with loss scaling)")
      ->check(CLI::IsMember({"none", "bf16", "f16"}))
      ->capture_default_str();
  app.add_flag("--compile", o.compile, "kiln::compile the forward and backward");
  app.add_flag("--checkpoint-activations", o.model.checkpoint, "recompute each layer in backward (kiln::checkpoint)");
  app.add_option("--workers", o.workers, "DataLoader worker threads")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seeds the weights, the shuffle and dropout")->capture_default_str();
  app.add_option("--log-every", o.logEvery, "steps per progress line")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--save-every", o.saveEvery, "steps between checkpoints (0: only at the end)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--checkpoint-path", o.checkpointPath, "the training checkpoint")->capture_default_str();
  app.add_flag("--resume", o.resume, "continue from --checkpoint-path");
  app.add_option("--stop-at", o.stopAt, "stop after this step, as an interruption would")->check(CLI::PositiveNumber);
  app.add_option("--profile", o.profile, "profile steps 3-5 into this Chrome trace");
  app.add_option("--sample", o.sample, "bytes to generate after training (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--prompt", o.prompt, "the text the sample continues")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.resume && !std::filesystem::exists(o.checkpointPath)) {
    std::fprintf(stderr, "train_transformer: --resume: no checkpoint at %s\n", o.checkpointPath.c_str());
    return 2;
  }
  try {
    return train(o);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "train_transformer: %s\n", e.what());
    return 1;
  }
}

// Training checkpoints (frontend/checkpoint.h): an MLP with dropout, AdamW
// and a cosine schedule trained 10 steps equals the same trained 5 steps,
// saved, loaded into freshly made objects in a new process (this test
// binary run again, so nothing is inherited but the file) and trained 5
// more, bit for bit; SGD's momentum too; optimizer and scheduler state
// dicts round-trip and refuse what does not fit; a file that is not a
// checkpoint is named.
#include "frontend/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln-checkpoint-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

/// The run being checkpointed: its model, optimizer and schedule, made from
/// the default generator's current state.
struct TrainingRun {
  nn::Sequential model{nn::Linear(6, 16), nn::ReLU(), nn::Dropout(0.3), nn::Linear(16, 3)};
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LRScheduler> scheduler;
  explicit TrainingRun(bool sgd) {
    if (sgd)
      optimizer = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    else
      optimizer = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-2});
    scheduler = std::make_unique<optim::CosineAnnealingLR>(*optimizer, 10);
  }
  /// Steps [from, to): the batch of step s is made from its own generator,
  /// dropout draws from the default one.
  void train(int from, int to) {
    for (int s = from; s < to; ++s) {
      Generator data(100 + static_cast<uint64_t>(s));
      const Tensor x = randn({8, 6}, data), y = randn({8, 3}, data);
      optimizer->zeroGrad();
      mseLoss(model->forward(x), y).backward();
      optimizer->step();
      scheduler->step();
    }
  }
  TrainingCheckpoint parts(int64_t step) {
    return {model.ptr().get(), optimizer.get(), scheduler.get(), nullptr, {{"default", defaultGenerator()}}, step, 0};
  }
};

/// The child's half: fresh objects from another seed, the checkpoint, 5 steps.
TEST(Checkpoint, ResumeInThisProcess) {
  const char* in = std::getenv("KILN_TEST_CHECKPOINT_IN");
  const char* out = std::getenv("KILN_TEST_CHECKPOINT_OUT");
  const char* kind = std::getenv("KILN_TEST_CHECKPOINT_SGD");
  if (!in || !out || !kind) GTEST_SKIP() << "the second process of ResumesBitForBitInANewProcess (run by it)";
  manualSeed(999);  // other weights and another dropout stream, until the checkpoint says otherwise
  TrainingRun run(std::string(kind) == "1");
  TrainingCheckpoint c = run.parts(0);
  loadCheckpoint(in, c);
  ASSERT_EQ(c.step, 5);
  run.train(5, 10);
  save(run.model->stateDict(), out);
}

void expectResumesBitForBit(bool sgd) {
  SCOPED_TRACE(sgd ? "SGD with momentum" : "AdamW");
  manualSeed(1);
  TrainingRun whole(sgd);
  whole.train(0, 10);
  manualSeed(1);
  TrainingRun half(sgd);
  half.train(0, 5);
  const fs::path checkpoint = scratch(sgd ? "sgd.safetensors" : "adamw.safetensors");
  const fs::path resumed = scratch(sgd ? "sgd-resumed.safetensors" : "adamw-resumed.safetensors");
  saveCheckpoint(checkpoint.string(), half.parts(5));
  const std::string command = "KILN_TEST_CHECKPOINT_IN=" + checkpoint.string() +
                              " KILN_TEST_CHECKPOINT_OUT=" + resumed.string() + " KILN_TEST_CHECKPOINT_SGD=" +
                              (sgd ? "1" : "0") +
                              " " + fs::read_symlink("/proc/self/exe").string() +
                              " --gtest_filter=Checkpoint.ResumeInThisProcess > " + resumed.string() +
                              ".log 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << "the second process failed; its output is in " << resumed << ".log";
  const SafetensorsFile f = load(resumed.string());
  const nn::StateDict want = whole.model->stateDict();
  ASSERT_EQ(f.tensors.size(), want.size());
  for (const auto& [name, t] : want.items()) {
    const std::vector<float> a = t.toVector(), b = f.tensors.at(name).toVector();
    EXPECT_EQ(a, b) << name << " differs from 10 uninterrupted steps";
  }
  // And the 5-step state is not already the 10-step one (the test could not fail).
  EXPECT_NE(half.model->stateDict().at("0.weight").toVector(), want.at("0.weight").toVector());
}

TEST(Checkpoint, ResumesBitForBitInANewProcess) {
  expectResumesBitForBit(false);
  expectResumesBitForBit(true);
}

TEST(Checkpoint, OptimizerAndSchedulerStateDictsRoundTripAndRefuseWhatDoesNotFit) {
  manualSeed(2);
  TrainingRun a(false);
  a.train(0, 3);
  const nn::OrderedDict<Tensor> state = a.optimizer->stateDict();
  EXPECT_TRUE(state.contains("param_groups.0.lr"));
  EXPECT_TRUE(state.contains("state.0.exp_avg"));
  EXPECT_EQ(state.at("state.3.step").item<int64_t>(), 3);
  manualSeed(3);
  TrainingRun b(false);
  b.optimizer->loadStateDict(state);
  b.scheduler->loadStateDict(a.scheduler->stateDict());
  EXPECT_EQ(b.scheduler->lastEpoch(), 3);
  EXPECT_EQ(b.scheduler->lastLr(), a.scheduler->lastLr());
  EXPECT_EQ(*b.optimizer->paramGroups()[0].lr, *a.optimizer->paramGroups()[0].lr);
  const auto* adam = dynamic_cast<const optim::AdamW*>(b.optimizer.get());
  ASSERT_NE(adam, nullptr);
  const optim::AdamParamState* s = adam->state(b.model->parameters()[0]);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->step, 3);
  EXPECT_EQ(s->expAvg.toVector(), state.at("state.0.exp_avg").toVector());
  // Wrong shape, unknown entry, partial state: named, nothing changed.
  nn::OrderedDict<Tensor> bad = state;
  bad.insertOrAssign("state.0.exp_avg", zeros({2, 2}));
  std::string e = errorOf([&] { b.optimizer->loadStateDict(bad); });
  EXPECT_NE(e.find("state.0.exp_avg is f32[2,2]@cpu, but parameter 0 is f32[16,6]@cpu"), std::string::npos) << e;
  bad = state;
  bad.insert("state.9.exp_avg", zeros({1}));
  e = errorOf([&] { b.optimizer->loadStateDict(bad); });
  EXPECT_NE(e.find("entries this optimizer does not have (1 groups, 4 parameters): state.9.exp_avg"), std::string::npos)
      << e;
  nn::OrderedDict<Tensor> partial;
  for (const auto& [name, t] : state.items())
    if (name != "state.1.exp_avg_sq") partial.insert(name, t);
  e = errorOf([&] { b.optimizer->loadStateDict(partial); });
  EXPECT_NE(e.find("parameter 1 has part of its state; missing state.1.exp_avg_sq"), std::string::npos) << e;
  EXPECT_EQ(s->expAvg.toVector(), state.at("state.0.exp_avg").toVector()) << "a failed load changed the state";
  nn::OrderedDict<Tensor> schedulerState;
  schedulerState.insert("last_epoch", zeros({}));
  e = errorOf([&] { b.scheduler->loadStateDict(schedulerState); });
  EXPECT_NE(e.find("expected last_epoch and base_lrs/last_lr for 1 groups"), std::string::npos) << e;
}

TEST(Checkpoint, AFileThatIsNotACheckpointIsNamed) {
  const fs::path p = scratch("plain.safetensors");
  TensorDict d;
  d.insert("w", zeros({2}));
  save(d, p.string());
  manualSeed(4);
  TrainingRun run(false);
  TrainingCheckpoint c = run.parts(0);
  const std::string e = errorOf([&] { loadCheckpoint(p.string(), c); });
  EXPECT_NE(e.find(p.string() + " is a safetensors file but not a kiln training checkpoint"), std::string::npos) << e;
}

TEST(Checkpoint, ABadStepOrAMissingPartIsNamed) {
  manualSeed(5);
  TrainingRun run(false);
  const fs::path p = scratch("bad-step.safetensors");
  TensorDict d = run.model->stateDict();
  save(d, p.string(), {{"format", "kiln.training_checkpoint.v1"}, {"step", "five"}, {"epoch", "0"}});
  TrainingCheckpoint c{run.model.ptr().get()};
  std::string e = errorOf([&] { loadCheckpoint(p.string(), c); });
  EXPECT_NE(e.find(p.string() + ": metadata 'step' is 'five', not an integer"), std::string::npos) << e;
  // The file has the model only: asking for a generator or an optimizer names what is missing.
  TrainingCheckpoint modelOnly{run.model.ptr().get()};
  saveCheckpoint(p.string(), modelOnly);
  c.generators = {{"data", Generator(1)}};
  e = errorOf([&] { loadCheckpoint(p.string(), c); });
  EXPECT_NE(e.find(p.string() + " has no state for generator 'data'"), std::string::npos) << e;
  TrainingCheckpoint withScheduler{run.model.ptr().get(), nullptr, run.scheduler.get()};
  e = errorOf([&] { loadCheckpoint(p.string(), withScheduler); });
  EXPECT_NE(e.find(p.string() + " has no LR scheduler state (no 'scheduler.*' entries)"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln

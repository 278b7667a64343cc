// The pass table and the PassManager of passes/pass_manager.h.
#include "passes/pass_manager.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/passes.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/profiler_events.h"

namespace kiln::passes {

namespace {
// One row per pass: flag, one-line summary, entry point.
constexpr PassInfo kPasses[] = {
    {"canonicalize", "apply local rewrite rules (x * 1 -> x, neg(neg(x)) -> x, ...) to a fixed point", runCanonicalize},
    {"fold-constants", "evaluate elementwise ops whose inputs are all constants", runFoldConstants},
    {"fold-batchnorm", "fold a per-channel affine after a conv2d (eval batch norm) into its weight and a bias",
     runFoldBatchNorm},
    {"cse", "merge nodes that compute the same value (structural hashing)", runCse},
    {"dce", "remove nodes whose results are never used", runDce},
    {"fuse-attention", "replace softmax(q k^T scale + mask) v, written as separate ops, by one attention op",
     runFuseAttention},
    {"fuse-elementwise", "group chains of elementwise ops over one iteration domain into fusion nodes",
     runFuseElementwise},
    {"fuse-reductions", "fuse row reductions with their elementwise producers and consumers, one kernel per row",
     runFuseReductions},
};
}  // namespace

std::span<const PassInfo> allPasses() { return kPasses; }

const PassInfo* findPass(std::string_view name) {
  for (const PassInfo& p : kPasses)
    if (p.name == name) return &p;
  return nullptr;
}

void PassContext::remark(std::string message) {
  if (pass_.starts_with("fuse-"))
    KILN_LOG_TO(fusion, "kiln::fusion: {}: {}", pass_, message);
  else
    KILN_LOG_TO(passes, "kiln::passes: {}: {}", pass_, message);
  remarks_.push_back({pass_, std::move(message)});
}

namespace {
bool verifyEachFromEnvironment() {
  const char* env = std::getenv("KILN_VERIFY_EACH");
  return env && std::string_view(env) == "1";
}
}  // namespace

PassManager::PassManager(std::string_view pipeline) : verifyEach_(verifyEachFromEnvironment()) {
  while (!pipeline.empty()) {
    size_t comma = pipeline.find(',');
    std::string_view name = pipeline.substr(0, comma);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) {
      const PassInfo* pass = findPass(name);
      if (!pass) {
        std::string known;
        for (const PassInfo& p : kPasses) known += (known.empty() ? "" : ", ") + std::string(p.name);
        fail("pass pipeline: unknown pass '{}'; known passes: {}", name, known);
      }
      passes_.push_back(pass);
    }
    if (comma == std::string_view::npos) break;
    pipeline.remove_prefix(comma + 1);
  }
}

void PassManager::run(ir::Graph& graph) {
  if (!passes_.empty()) KILN_LOG_TO(passes, "kiln::passes: before the pipeline:\n{}", ir::printGraph(graph));
  for (const PassInfo* pass : passes_) {
    if (hook_) hook_(pass->name, graph, /*after=*/false, /*changed=*/false);
    PassContext context{std::string(pass->name)};
    profiler::RecordFunction range("pass", pass->name);
    const auto start = std::chrono::steady_clock::now();
    bool changed = pass->run(graph, context);
    if (verifyEach_) {
      try {
        ir::verify(graph);
      } catch (const Error& e) {
        KILN_ASSERT(false, "pass {} left an invalid graph: {}", pass->name, e.what());
      }
    }
    timings_.push_back({std::string(pass->name),
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
                        changed});
    auto& stats = stats_[std::string(pass->name)];
    for (const auto& [key, n] : context.stats()) stats[key] += n;
    remarks_.insert(remarks_.end(), context.remarks().begin(), context.remarks().end());
    // Like --print-ir-after-change: the graph only where the pass changed it.
    if (changed)
      KILN_LOG_TO(passes, "kiln::passes: after {}:\n{}", pass->name, ir::printGraph(graph));
    else
      KILN_LOG_TO(passes, "kiln::passes: {} changed nothing", pass->name);
    if (hook_) hook_(pass->name, graph, /*after=*/true, changed);
  }
}

}  // namespace kiln::passes

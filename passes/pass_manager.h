// The PassManager: named passes, pipelines from strings, instrumentation
// (print before/after each pass), statistics and fusion remarks (DESIGN.md §5).
//
// Every pass is one file in passes/ named after its flag and one row of the
// table in passes/pass_manager.cpp: its name, its one-line summary (printed
// by `irdump --help` and listed in docs/passes.md) and its entry point.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

/// Why a pass did or did not do something, for `irdump --remarks`.
struct Remark {
  std::string pass;
  std::string message;
};

/// What a running pass can report to.
class PassContext {
 public:
  explicit PassContext(std::string pass) : pass_(std::move(pass)) {}
  /// Records a decision; KILN_LOG=fusion prints those of the fusion passes
  /// as they are made, KILN_LOG=passes those of the others.
  void remark(std::string message);
  void count(const std::string& statistic, int64_t n = 1) { stats_[statistic] += n; }
  const std::vector<Remark>& remarks() const { return remarks_; }
  const std::map<std::string, int64_t>& stats() const { return stats_; }

 private:
  std::string pass_;
  std::vector<Remark> remarks_;
  std::map<std::string, int64_t> stats_;
};

/// A pass rewrites a graph and returns whether it changed anything.
using PassFn = bool (*)(ir::Graph& graph, PassContext& context);

struct PassInfo {
  std::string_view name;
  std::string_view summary;
  PassFn run;
};

/// Every registered pass, in the order `irdump --help` lists them.
std::span<const PassInfo> allPasses();
/// The pass called `name`, or nullptr.
const PassInfo* findPass(std::string_view name);

class PassManager {
 public:
  /// Parses "canonicalize,cse,dce"; throws kiln::Error naming an unknown
  /// pass and listing the known ones. An empty pipeline runs nothing.
  explicit PassManager(std::string_view pipeline);

  /// Verifies the graph after every pass (ir::verify); a pass that leaves an
  /// invalid graph is a kiln bug and throws kiln::InternalError naming it.
  /// On by default when the environment has KILN_VERIFY_EACH=1, as every
  /// test run does (DESIGN.md §5).
  void setVerifyEach(bool on) { verifyEach_ = on; }

  /// Called before and after each pass: (pass name, graph, after, changed).
  using Hook = std::function<void(std::string_view pass, const ir::Graph& graph, bool after, bool changed)>;
  void setHook(Hook hook) { hook_ = std::move(hook); }

  /// Runs the pipeline on `graph`.
  void run(ir::Graph& graph);

  std::span<const PassInfo* const> passes() const { return passes_; }
  /// Statistics of every run so far, by pass then statistic.
  const std::map<std::string, std::map<std::string, int64_t>>& statistics() const { return stats_; }
  const std::vector<Remark>& remarks() const { return remarks_; }

  /// One entry per pass run, in order: wall time and whether it changed the graph.
  struct Timing {
    std::string pass;
    double ms = 0;
    bool changed = false;
  };
  const std::vector<Timing>& timings() const { return timings_; }

 private:
  std::vector<const PassInfo*> passes_;
  Hook hook_;
  bool verifyEach_;
  std::map<std::string, std::map<std::string, int64_t>> stats_;
  std::vector<Remark> remarks_;
  std::vector<Timing> timings_;
};

}  // namespace kiln::passes

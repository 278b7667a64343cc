// kiln-bench-dist's command line: what the user asks for, and the hidden
// --dist-worker mode in which the tool runs as one rank of its own job.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::bench::dist {

struct Options {
  std::vector<int> nprocs{2, 4};          ///< --nprocs: all-reduce process counts
  std::vector<int> ddpNprocs{1, 2, 4};    ///< --ddp-nprocs: DDP process counts (empty: no DDP)
  int64_t minBytes = 1024;                ///< --min-bytes: the first all-reduce size
  int64_t maxBytes = int64_t{256} << 20;  ///< --max-bytes: the last (sizes go up by 4x)
  int iters = 0;                          ///< --iters: timed calls per size and side; 0: by size
  int warmup = 3;                         ///< --warmup: untimed calls before them
  int ddpSteps = 20;                      ///< --ddp-steps: timed DDP steps
  std::string mlp = "small";              ///< --mlp: small (mlp_train_step_small's sizes) or full
  bool torch = true;                      ///< --no-torch turns torch.distributed off
  int timeoutS = 1800;                    ///< --timeout: bound of each job of ranks, seconds
  int callTimeoutS = 120;                 ///< --call-timeout: each collective's and the rendezvous's, seconds
  std::optional<std::string> jsonPath;    ///< --json
  bool help = false;

  // The hidden worker mode (set by the tool for its own ranks).
  std::string workerMode;  ///< --dist-worker: "allreduce" or "ddp"; empty: the launcher
  std::string resultPath;  ///< --result: where rank 0 writes its JSON
};

/// A bad command line; main prints it and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses argv (without argv[0]). Throws UsageError.
Options parseOptions(const std::vector<std::string>& args);

/// The text of --help.
std::string usage();

/// The all-reduce sizes in bytes: minBytes, 4x, ... up to maxBytes (and
/// maxBytes itself when the steps miss it), each a multiple of 4 (f32).
std::vector<int64_t> sizes(const Options& options);

/// Timed calls for one size: --iters, or 20 up to 4 MiB, 10 up to 64 MiB,
/// 5 above (every rank computes the same number).
int itersFor(const Options& options, int64_t bytes);

/// The command line a rank runs: this executable in worker mode with the
/// options that matter to it.
std::vector<std::string> workerCommand(const Options& options, const std::string& self, const std::string& mode,
                                       const std::string& resultPath);

}  // namespace kiln::bench::dist

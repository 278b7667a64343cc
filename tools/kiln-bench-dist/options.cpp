// kiln-bench-dist's command line, parsed by CLI11 as kiln-bench's is:
// `--flag value` or `--flag=value`; sizes accept KiB/MiB suffixes.
#include "tools/kiln-bench-dist/options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

namespace kiln::bench::dist {

std::string usage() {
  return "usage: kiln-bench-dist [--nprocs LIST] [--ddp-nprocs LIST] [--min-bytes SIZE] [--max-bytes SIZE]\n"
         "                       [--iters N] [--warmup N] [--ddp-steps N] [--mlp small|full] [--no-torch]\n"
         "                       [--timeout S] [--call-timeout S] [--json FILE] [--help]\n"
         "\n"
         "Starts its own ranks on 127.0.0.1 (a TCP store it serves, Gloo over loopback) and measures:\n"
         "all-reduce bus bandwidth of kiln's gloo process group (KILN_DIST_DEBUG on and off) against\n"
         "Gloo's own algorithm loop and gloo::allreduce in the same processes, and torch.distributed\n"
         "(gloo) when python3 can import torch; then the DDP training step of kiln-bench's MLP with\n"
         "SGD, and at 2 or more processes its compute and its communication measured alone.\n"
         "See docs/benchmarks.md, \"Several processes\".\n"
         "\n"
         "  --nprocs LIST      all-reduce at these process counts (default 2,4; 0 for none)\n"
         "  --ddp-nprocs LIST  DDP at these process counts (default 1,2,4; 0 for none)\n"
         "  --min-bytes SIZE   first all-reduce size, f32 (default 1KiB)\n"
         "  --max-bytes SIZE   last all-reduce size; sizes go up by 4x (default 256MiB)\n"
         "  --iters N          timed calls per size and side (default 20 up to 4 MiB, 10 up to 64 MiB, 5 above)\n"
         "  --warmup N         untimed calls before them (default 3)\n"
         "  --ddp-steps N      timed DDP steps (default 20)\n"
         "  --mlp SIZES        small: 64-64-64-10, batch 8 (mlp_train_step_small, default);\n"
         "                     full: 784-1024-1024-10, batch 256 (mlp_train_step)\n"
         "  --no-torch         do not look for PyTorch\n"
         "  --timeout S        stop a job of ranks that runs longer (default 1800)\n"
         "  --call-timeout S   the timeout of each collective and of the rendezvous (default 120)\n"
         "  --json FILE        also write the results to FILE as a JSON array, one object per row\n"
         "  --help             print this help and exit\n"
         "\n"
         "Exit status: 0 on success, 1 when a job of ranks fails or times out, 2 on a bad command line.\n";
}

namespace {

std::vector<int> parseCounts(const std::string& flag, const std::string& text, bool zeroIsNone) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int v = 0;
    try {
      size_t used = 0;
      v = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw UsageError(fmt::format("{}: '{}' is not a list of process counts", flag, text));
    }
    if (v == 0 && zeroIsNone && text == "0") return {};
    if (v < 1 || v > 64) throw UsageError(fmt::format("{}: {} processes, expected 1..64", flag, v));
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  CLI::App app("kiln-bench-dist");
  app.set_help_flag();
  app.allow_extras(false);
  std::string nprocs = "2,4", ddpNprocs = "1,2,4", json;
  app.add_flag("--help,-h", o.help);
  app.add_option("--nprocs", nprocs);
  app.add_option("--ddp-nprocs", ddpNprocs);
  app.add_option("--min-bytes", o.minBytes)->transform(CLI::AsSizeValue(false));
  app.add_option("--max-bytes", o.maxBytes)->transform(CLI::AsSizeValue(false));
  app.add_option("--iters", o.iters)->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--ddp-steps", o.ddpSteps)->check(CLI::PositiveNumber);
  app.add_option("--mlp", o.mlp)->check(CLI::IsMember({"small", "full"}));
  bool noTorch = false;
  app.add_flag("--no-torch", noTorch);
  app.add_option("--timeout", o.timeoutS)->check(CLI::PositiveNumber);
  app.add_option("--call-timeout", o.callTimeoutS)->check(CLI::PositiveNumber);
  CLI::Option* jsonOpt = app.add_option("--json", json);
  app.add_option("--dist-worker", o.workerMode)->check(CLI::IsMember({"allreduce", "ddp"}))->group("");
  app.add_option("--result", o.resultPath)->group("");
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ExtrasError& e) {
    throw UsageError(fmt::format("unknown argument '{}'", app.remaining().empty() ? e.what() : app.remaining()[0]));
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  o.torch = !noTorch;
  o.nprocs = parseCounts("--nprocs", nprocs, true);
  o.ddpNprocs = parseCounts("--ddp-nprocs", ddpNprocs, true);
  if (jsonOpt->count()) {
    if (json.empty()) throw UsageError("--json expects a file name");
    o.jsonPath = json;
  }
  if (o.minBytes < 4) throw UsageError(fmt::format("--min-bytes: {} is less than one f32", o.minBytes));
  if (o.maxBytes < o.minBytes)
    throw UsageError(fmt::format("--max-bytes {} is below --min-bytes {}", o.maxBytes, o.minBytes));
  if (o.maxBytes > (int64_t{2} << 30)) throw UsageError(fmt::format("--max-bytes: {} is over 2 GiB", o.maxBytes));
  if (!o.workerMode.empty() && o.resultPath.empty()) throw UsageError("--dist-worker needs --result");
  return o;
}

std::vector<int64_t> sizes(const Options& o) {
  std::vector<int64_t> out;
  for (int64_t b = o.minBytes / 4 * 4; b <= o.maxBytes; b *= 4) out.push_back(b);
  const int64_t last = o.maxBytes / 4 * 4;
  if (out.back() != last) out.push_back(last);
  return out;
}

int itersFor(const Options& o, int64_t bytes) {
  if (o.iters > 0) return o.iters;
  if (bytes <= (int64_t{4} << 20)) return 20;
  if (bytes <= (int64_t{64} << 20)) return 10;
  return 5;
}

std::vector<std::string> workerCommand(const Options& o, const std::string& self, const std::string& mode,
                                       const std::string& resultPath) {
  std::vector<std::string> cmd{self,
                               "--dist-worker",
                               mode,
                               "--result",
                               resultPath,
                               "--min-bytes",
                               std::to_string(o.minBytes),
                               "--max-bytes",
                               std::to_string(o.maxBytes),
                               "--warmup",
                               std::to_string(o.warmup),
                               "--ddp-steps",
                               std::to_string(o.ddpSteps),
                               "--mlp",
                               o.mlp,
                               "--timeout",
                               std::to_string(o.timeoutS),
                               "--call-timeout",
                               std::to_string(o.callTimeoutS)};
  if (o.iters > 0) {
    cmd.push_back("--iters");
    cmd.push_back(std::to_string(o.iters));
  }
  return cmd;
}

}  // namespace kiln::bench::dist

#!/usr/bin/env bash
# kiln's main job: the eager-vs-compiled benchmark on the CPU. Builds kiln
# first (scripts/setup.sh), then runs build/bin/kiln-bench with the given
# arguments (every workload by default: --suite all), e.g.
# scripts/bench.sh --filter chain --json bench.json, or
# KILN_TORCH_PYTHON=/path/to/venv/bin/python scripts/bench.sh --compare-torch
# to measure the same workloads in PyTorch too (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh kiln-bench
# Every workload, the ResNet-18 ones too (kiln-bench alone leaves them out
# of its default run: a minute more), unless a --suite is given.
suite=(--suite all)
for arg in "$@"; do
  [[ $arg == --suite || $arg == --suite=* ]] && suite=()
done
exec build/bin/kiln-bench "${suite[@]}" "$@"

#!/usr/bin/env bash
# The sanitizer pass of CI: builds kiln and its unit and end-to-end tests
# with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/
# (scripts/setup.sh with KILN_SANITIZE; build/ is left alone) and runs the
# `unit` and `e2e` labels there. An ASan or UBSan report fails its test.
# The lit, install and fuzz labels are not run here: lit and install drive
# the same code through irdump and an installed copy, and the fuzzer has
# sanitizers of its own. Nor are the tests whose time goes to NVRTC (an
# uninstrumented compiler: GpuBuild.Nvrtc*, *CudaC*) or to exhaustive float
# sweeps (*IsCorrectlyRounded, SinAndCos: the same code as the spot tests
# of those formulas, which do run here), or to PoCL's compiler and launches
# (e2e.train_transformer.opencl.*: the example's host code is the cpu
# cases', which do run here), minutes of the pass; build/
# runs them all (docs/testing.md, CI time). Extra arguments go to ctest, e.g.
#   scripts/sanitize.sh -R Chain
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
KILN_SANITIZE=address,undefined scripts/setup.sh test_binaries
exec ctest --test-dir build-asan --output-on-failure -j "${KILN_JOBS:-2}" -L '^(unit|e2e)$' \
  -E '(GpuBuild\.Nvrtc|CudaCOf|IsCorrectlyRounded|ScalarFormulasMath\.SinAndCos$|train_transformer\.opencl)' "$@"

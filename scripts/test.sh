#!/usr/bin/env bash
# Runs every test: builds kiln (scripts/setup.sh), then CTest runs the unit,
# lit, end-to-end and install tests in build/; then the sanitizer pass
# (scripts/sanitize.sh: the unit and end-to-end tests of an ASan + UBSan
# build in build-asan/). Extra arguments go to the first ctest only and
# skip the sanitizer pass, e.g.
#   scripts/test.sh -L lit     or     scripts/test.sh -R Chain
# KILN_SANITIZE_PASS=0 skips the sanitizer pass of a full run.
#
# Tests labelled `gpu` need an NVIDIA GPU (DESIGN.md §11) and are left out,
# unless KILN_GPU_TESTS=1 or the arguments name the label (-L gpu); without
# a GPU they report a skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
select=(-LE gpu)
if [[ ${KILN_GPU_TESTS:-0} == 1 || " $* " == *" gpu "* || " $* " == *"-Lgpu"* ]]; then select=(); fi
ctest --test-dir build --output-on-failure -j "${KILN_JOBS:-2}" "${select[@]}" "$@"
if [[ $# -eq 0 && ${KILN_SANITIZE_PASS:-1} != 0 ]]; then exec scripts/sanitize.sh; fi

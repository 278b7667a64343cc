#!/usr/bin/env bash
# Runs every test: builds kiln (scripts/setup.sh), then CTest runs the unit,
# lit, end-to-end and install tests. Extra arguments go to ctest, e.g.
# scripts/test.sh -L lit     or     scripts/test.sh -R Chain
#
# Tests labelled `gpu` need an NVIDIA GPU (DESIGN.md §11) and are left out,
# unless KILN_GPU_TESTS=1 or the arguments name the label (-L gpu); without
# a GPU they report a skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
select=(-LE gpu)
if [[ ${KILN_GPU_TESTS:-0} == 1 || " $* " == *" gpu "* || " $* " == *"-Lgpu"* ]]; then select=(); fi
exec ctest --test-dir build --output-on-failure -j "${KILN_JOBS:-2}" "${select[@]}" "$@"

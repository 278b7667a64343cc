#!/usr/bin/env bash
# Runs every test: builds kiln (scripts/setup.sh), then CTest runs the unit,
# lit, end-to-end and install tests. Extra arguments go to ctest, e.g.
# scripts/test.sh -L lit     or     scripts/test.sh -R Chain
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
exec ctest --test-dir build --output-on-failure -j "${KILN_JOBS:-2}" "$@"

#!/usr/bin/env bash
# Installs what kiln needs to build (Debian packages, only the missing ones),
# then configures and builds kiln in build/. Safe to run again: with
# everything in place it takes seconds.
#
#   scripts/setup.sh [ninja targets...]    (default: everything)
#
# CI=true adds -DKILN_WERROR=ON. KILN_JOBS sets ninja's -j (default: nproc).
# KILN_SANITIZE=address,undefined configures and builds build-asan/ instead
# of build/: the sanitizer build of scripts/sanitize.sh, at -O1 with line
# tables (-g1), enough for the sanitizers' stack traces and cheaper to build
# and run than -O2 -g.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# llvm-19-dev brings LLVM's CMake package; LLVM's config looks for libffi,
# libedit, zlib, zstd, libxml2 and libcurl, so their -dev packages come too.
# llvm-19-tools has FileCheck and lit. clang and libclang-rt-14-dev build the
# libFuzzer target of the IR parser (tests/fuzz); graphviz renders
# `irdump --dot-png`. libopenblas-dev is the CPU BLAS behind matmul.
# ocl-icd-opencl-dev is the OpenCL ICD loader and headers that
# codegen/opencl_compiler.cpp builds OpenCL C with, and pocl-opencl-icd the
# OpenCL device the tests build and run the OpenCL kernels on (PoCL's CPU
# device); libclblast-dev the BLAS behind matmul on OpenCL devices.
# libcli11-dev and nlohmann-json3-dev are the tools' command lines and
# kiln-env's --json output (header-only). libgloo-dev is the collective
# engine of the distributed layer on CPU and OpenCL tensors (docs/distributed.md);
# iproute2 makes the network namespaces of the two-host test.
# libdnnl-dev is oneDNN, the other CPU BLAS kiln chooses between by
# measurement (Note [Choosing the BLAS] in codegen/cpu_target.cpp).
packages=(
  cmake ninja-build ccache g++ python3
  llvm-19-dev llvm-19-tools
  clang libclang-rt-14-dev graphviz
  libfmt-dev libgtest-dev libopenblas-dev libdnnl-dev
  ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev
  libcli11-dev nlohmann-json3-dev
  libgloo-dev iproute2
  zlib1g-dev libzstd-dev libedit-dev libxml2-dev libcurl4-openssl-dev libffi-dev
)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg -s "$p" 2>/dev/null || true)
  [[ $status == *$'\nStatus: install ok installed'* ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) != 0 ]]; then sudo=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The datasets of the examples (data/digits.csv for examples/train_digits.cpp).
scripts/fetch_data.sh

# Optional reference, from PyPI: Python's safetensors, which the checkpoint
# tests read kiln's files with (tests/unit/frontend/serialization_test.cpp;
# without it that test skips and says why). A failure here is not fatal.
if ! python3 -c 'import safetensors' 2>/dev/null; then
  python3 -m pip install -q safetensors 2>&1 | tail -n 2 || echo "setup: python's safetensors not installed (optional)"
fi

werror=OFF
if [[ -n ${CI:-} && ${CI} != false && ${CI} != 0 ]]; then werror=ON; fi

build=build type=Release options=()
if [[ -n ${KILN_SANITIZE:-} ]]; then
  build=build-asan type=RelWithDebInfo
  options=(-DKILN_SANITIZE="${KILN_SANITIZE}" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
fi

# A build/ made by another generator cannot be reconfigured for Ninja.
if [[ -f $build/CMakeCache.txt ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build/CMakeCache.txt"; then
  echo "setup: $build/ was configured with another generator; configuring it anew"
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
# Configure when the build folder is new or an option differs; otherwise
# ninja reruns cmake by itself when a CMakeLists.txt has changed.
if [[ ! -f $build/build.ninja ]] \
  || ! grep -qs "^KILN_WERROR:BOOL=${werror}\$" "$build/CMakeCache.txt" \
  || ! grep -qs "^KILN_SANITIZE:STRING=${KILN_SANITIZE:-}\$" "$build/CMakeCache.txt" \
  || ! grep -qs "^CMAKE_BUILD_TYPE:STRING=${type}\$" "$build/CMakeCache.txt"; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE="${type}" -DKILN_WERROR="${werror}" \
    -DKILN_SANITIZE="${KILN_SANITIZE:-}" "${options[@]}"
fi
ninja -C "$build" -j "${KILN_JOBS:-$(nproc)}" "$@"

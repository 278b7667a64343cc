#!/usr/bin/env bash
# Builds the IR parser fuzzer (tests/fuzz) with clang and runs it for a
# bounded time on a seed corpus made of every lit input's chunks and every
# built-in model printed by irdump. Fails on any crash, sanitizer report or
# failed round trip; prints libFuzzer's final statistics.
#
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]     (defaults: 60, build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-60}
build=${2:-build}
fuzz="$build/fuzz"

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (Debian packages clang, libclang-rt-14-dev)" >&2; exit 1; }
cmake -G Ninja -S tests/fuzz -B "$fuzz" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$fuzz" parser_fuzzer

corpus="$fuzz/corpus"
rm -rf "$corpus" && mkdir -p "$corpus"
n=0
for f in $(find tests/lit -name '*.kir' | sort); do
  # One seed per `// -----` chunk.
  awk -v dir="$corpus" -v base="$(basename "$f" .kir)" '
    BEGIN { k = 0; out = dir "/" base "-" k ".kir" }
    /^[ \t]*\/\/ -----/ { k++; out = dir "/" base "-" k ".kir"; next }
    { print > out }' "$f"
done
if [[ -x "$build/bin/irdump" ]]; then
  for m in $("$build/bin/irdump" --list-examples | awk '{print $1}'); do
    "$build/bin/irdump" --example "$m" > "$corpus/model-$m.kir"
    "$build/bin/irdump" --example "$m" --passes=dce,fuse-elementwise > "$corpus/model-$m-fused.kir"
  done
fi
n=$(ls "$corpus" | wc -l)
echo "fuzz.sh: $n seeds, running for ${seconds}s"

"$fuzz/parser_fuzzer" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=4096 -print_final_stats=1 -artifact_prefix="$fuzz/" 2>&1 | tail -n 25
status=${PIPESTATUS[0]}
if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: the fuzzer found a crash (exit $status); the input is in $fuzz/crash-*" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${seconds}s"

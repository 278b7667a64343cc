#!/usr/bin/env bash
# The disk kernel cache across processes (codegen/disk_cache.h):
#   1. a fresh cache: the probe compiles its kernels and stores them;
#   2. a second process compiles nothing and loads every kernel from disk;
#   3. one entry truncated and one with a flipped byte: both are detected,
#      rebuilt, and the rest still load;
#   4. then nothing is compiled again;
#   5. KILN_CACHE_DIR=off compiles everything and writes nothing;
# and every run computes the same results.
set -euo pipefail
probe=$1
dir=$2
rm -rf "$dir"
export KILN_CACHE_DIR=$dir
field() { sed -n "s/.*$1=\([0-9a-f]*\).*/\1/p" <<<"$2"; }
fail() { echo "FAIL: $*"; exit 1; }

first=$("$probe"); echo "run 1: $first"
n=$(field compiled "$first")
((n > 0)) || fail "the first run compiled nothing"
[[ $(field disk_hits "$first") == 0 ]] || fail "the first run found kernels on disk in a fresh directory"
entries=$(find "$dir" -name '*.kc' | wc -l)
((entries == n)) || fail "$n kernels compiled but $entries entries on disk"

second=$("$probe"); echo "run 2: $second"
[[ $(field compiled "$second") == 0 ]] || fail "the second process compiled kernels"
[[ $(field disk_hits "$second") == "$n" ]] || fail "the second process did not load all $n kernels from disk"
[[ $(field checksum "$second") == $(field checksum "$first") ]] || fail "results differ with cached kernels"

mapfile -t files < <(find "$dir" -name '*.kc' | sort)
((${#files[@]} >= 2)) || fail "need two entries to damage"
truncate -s 20 "${files[0]}"
size=$(stat -c %s "${files[1]}")
printf '\xff' | dd of="${files[1]}" bs=1 seek=$((size / 2)) conv=notrunc status=none
third=$("$probe"); echo "run 3: $third"
[[ $(field corrupt "$third") == 2 ]] || fail "the two damaged entries were not both detected"
[[ $(field compiled "$third") == 2 ]] || fail "the two damaged entries were not rebuilt"
[[ $(field checksum "$third") == $(field checksum "$first") ]] || fail "results differ after rebuilding"

fourth=$("$probe"); echo "run 4: $fourth"
[[ $(field compiled "$fourth") == 0 ]] || fail "rebuilt entries were not stored"

off=$(KILN_CACHE_DIR=off "$probe"); echo "off:   $off"
[[ $(field compiled "$off") == "$n" && $(field disk_hits "$off") == 0 ]] || fail "KILN_CACHE_DIR=off still used the cache"
[[ $(field checksum "$off") == $(field checksum "$first") ]] || fail "results differ without the cache"
echo "PASS: $n kernels compiled once, then loaded from disk"

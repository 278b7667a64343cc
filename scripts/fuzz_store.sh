#!/usr/bin/env bash
# Builds the TCP store fuzzer (tests/fuzz/store_fuzzer.cpp) with clang and
# runs it for a bounded time on a seed corpus of well-formed request streams
# (every query type, parked gets and waits, several clients), written here
# in the wire format of docs/distributed.md. Fails on any crash, sanitizer
# report or broken invariant; prints libFuzzer's final statistics. Its own
# build folder (BUILD_DIR/fuzz-store), so that it can run next to
# scripts/fuzz.sh.
#
#   scripts/fuzz_store.sh [SECONDS] [BUILD_DIR]     (defaults: 20, build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-20}
build=${2:-build}
fuzz="$build/fuzz-store"

command -v clang++ >/dev/null || { echo "fuzz_store.sh: clang++ not found (Debian packages clang, libclang-rt-14-dev)" >&2; exit 1; }
cmake -G Ninja -S tests/fuzz -B "$fuzz" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$fuzz" store_fuzzer

corpus="$fuzz/corpus"
rm -rf "$corpus" && mkdir -p "$corpus"
python3 - "$corpus" <<'EOF'
import struct, sys, os
out = sys.argv[1]
MAGIC = b"KLNS"
def s(b): b = b.encode() if isinstance(b, str) else b; return struct.pack("<I", len(b)) + b
def keys(ks): return struct.pack("<I", len(ks)) + b"".join(s(k) for k in ks)
def req(t, body=b""): return MAGIC + bytes([t]) + body
validate = req(0, struct.pack("<I", 1))
def set_(k, v): return req(1, s(k) + s(v))
def get(k, ms): return req(2, s(k) + struct.pack("<Q", ms))
def add(k, d): return req(3, s(k) + struct.pack("<q", d))
def cas(k, e, d): return req(4, s(k) + s(e) + s(d))
def check(ks): return req(5, keys(ks))
def delete(k): return req(6, s(k))
def wait(ks, ms): return req(7, keys(ks) + struct.pack("<Q", ms))
numkeys = req(8)
seeds = {
  "basic": [(0, validate), (0, set_("a", "1")), (0, get("a", 10)), (0, add("n", 5)), (0, add("a", 2)),
            (0, cas("c", "", "x")), (0, cas("c", "x", "y")), (0, check(["a", "c", "z"])), (0, delete("a")),
            (0, numkeys)],
  "parked": [(1, get("k", 1000)), (2, wait(["k", "j"], 500)), (0, set_("k", "v")), (0 | (40 << 2), set_("j", "w")),
             (1, get("k", 0)), (3, wait(["never"], 3))],
  "timeouts": [(1, get("x", 5)), (2 | (10 << 2), wait(["x", "y"], 1)), (1 | (63 << 2), numkeys), (0, add("x", -1))],
  "errors": [(0, set_("s", "text")), (0, add("s", 1)), (0, req(0, struct.pack("<I", 99))), (0, numkeys)],
}
for name, stream in seeds.items():
  with open(os.path.join(out, name), "wb") as f:
    f.write(bytes([3 | (2 << 2)]))
    for control, message in stream:
      f.write(bytes([control & 0xFF]) + message)
# Replies, read by the client's parser: an ok get, a timeout, an error.
with open(os.path.join(out, "reply-get"), "wb") as f: f.write(bytes([2 << 2]) + b"\x00" + s("value"))
with open(os.path.join(out, "reply-timeout"), "wb") as f: f.write(bytes([7 << 2]) + b"\x01" + keys(["a", "b"]))
with open(os.path.join(out, "reply-error"), "wb") as f: f.write(bytes([1 << 2]) + b"\x02" + s("store: no"))
EOF
echo "fuzz_store.sh: $(ls "$corpus" | wc -l) seeds, running for ${seconds}s"

"$fuzz/store_fuzzer" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=4096 -print_final_stats=1 -artifact_prefix="$fuzz/" 2>&1 | tail -n 25
status=${PIPESTATUS[0]}
if [[ $status -ne 0 ]]; then
  echo "fuzz_store.sh: the fuzzer found a crash (exit $status); the input is in $fuzz/crash-*" >&2
  exit 1
fi
echo "fuzz_store.sh: no crash in ${seconds}s"

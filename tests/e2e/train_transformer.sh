#!/usr/bin/env bash
# examples/train_transformer.cpp for a few steps of a tiny model (ctest
# e2e.train_transformer.*):
#   1. 16 steps without a stop, profiling steps 3-5: the mean loss of the
#      last 4 steps is below 85% of the first step's, and the trace is JSON
#      with the 3 recorded steps;
#   2. the same run stopped after step 9 (an epoch holds 7 batches, so the
#      resume lands mid-epoch, and the run crosses epochs after it), then
#      resumed: the progress lines after step 9 and the validation loss
#      are the uninterrupted run's, and the final checkpoints (weights,
#      AdamW's moments, the schedule, the loss scaler, the generator) are
#      the same bytes.
#
#   train_transformer.sh TRAIN_TRANSFORMER WORKDIR ARGS...   (ARGS: --device, --amp, --compile)
set -euo pipefail
bin=$1 dir=$2
shift 2
fail() {
  echo "train_transformer.sh: $*" >&2
  exit 1
}
rm -rf "$dir" && mkdir -p "$dir"
# 90% of 35 KB in windows of 65 bytes: 486 windows, 7 batches of 64.
common=(--seq 64 --stride 64 --batch 64 --d 32 --heads 2 --layers 2 --steps 16 --warmup 3 --lr 5e-3 --log-every 1
  --save-every 5 --workers 2 --checkpoint-activations "$@")

run() {
  local out=$1
  shift
  timeout 240 "$bin" "${common[@]}" "$@" >"$out" 2>&1 || {
    cat "$out" >&2
    fail "train_transformer $* exited with $?"
  }
}
run "$dir/full.txt" --checkpoint-path "$dir/full.safetensors" --profile "$dir/trace.json"
run "$dir/first.txt" --checkpoint-path "$dir/resumed.safetensors" --stop-at 9
run "$dir/rest.txt" --checkpoint-path "$dir/resumed.safetensors" --resume

losses() { sed -n 's/^step *\([0-9]*\)\/[0-9]*  loss \([0-9.]*\).*/\1 \2/p' "$1"; }
mapfile -t full < <(losses "$dir/full.txt")
((${#full[@]} == 16)) || fail "expected 16 progress lines, got ${#full[@]}: $(cat "$dir/full.txt")"
first=${full[0]#* }
awk -v f="$first" -v a="${full[12]#* }" -v b="${full[13]#* }" -v c="${full[14]#* }" -v d="${full[15]#* }" \
  'BEGIN { m = (a + b + c + d) / 4; printf "first loss %s, mean of the last 4 %.4f\n", f, m; exit !(m < 0.85 * f) }' ||
  fail "the loss did not fall: $(cat "$dir/full.txt")"

python3 - "$dir/trace.json" <<'EOF' || fail "the profile is not a trace of 3 steps"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
steps = sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
kernels = [e for e in events if e.get("cat") == "kernel"]
print("trace:", steps, len(kernels), "kernel events")
sys.exit(0 if steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"] and kernels else 1)
EOF

grep -q "^stopped at step 9;" "$dir/first.txt" || fail "the first part did not stop at step 9: $(cat "$dir/first.txt")"
grep -q "^resumed from .* at step 9$" "$dir/rest.txt" || fail "the second part did not resume at step 9"
# The progress lines from step 10 on and the validation loss, without the
# timings.
tail_of() { sed -n -e 's/  *[0-9]* tokens\/s.*//' -e '/^step  *\(1[0-9]\)\//p' -e '/^validation/p' "$1"; }
diff <(tail_of "$dir/full.txt") <(tail_of "$dir/rest.txt") >&2 ||
  fail "the resumed run's losses differ from the uninterrupted run's"
[[ -n $(tail_of "$dir/rest.txt") ]] || fail "the resumed run printed no progress"
cmp "$dir/full.safetensors" "$dir/resumed.safetensors" ||
  fail "the resumed run's final checkpoint differs from the uninterrupted run's"
echo "train_transformer.sh: the loss falls, the trace holds 3 steps, the resumed run equals the uninterrupted one"

#!/usr/bin/env bash
# examples/train_digits_ddp.cpp on 2 processes against train_digits.cpp on
# one, the same epochs, seed and global batch (64; 32 per rank): each must
# finish, print its final `test accuracy: A%` (rank 0 for the 2-process
# run), and the two accuracies must be within TOLERANCE percentage points.
# Not bit-equal: the runs shuffle differently (DistributedSampler's
# permutation per epoch), draw their own dropout masks per rank, pad the
# training set by one image and sum the gradients in another order; the
# tolerance and why: docs/distributed.md, "Worked example".
#
#   train_digits_compare.sh TRAIN_DIGITS KILN_RUN TRAIN_DIGITS_DDP DATA EPOCHS
set -euo pipefail
single=$1 kiln_run=$2 ddp=$3 data=$4 epochs=$5
tolerance=2.0  # percentage points: 7 of the 360 test images

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
final() {  # the accuracy of the last `test accuracy: A%` line
  grep -o 'test accuracy: [0-9.]*%' | tail -n 1 | grep -o '[0-9.]*' || true
}

out1=$(timeout 60 "$single" --data "$data" --epochs "$epochs") || fail "train_digits exited with $?"
out2=$(timeout 60 "$kiln_run" --nproc-per-node 2 -- "$ddp" --data "$data" --epochs "$epochs" --timeout 30) ||
  fail "kiln-run --nproc-per-node 2 train_digits_ddp exited with $?"
echo "$out2"
a1=$(final <<<"$out1")
a2=$(final <<<"$out2")
[[ -n $a1 ]] || fail "train_digits printed no final test accuracy: $out1"
[[ -n $a2 ]] || fail "train_digits_ddp printed no final test accuracy"
grep -q '^\[rank 0\]: test accuracy: ' <<<"$out2" || fail "the final accuracy does not come from rank 0"
if grep -q '^\[rank 1\]: .*test accuracy' <<<"$out2"; then fail "rank 1 printed too"; fi
echo "test accuracy: 1 process $a1%, 2 processes $a2% (tolerance $tolerance points)"
awk -v a="$a1" -v b="$a2" -v t="$tolerance" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' ||
  fail "2 processes reached $a2%, 1 process $a1%: more than $tolerance points apart"

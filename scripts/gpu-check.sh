#!/usr/bin/env bash
# The GPU check, unattended, on a machine with an NVIDIA GPU: unpacks the
# bundle scripts/gpu-bundle.sh made (or, without one, runs from build/),
# runs kiln-env, the device suite on CUDA, gpu_tests and kiln-bench on
# CUDA, and prints a one-page report. The whole check stays under
# KILN_GPU_CHECK_LIMIT_S (8 minutes), each step under its own timeout.
#
#   scripts/gpu-check.sh [BUNDLE]   (default: gpu-bundle/kiln-gpu.tar.zst when it exists, else build/)
#
# Exit status: 0 when every step passed, and 0 with "no GPU present" where
# the machine has no NVIDIA GPU (the bundle is still checked to load); 1 for
# a real failure (a test failed, a binary does not load, a step timed out,
# a GPU is there but CUDA cannot use it). Logs and the report go to
# KILN_GPU_CHECK_OUT (default: $OUT when set, else gpu-check-out/).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# --- What runs; the device suite's owner may change these two. ---
# Which device_tests cases run: by gtest filter and by the suite's own
# device selection.
DEVICE_TESTS_FILTER=${DEVICE_TESTS_FILTER:-'*Cuda*:*CUDA*'}
export KILN_TEST_DEVICES=${KILN_TEST_DEVICES:-cuda}
# kiln-bench on the GPU (the --device flag is checked for first).
BENCH_ARGS=(--device cuda)
TOTAL_LIMIT_S=${KILN_GPU_CHECK_LIMIT_S:-480}
# Each step's own limit, cut to what is left of the total.
declare -A STEP_LIMIT_S=([kiln-env]=60 [device_tests]=180 [gpu_tests]=150 [kiln-bench]=150)

deadline=$((SECONDS + TOTAL_LIMIT_S))
out=${KILN_GPU_CHECK_OUT:-${OUT:-gpu-check-out}}
mkdir -p "$out"
report=$out/report.txt
: >"$report"
failures=()

say() { echo "$*" | tee -a "$report"; }
fail() {
  failures+=("$1")
  say "FAIL: $1"
}

# --- Where the binaries are. ---
bundle=${1:-gpu-bundle/kiln-gpu.tar.zst}
if [[ -f $bundle ]]; then
  run_dir=${KILN_GPU_CHECK_DIR:-${TMPDIR:-/tmp}/kiln-gpu-check} # outside gpu-bundle/, which travels
  rm -rf "$run_dir" && mkdir -p "$run_dir"
  # The machine's zstd, else the one the bundle brought.
  unzstd=(zstd)
  if ! command -v zstd >/dev/null; then
    bundled=$(dirname "$bundle")/zstd
    unzstd=(env "LD_LIBRARY_PATH=$bundled/lib" "$bundled/zstd")
  fi
  if ! "${unzstd[@]}" -dcq "$bundle" | tar -xf - -C "$run_dir"; then
    fail "cannot unpack $bundle into $run_dir"
    exit 1
  fi
  root=$run_dir/kiln-gpu
  bin=$root/bin
  # Only the bundle's libraries, then the system's (never the toolkit's stubs/).
  export LD_LIBRARY_PATH=$root/lib
  source_desc="bundle $bundle ($(sed -n 's/^commit: //p' "$root/MANIFEST"), built $(sed -n 's/^built: //p' "$root/MANIFEST"))"
elif [[ -x build/bin/kiln-env ]]; then
  root=build
  bin=build/bin
  source_desc="build/ (no bundle at $bundle)"
else
  echo "gpu-check: no bundle at $bundle and no build/bin/kiln-env: run scripts/gpu-bundle.sh first" | tee -a "$report"
  exit 1
fi
# The CUDA toolkit's libraries (NVRTC, cuBLAS, ...) where the loader may not
# look; kiln also tries /usr/local/cuda/lib64 itself.
for dir in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64; do
  if [[ -d $dir ]]; then
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir
    break
  fi
done
export KILN_CACHE_DIR=$out/kernel-cache KILN_VERIFY_EACH=1

say "kiln GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(hostname 2>/dev/null || cat /etc/hostname 2>/dev/null)"
say "from: $source_desc"

# The glibc and libstdc++ the bundle needs against the machine's.
if [[ -f $root/MANIFEST ]]; then
  need_glibc=$(sed -n 's/^needs glibc: //p' "$root/MANIFEST")
  have_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | sed 's/^glibc //')
  if [[ -n $need_glibc && -n $have_glibc ]] \
    && [[ $(printf '%s\n%s\n' "$need_glibc" "$have_glibc" | sort -V | head -1) != "$need_glibc" ]]; then
    fail "the bundle needs glibc $need_glibc, this machine has $have_glibc"
  fi
fi

# Runs step $1 with limit STEP_LIMIT_S[$1] (cut to the time left), its
# output in $out/$1.log. Sets step_rc (124: timed out) and step_s.
run_step() {
  local name=$1 limit
  shift
  limit=${STEP_LIMIT_S[$name]:-60}
  local left=$((deadline - SECONDS - 5))
  ((limit > left)) && limit=$left
  if ((limit <= 0)); then
    step_rc=124 step_s=0 step_limit=0
    echo "out of time before it started" >"$out/$name.log"
    return
  fi
  local start=$SECONDS
  timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
  step_rc=$?
  step_s=$((SECONDS - start))
  step_limit=$limit
}

# GoogleTest's summary lines: "passed failed skipped".
gtest_counts() {
  local log=$1 p f s
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$log" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$log" | tail -1)
  echo "${p:-0} ${f:-0} ${s:-0}"
}

finish() { # prints the verdict and exits: 1 when anything failed
  if ((${#failures[@]})); then
    say "overall: FAIL (${#failures[@]}):"
    for f in "${failures[@]}"; do say "  - $f"; done
    exit 1
  fi
  say "overall: $1"
  exit 0
}

# --- Every binary starts (on any machine, GPU or not). ---
declare -A present=()
started=()
for b in kiln-env device_tests gpu_tests kiln-bench; do
  [[ -x $bin/$b ]] || continue
  present[$b]=1
  case $b in
    kiln-env) probe=(--get /kiln/version) ;;
    kiln-bench) probe=(--list) ;;
    *) probe=(--gtest_list_tests) ;;
  esac
  if timeout 60 "$bin/$b" "${probe[@]}" >"$out/load-$b.log" 2>&1; then
    started+=("$b")
  else
    fail "$b does not start: $(head -c 300 "$out/load-$b.log")"
  fi
done
say "binaries that start: ${started[*]:-none}"
if [[ " ${started[*]} " != *" kiln-env "* ]]; then
  [[ -n ${present[kiln-env]:-} ]] || fail "kiln-env is not in $bin"
  say "cannot tell whether a GPU is present without kiln-env"
  finish "-"
fi

# --- kiln-env: the machine as kiln sees it. ---
run_step kiln-env "$bin/kiln-env"
if ((step_rc != 0)); then fail "kiln-env exited with $step_rc (log: $out/kiln-env.log)"; fi
"$bin/kiln-env" --json >"$out/kiln-env.json" 2>/dev/null
get() { "$bin/kiln-env" --get "$1" 2>/dev/null; }
if [[ $(get /backends/cuda_driver/available) != true ]]; then
  why=$(get /backends/cuda_driver/reason)
  # /dev/nvidia* exist wherever the driver has found a GPU, container or not.
  if compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
    fail "an NVIDIA GPU is present (/dev/nvidia*) but CUDA cannot use it: $why"
  else
    say "no GPU present: $why"
  fi
  finish "no GPU present; nothing to check on a GPU, and the bundle starts here"
fi

# The device, from the CUDA driver and NVML.
say ""
say "CUDA driver $(get /backends/cuda_driver/version), $(get /backends/cuda_driver/device_count) GPU(s); NVRTC: $(get /backends/nvrtc/version); cuBLASLt $(get /backends/cublaslt/version), cuDNN $(get /backends/cudnn/version), NCCL $(get /backends/nccl/version)"
for i in 0 1 2 3 4 5 6 7; do
  d=$(get "/devices/$i/device") || break
  [[ $d == cuda:* ]] || continue
  say "$d: $(get "/devices/$i/name"), $(get "/devices/$i/arch"), driver $(get "/devices/$i/driver_version")$(get "/devices/$i/error" | sed 's/^/, error: /')"
done
if [[ $(get /backends/nvml/available) == true ]]; then
  gib() { awk -v b="$1" 'BEGIN { if (b ~ /^[0-9]+$/) printf "%.1f GiB", b / 2^30; else printf "-" }'; }
  say "GPU 0 (NVML): $(get /gpus/0/name), driver $(get /backends/nvml/driver_version), memory used $(gib "$(get /gpus/0/memory_used)") of $(gib "$(get /gpus/0/memory_total)"), $(get /gpus/0/temperature) C, $(get /gpus/0/power_draw) W"
fi

# --- The suites. ---
say ""
say "$(printf '%-14s %-8s %6s %6s %7s %6s' step result passed failed skipped secs)"
for suite in device_tests gpu_tests; do
  if [[ -z ${present[$suite]:-} ]]; then
    fail "$suite is not in $bin"
    continue
  fi
  args=()
  [[ $suite == device_tests ]] && args=("--gtest_filter=$DEVICE_TESTS_FILTER")
  run_step "$suite" "$bin/$suite" "${args[@]}"
  read -r passed failed skipped < <(gtest_counts "$out/$suite.log")
  result=ok
  if ((step_rc == 124 || step_rc == 137)); then
    result=timeout
  elif ((step_rc != 0 || failed > 0)); then
    result=failed
  elif ((passed == 0)); then
    result=no-tests # none matched, or all skipped: the GPU was not used
  fi
  say "$(printf '%-14s %-8s %6s %6s %7s %6s' "$suite" "$result" "$passed" "$failed" "$skipped" "$step_s")"
  case $result in
    ok) ;;
    timeout) fail "$suite timed out after ${step_limit}s (log: $out/$suite.log)" ;;
    no-tests) fail "$suite passed no test ($skipped skipped; filter: ${args[*]:-none}; log: $out/$suite.log)" ;;
    *) fail "$suite: $failed failed, exit $step_rc: $(grep -E '^\[  FAILED  \] [^ ]+$' "$out/$suite.log" | head -5 | tr '\n' ' ')" ;;
  esac
done

# --- kiln-bench on the GPU. ---
if [[ -z ${present[kiln-bench]:-} ]]; then
  fail "kiln-bench is not in $bin"
elif ! "$bin/kiln-bench" --help 2>&1 | grep -q -- '--device'; then
  say "kiln-bench: this build has no --device flag; the GPU benchmark is skipped"
else
  run_step kiln-bench "$bin/kiln-bench" "${BENCH_ARGS[@]}" --json "$out/bench.json"
  say "$(printf '%-14s %-8s %6s %6s %7s %6s' kiln-bench "$( ((step_rc == 0)) && echo ok || echo failed)" - - - "$step_s")"
  if ((step_rc != 0)); then fail "kiln-bench ${BENCH_ARGS[*]} exited with $step_rc (log: $out/kiln-bench.log)"; fi
  say ""
  grep -v '^kiln-bench: running' "$out/kiln-bench.log" | head -40 | tee -a "$report"
fi

say ""
finish "PASS in ${SECONDS}s (logs: $out/)"

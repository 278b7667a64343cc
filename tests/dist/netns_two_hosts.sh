#!/usr/bin/env bash
# Two hosts on one machine: two network namespaces joined by a veth pair,
# with addresses inside them only (../shared/DIST_NOTES.md's recipe), and a
# 2-node x 2-process kiln-run job across them: node 0's agent serves the
# store on 10.77.0.1, node 1's reaches it over the veth, and the four
# workers meet through it (each reads every other rank's key).
#
# Safety (DIST_NOTES): every process that uses a namespace address runs
# inside a namespace (`ip netns exec`); nothing here connects to 10.77.x from
# the host's namespace, whose default route would carry it off the machine.
# Both namespaces are checked to exist and be up before any process starts,
# and removed on every exit path (the trap). Names are unique per run.
#
#   tests/dist/netns_two_hosts.sh KILN_RUN KILN_RUN_WORKER
# Exit 77 (a skip for ctest) without root or without `ip`.
set -euo pipefail
kiln_run=$1 worker=$2

if [[ $(id -u) != 0 ]]; then echo "skip: network namespaces need root (run as root, as CI does)"; exit 77; fi
if ! command -v ip >/dev/null; then echo "skip: no 'ip' command (Debian iproute2)"; exit 77; fi

tag=$(( $$ % 100000 ))
ns_a=kiln-a-$tag ns_b=kiln-b-$tag veth_a=kva$tag veth_b=kvb$tag
out=$(mktemp -d)
cleanup() {
  ip netns pids "$ns_a" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns pids "$ns_b" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$ns_a" 2>/dev/null || true  # removes the veth pair with it
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT INT TERM

ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add "$veth_a" type veth peer name "$veth_b"
ip link set "$veth_a" netns "$ns_a"
ip link set "$veth_b" netns "$ns_b"
ip -n "$ns_a" addr add 10.77.0.1/24 dev "$veth_a"
ip -n "$ns_b" addr add 10.77.0.2/24 dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up
ip -n "$ns_b" link set "$veth_b" up

# Both exist, with their address, and the link is up, before any process.
ip netns list | grep -q "^$ns_a" && ip netns list | grep -q "^$ns_b" || { echo "FAIL: namespaces missing"; exit 1; }
for _ in $(seq 50); do
  if ip -n "$ns_a" -br addr show "$veth_a" | grep -q "UP.*10\.77\.0\.1/24" \
    && ip -n "$ns_b" -br addr show "$veth_b" | grep -q "UP.*10\.77\.0\.2/24"; then break; fi
  sleep 0.1
done
ip -n "$ns_a" -br addr show "$veth_a" | grep -q "UP.*10\.77\.0\.1/24" || { echo "FAIL: $veth_a is not up"; exit 1; }
ip -n "$ns_b" -br addr show "$veth_b" | grep -q "UP.*10\.77\.0\.2/24" || { echo "FAIL: $veth_b is not up"; exit 1; }

endpoint=10.77.0.1:29611
job() {  # node
  ip netns exec "$([[ $1 == 0 ]] && echo "$ns_a" || echo "$ns_b")" timeout 60 "$kiln_run" --nnodes 2 --node-rank "$1" \
    --rdzv-endpoint "$endpoint" --nproc-per-node 2 --rdzv-timeout 30 -- "$worker" --print-env --store \
    >"$out/out$1" 2>"$out/err$1"
}
job 0 & pid0=$!
job 1 & pid1=$!
rc0=0 rc1=0
wait "$pid0" || rc0=$?
wait "$pid1" || rc1=$?
status=0
if [[ $rc0 != 0 || $rc1 != 0 ]]; then
  echo "FAIL: node 0 exited $rc0, node 1 exited $rc1"; status=1
fi
# 0 + 1 + 4 + 9: every rank read every other rank's key, across the veth.
for rank in 0 1 2 3; do
  node=$(( rank / 2 ))
  if ! grep -q "store ok rank $rank source kiln-run sum 14" "$out/out$node"; then
    echo "FAIL: rank $rank (node $node) did not meet the others"; status=1
  fi
done
grep -q "MASTER_ADDR=10.77.0.1" "$out/out1" || { echo "FAIL: node 1's workers were not sent to 10.77.0.1"; status=1; }
if [[ $status != 0 ]]; then
  for n in 0 1; do echo "--- node $n stdout"; cat "$out/out$n"; echo "--- node $n stderr"; cat "$out/err$n"; done
  exit 1
fi
echo "ok: 4 workers on 2 namespace hosts met through 10.77.0.1"

#!/usr/bin/env bash
# A recorded run replayed: the same probes lost at the same positions on a new run of the same
# traffic. In a namespace of its own standing for the host, `latlab echo` answers; behind
# `latlab run` with a bursty 10% loss (gemodel:5%,45%,100%,0 both ways), `latlab gen` sends
# PROBES probes (default 2000, 200/s). Run 1 records its fates (--seed 1); run 2 replays them
# with --seed 9 and records what it applied; run 3 is --seed 9 alone. Prints gen's lost count
# of each run and `latlab fates` comparisons: run 1 with run 2 (the same), run 1 with run 3
# (not). Build first (cargo build --release -p latlab), then run under the bench lock:
#   flock /tmp/latlab-bench.lock bench/fates.sh [PROBES]
set -euo pipefail
cd "$(dirname "$0")/.."
probes=${1:-2000}
latlab=$PWD/target/release/latlab
host=latlab-fates-bench-$$
out=$(mktemp -d)
ip netns add "$host"
trap 'kill $echo 2>/dev/null || true; wait 2>/dev/null || true; ip netns del "$host"; rm -rf "$out"' EXIT
ip -n "$host" link set lo up
nsenter --net=/run/netns/$host "$latlab" echo --listen 0.0.0.0:7777 --poll block >/dev/null 2>&1 &
echo=$!
until ip netns exec "$host" grep -q ':1E61 ' /proc/net/udp; do sleep 0.05; done
duration=$(( probes / 200 ))s
run() { # NAME FLAGS...: one run behind the lossy link; prints gen's lost count
  local name=$1; shift
  nsenter --net=/run/netns/$host "$latlab" run --subnet 198.19.232.0/30 --poll block \
    --loss-model gemodel:5%,45%,100%,0 "$@" -- \
    "$latlab" gen --target 198.19.232.1:7777 --rate 200 --duration "$duration" --warmup 0s \
    --no-check --poll block --grace 1s --json "$out/$name.json" >/dev/null 2>"$out/$name.err"
  grep -E 'replayed fates|warning' "$out/$name.err" || true
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], 'sent', j['sent'], 'lost', j['lost'])" \
    "$out/$name.json" "$name"
}
run run1 --seed 1 --record-fates "$out/run1.fates"
run run2 --seed 9 --replay-fates "$out/run1.fates" --record-fates "$out/run2.fates"
run run3 --seed 9 --record-fates "$out/run3.fates"
echo "== latlab fates run1.fates"
"$latlab" fates "$out/run1.fates" | sed "s|$out/||g"
echo "== latlab fates run1.fates run2.fates (replayed)"
"$latlab" fates "$out/run1.fates" "$out/run2.fates" 2>&1 | sed "s|$out/||g" || true
echo "== latlab fates run1.fates run3.fates (seed 9 alone)"
"$latlab" fates "$out/run1.fates" "$out/run3.fates" 2>&1 | sed "s|$out/||g" || true

#!/usr/bin/env bash
# Every lost probe placed: RUNS sittings (default 5), each one `latlab demo` (its default rates
# and the run through the emulated link, 2 s each) and one `latlab gen` at 100 kpps for 3 s
# against `latlab echo` in a namespace of their own (loopback: a lossless path), the reflector
# stopped with SIGSTOP for 300 ms one second in. For every run it prints the loss and its causes
# (gen's and the demo's `lost_by_cause`) and whether they add up with nothing left unanswered
# for no counted reason. Build first (cargo build --release -p latlab), then run under the
# bench lock:
#   flock /tmp/latlab-bench.lock bench/loss-attribution.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
latlab=$PWD/target/release/latlab
ns=latlab-losses-bench-$$
out=$(mktemp -d)
echo_pid=
cleanup() {
  if [ -n "$echo_pid" ]; then kill -CONT "$echo_pid" 2>/dev/null || true; kill "$echo_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$ns"
ip -n "$ns" link set lo up
echo "latlab $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) CPUs, $(uname -r)"
check() { # FILE LABEL TALLY: prints each run's loss by cause, and adds to TALLY how many of
  # its runs were placed whole (the causes add up, nothing unanswered) and how many it holds
  python3 - "$@" <<'PY'
import json, sys
path, label = sys.argv[1], sys.argv[2]
j = json.load(open(path))
runs = j["runs"] if "runs" in j else [j]
bad = 0
for r in runs:
    l = r["lost_by_cause"]
    causes = ("sender", "path", "reflector_socket", "reflector", "unanswered")
    total = sum(l[c] or 0 for c in causes)
    rate = r.get("offered_pps", 0)
    ok = total == l["lost"] and l["unanswered"] == 0
    bad += not ok
    print(f"{label} {rate/1000:g} kpps: lost {l['lost']} = " + " + ".join(f"{c} {l[c]}" if l[c] is not None else f"{c} (not counted)" for c in causes)
          + ("  placed" if ok else "  NOT PLACED"))
with open(sys.argv[3], "a") as tally:
    tally.write("%d %d\n" % (len(runs) - bad, len(runs)))
PY
}
tally=$out/tally
for i in $(seq 1 "$runs"); do
  echo "== sitting $i"
  "$latlab" demo --duration 2s --out "$out/demo-$i" >"$out/demo-$i.log" 2>&1
  check "$out/demo-$i/summary.json" "demo" "$tally"
  nsenter --net=/run/netns/$ns "$latlab" echo --listen 127.0.0.1:7777 >/dev/null 2>&1 &
  echo_pid=$!
  until ip netns exec "$ns" grep -q ':1E61 ' /proc/net/udp; do sleep 0.05; done
  nsenter --net=/run/netns/$ns "$latlab" gen --target 127.0.0.1:7777 --rate 100k \
    --duration 3s --grace 1s --json "$out/gen-$i.json" >/dev/null 2>"$out/gen-$i.err" &
  gen=$!
  sleep 1
  kill -STOP "$echo_pid"; sleep 0.3; kill -CONT "$echo_pid"
  wait "$gen" || true
  kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true; echo_pid=
  check "$out/gen-$i.json" "gen, reflector stopped 300 ms" "$tally"
done
awk '{p += $1; n += $2} END {print "== every lost probe placed in " p " of " n " runs"}' "$tally"

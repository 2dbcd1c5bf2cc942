#!/usr/bin/env bash
# A flaky naive gate made steady: the same `latlab gen` run repeated RUNS times (default 20)
# on loopback against `latlab echo`, with a p99 limit near the p99 of a first run, gated two
# ways: the naive gate (the point estimate at or under the limit) and latlab's verdict
# (`--assert 'p99<=LIMIT'`, decided from the 95% interval). Prints one line per run and how
# often each gate changed its answer from one run to the next: for latlab both every change
# and the contradictions (a pass after a fail or a fail after a pass, inconclusive runs
# between them skipped), which only runs whose intervals do not overlap can give.
#   bench/gates-flaky.sh [RUNS] [RATE] [DURATION]     (LATLAB=path/to/latlab to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
rate=${2:-2k}
duration=${3:-3s}
if [ -z "${LATLAB:-}" ]; then
  cargo build --release -q -p latlab
  LATLAB=$PWD/target/release/latlab
fi
port=$((20000 + $$ % 10000))
tmp=$(mktemp -d)
"$LATLAB" echo --listen 127.0.0.1:$port --poll block >/dev/null 2>&1 &
echo_pid=$!
cleanup() { kill "$echo_pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
sleep 0.5
p99() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["latency_ns"]["p99"])' "$1"; }
"$LATLAB" gen --target 127.0.0.1:$port --rate "$rate" --duration "$duration" --poll block \
  --json "$tmp/pilot.json" >/dev/null
limit_ns=$(p99 "$tmp/pilot.json")
echo "limit: p99<=${limit_ns}ns (the p99 of a first run), $runs runs of $duration at $rate"
naive_prev=""; gate_prev=""; decided_prev=""; naive_flips=0; gate_flips=0; contradictions=0
declare -A naive_count=() gate_count=()
for i in $(seq 1 "$runs"); do
  "$LATLAB" gen --target 127.0.0.1:$port --rate "$rate" --duration "$duration" --poll block \
    --json "$tmp/run.json" --assert "p99<=${limit_ns}ns" >/dev/null 2>&1 || true
  read -r naive gate line < <(python3 - "$tmp/run.json" "$limit_ns" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
limit = float(sys.argv[2])
a = s["assertions"][0]
naive = "pass" if a["estimate"] is not None and a["estimate"] <= limit else "fail"
print(naive, a["verdict"], f'p99 {a["estimate"]/1e3:.1f} us [{a["low"]/1e3:.1f}, {a["high"]/1e3:.1f}]')
PY
)
  echo "run $i: naive $naive, latlab $gate ($line)"
  naive_count[$naive]=$(( ${naive_count[$naive]:-0} + 1 ))
  gate_count[$gate]=$(( ${gate_count[$gate]:-0} + 1 ))
  [ -n "$naive_prev" ] && [ "$naive" != "$naive_prev" ] && naive_flips=$((naive_flips + 1))
  [ -n "$gate_prev" ] && [ "$gate" != "$gate_prev" ] && gate_flips=$((gate_flips + 1))
  if [ "$gate" != inconclusive ]; then
    [ -n "$decided_prev" ] && [ "$gate" != "$decided_prev" ] && contradictions=$((contradictions + 1))
    decided_prev=$gate
  fi
  naive_prev=$naive; gate_prev=$gate
done
echo "naive gate: pass ${naive_count[pass]:-0}, fail ${naive_count[fail]:-0}; changed its answer $naive_flips times in $((runs - 1))"
echo "latlab: pass ${gate_count[pass]:-0}, inconclusive ${gate_count[inconclusive]:-0}, fail ${gate_count[fail]:-0}; changed its answer $gate_flips times in $((runs - 1)), a pass against a fail $contradictions times"

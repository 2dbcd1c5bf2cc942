#!/usr/bin/env bash
# What --ui costs: the emulator's release error and the generator's latency with the control
# panel and the gen board open and charting in headless Chromium ("open"), with the pages
# served but no browser on them ("served": latlab's own part), and without --ui ("off"),
# alternated in one sitting (root). Each point: `latlab run --delay 1ms -- latlab echo`
# in a namespace standing for the host (made here), and `latlab gen` at RATE through it from
# there; with the page, `run --ui` and `gen --ui`, each page open in a Chromium of its own.
# Run it under the machine's benchmark lock: flock /tmp/latlab-bench.lock bench/ui.sh
#
# Usage: bench/ui.sh [SECONDS] [PAIRS] [RATE] [OUT_DIR]
#        (default 10 s a point, 3 pairs, 20k/s, bench/results/ui-<time>)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
pairs=${2:-3}
rate=${3:-20k}
out=${4:-bench/results/ui-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
cargo build --release -q -p latlab
latlab=$PWD/target/release/latlab
chromium=${CHROMIUM:-/usr/bin/chromium}

ns="latlab-uibench-$$-host"
pids=()
profiles=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  for d in "${profiles[@]:-}"; do [ -n "$d" ] && rm -rf "$d"; done
  ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$ns"
ip -n "$ns" link set lo up
in_ns=(nsenter "--net=/run/netns/$ns")

# browse URL: a headless Chromium showing URL, in the host namespace, until the end.
browse() {
  local dir
  dir=$(mktemp -d)
  profiles+=("$dir")
  "${in_ns[@]}" "$chromium" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --disable-quic --no-first-run --disable-background-networking --disable-component-update \
    --disable-sync --user-data-dir="$dir" --window-size=1280,720 "$1" >/dev/null 2>&1 &
  pids+=("$!")
}

# line LOG TEXT: waits (up to 60 s) for a line of LOG containing TEXT and prints it.
line() {
  for _ in $(seq 600); do
    if grep -q -- "$2" "$1" 2>/dev/null; then grep -m1 -- "$2" "$1"; return; fi
    sleep 0.1
  done
  echo "no line with '$2' in $1:" >&2; cat "$1" >&2; exit 1
}

# point NAME UI OPEN: one run, UI 1 with --ui (OPEN 1: each page open in a browser), 0 without.
point() {
  local name=$1 ui=$2 open=$3 run_ui=() gen_ui=()
  if [ "$ui" = 1 ]; then run_ui=(--ui 127.0.0.1:0); gen_ui=(--ui 127.0.0.1:0); fi
  local first=${#pids[@]}
  "${in_ns[@]}" "$latlab" run --delay 1ms --json "$out/$name-emu.json" "${run_ui[@]}" -- \
    "$latlab" echo --listen 0.0.0.0:7777 2>"$out/$name-run.log" &
  local run=$!
  pids+=("$run")
  local start addr
  start=$(line "$out/$name-run.log" " in namespace ")
  addr=$(sed -E 's/.* in namespace [^ ]+ at ([0-9.]+);.*/\1/' <<<"$start")
  line "$out/$name-run.log" "listening on" >/dev/null
  if [ "$open" = 1 ]; then browse "$(line "$out/$name-run.log" "control panel on" | sed 's/.*control panel on //')"; fi
  sleep 3
  "${in_ns[@]}" "$latlab" gen --target "$addr:7777" --rate "$rate" --duration "${secs}s" \
    --json "$out/$name-gen.json" "${gen_ui[@]}" >"$out/$name-gen.txt" 2>"$out/$name-gen.log" &
  local gen=$!
  pids+=("$gen")
  if [ "$ui" = 1 ]; then
    if [ "$open" = 1 ]; then
      browse "$(line "$out/$name-gen.log" "live page on" | sed 's/.*live page on //')"
    fi
    # After its run, gen --ui keeps its page up until Ctrl-C.
    line "$out/$name-gen.log" "the run is over" >/dev/null
    sleep 2
    kill -INT "$gen"
  fi
  wait "$gen" || true
  kill -TERM "$run"; wait "$run" || true
  # This point's browsers end with it.
  for p in "${pids[@]:$first}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=("${pids[@]:0:$first}")
}

for i in $(seq "$pairs"); do
  point "off-$i" 0 0
  point "served-$i" 1 0
  point "open-$i" 1 1
done

python3 - "$out" "$pairs" <<'PY' | tee "$out/results.md"
import json, sys, os
out, pairs = sys.argv[1], int(sys.argv[2])
def us(ns): return f"{ns / 1000:.1f}"
print("| run | page | gen p50 (µs) | gen p99 (µs) | emulator release error p99 up / down (µs) |")
print("|---|---|---|---|---|")
for i in range(1, pairs + 1):
    for page in ("off", "served", "open"):
        g = json.load(open(f"{out}/{page}-{i}-gen.json"))
        e = json.load(open(f"{out}/{page}-{i}-emu.json"))
        rel = [e[d]["release_error_ns"]["p99"] for d in ("a_to_b", "b_to_a")]
        print(f"| {i} | {page} | {us(g['latency_ns']['p50'])} | {us(g['latency_ns']['p99'])} | "
              f"{us(rel[0])} / {us(rel[1])} |")
PY
echo "results: $out"

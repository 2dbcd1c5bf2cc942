#!/usr/bin/env bash
# The core plan at the defaults (issue 22): `latlab emu`, `echo` and `gen`, each started by hand
# in its own namespace (client — emu — server), at rising rates of round trips, side by side in
# one run with the old defaults. Root.
#
#   new:      emu, echo, gen at their defaults (--poll auto: the core plan gives the CPUs out;
#             as root the emulator sleeps between frames in SCHED_FIFO, "rt" in the table)
#   old:      emu --poll block (what auto was on 2 CPUs), echo and gen --poll busy
#   explicit: emu at its default, echo and gen told --poll busy (they spin where they are
#             told, beside the emulator: its contention notice)
#
# Usage: bench/core-plan.sh [SECONDS] [RATES…]   prints a markdown table; the emulator's
# release error (worse of its two directions), answered = received / sent, the emulator's CPU
# time over its run's (`cpu.cores`: 1.0 for a loop that had its CPU to itself) and how busy the
# host was in the second before the point (what else ran: others' builds compete with the
# emulator too). Before each point it waits, at most 30 s, for a second at most 15% busy.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
shift || true
rates=("$@")
[ ${#rates[@]} -eq 0 ] && rates=(20k 50k 100k 200k)
cargo build --release -q
latlab=$PWD/target/release/latlab
c="latlab-bench-$$-client"; e="latlab-bench-$$-emu"; s="latlab-bench-$$-server"
out=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for n in "$c" "$e" "$s"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
for n in "$c" "$e" "$s"; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip -n "$c" link add veth0 type veth peer name emu-a netns "$e"
ip -n "$s" link add veth0 type veth peer name emu-b netns "$e"
ip -n "$c" addr add 198.18.4.1/24 dev veth0
ip -n "$s" addr add 198.18.4.2/24 dev veth0
for n in "$c" "$s"; do ip -n "$n" link set veth0 up; done
for d in emu-a emu-b; do ip -n "$e" link set "$d" up; done
target=198.18.4.2:7777

# How busy the host's CPUs were over the next second, in % (from /proc/stat).
busy() {
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local total=0 idle=$(( (b[4] + b[5]) - (a[4] + a[5]) ))
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}

# Waits at most 30 s for a quiet second; sets $load to how busy the last one was.
quiet() {
  for _ in $(seq 30); do load=$(busy); [ "$load" -le 15 ] && return 0; done
  return 0
}

# point NAME RATE EMU_POLL ECHO_POLL GEN_POLL
point() {
  local name=$1 rate=$2 emu_poll=$3 echo_poll=$4 gen_poll=$5 f="$out/$1-$2"
  local poll_flag=() ; pids=()
  quiet
  [ "$emu_poll" != default ] && poll_flag=(--poll "$emu_poll")
  ip netns exec "$e" "$latlab" emu --iface-a emu-a --iface-b emu-b "${poll_flag[@]}" \
    --duration $((secs + 3))s --json "$f-emu.json" >/dev/null 2>"$f-emu.err" &
  pids+=($!)
  sleep 0.5
  poll_flag=(); [ "$echo_poll" != default ] && poll_flag=(--poll "$echo_poll")
  ip netns exec "$s" "$latlab" echo --listen "$target" "${poll_flag[@]}" \
    --duration $((secs + 2))s --json "$f-echo.json" >/dev/null 2>&1 &
  pids+=($!)
  sleep 0.5
  poll_flag=(); [ "$gen_poll" != default ] && poll_flag=(--poll "$gen_poll")
  ip netns exec "$c" "$latlab" gen --target "$target" --rate "$rate" "${poll_flag[@]}" \
    --duration "${secs}s" --rcvbuf 4M --json "$f-gen.json" >/dev/null 2>&1 || true
  for p in "${pids[@]}"; do wait "$p" || true; done
  pids=()
  python3 - "$f" "$name" "$rate" "$load" <<'PY'
import json, sys
f, name, rate, load = sys.argv[1:]
emu = json.load(open(f + "-emu.json"))
gen = json.load(open(f + "-gen.json"))
echo = json.load(open(f + "-echo.json"))
worse = lambda k: max(emu[d]["release_error_ns"][k] or 0 for d in ("a_to_b", "b_to_a"))
def where(r):
    p = r.get("placement") or {}
    cpu = p.get("cpu")
    rt = " rt" if p.get("realtime") else ""
    return "%s%s%s" % (p.get("poll", "?"), "" if cpu is None else "@%d" % cpu, rt)
answered = 100.0 * gen["received"] / max(gen["sent"], 1)
ok = worse("p50") <= 5000 and worse("p99") <= 50000 and answered >= 99.0
notice = "; ".join(c["note"].split(":")[0] + " late" for c in emu.get("contention") or [])
cores = (emu.get("cpu") or {}).get("cores")
print("| %s | %s | %.1f | %.1f | %.2f | %.0f | %s / %s / %s | %s | %s | %s | %s |" % (
    name, rate, worse("p50") / 1000, worse("p99") / 1000, answered,
    gen["latency_ns"]["p50"] / 1000 if gen["latency_ns"]["p50"] else float("nan"),
    where(emu), where(echo), where(gen), "yes" if ok else "no", notice or "-",
    "-" if cores is None else "%.2f" % cores, load + "%"))
PY
}

printf '| defaults | rate | release p50 µs | release p99 µs | answered %% | RTT p50 µs | emu / echo / gen | target held | contention notice | emu cores | host busy before |\n'
printf '|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|\n'
for rate in "${rates[@]}"; do
  point new "$rate" default default default
  point old "$rate" block busy busy
  point explicit "$rate" default busy busy
done

#!/usr/bin/env bash
# The emulator's memory after a burst (issue 25, part 4): `latlab emu` with a long delay queues
# a burst of 1,400-byte frames (~100 MB of them), then the queue drains; the emulator's RSS
# (VmRSS) is sampled every 100 ms before, during and after, with the frames it sent on. Prints
# the idle RSS (just before the burst), the peak, the RSS 0, 1, 2, 3 and 5 s after the last
# frame left, and how long after that it was back within 10% of idle.
# Root (namespaces). Run it under the bench lock: flock /tmp/latlab-bench.lock bench/emu-memory.sh
#
# Usage: bench/emu-memory.sh [RATE] [DELAY] [SECONDS] [OUT_DIR]
#        (default 35k frames/s for 2 s through a 2 s delay: ~70,000 frames, ~100 MB queued)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-35k}
delay=${2:-2s}
secs=${3:-2}
out=${4:-bench/results/emu-memory-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
[ "$(id -u)" = 0 ] || { echo "bench/emu-memory.sh needs root (namespaces)" >&2; exit 1; }
cargo build --release -q
latlab=$PWD/target/release/latlab

c="latlab-bm-$$-client"; e="latlab-bm-$$-emu"; s="latlab-bm-$$-server"
emu_pid=
cleanup() {
  [ -n "$emu_pid" ] && { kill -INT "$emu_pid" 2>/dev/null || true; wait "$emu_pid" 2>/dev/null || true; }
  for n in "$c" "$e" "$s"; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for n in "$c" "$e" "$s"; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip -n "$c" link add veth0 type veth peer name emu-a netns "$e"
ip -n "$s" link add veth0 type veth peer name emu-b netns "$e"
ip -n "$c" addr add 198.18.7.1/24 dev veth0
ip -n "$s" addr add 198.18.7.2/24 dev veth0
for l in "$c veth0" "$s veth0" "$e emu-a" "$e emu-b"; do set -- $l; ip -n "$1" link set "$2" up; done
mac() { ip -n "$1" -o link show "$2" | grep -o 'link/ether [^ ]*' | cut -d' ' -f2; }
# No ARP through a 2 s link: each end knows the other.
ip -n "$c" neigh replace 198.18.7.2 lladdr "$(mac "$s" veth0)" dev veth0 nud permanent
ip -n "$s" neigh replace 198.18.7.1 lladdr "$(mac "$c" veth0)" dev veth0 nud permanent

ip netns exec "$e" "$latlab" emu --iface-a emu-a --iface-b emu-b --delay "$delay" --limit 1000000 \
  --json "$out/emu.json" >"$out/emu.log" 2>&1 &
emu_pid=$!
sleep 1

# Samples every 100 ms: time, the emulator's VmRSS (kB), frames that came in from the client
# and frames it sent on to the server (emu-a's rx_packets, emu-b's tx_packets, read through the
# emulator's own /proc/PID/net/dev: no process started).
samples="$out/samples.csv"
start=$(date +%s.%N)
sample_loop() {
  while kill -0 "$emu_pid" 2>/dev/null; do
    local rss io
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$emu_pid/status" 2>/dev/null) || break
    io=$(sed 's/:/ /' "/proc/$emu_pid/net/dev" 2>/dev/null |
      awk '$1 == "emu-a" {a = $3} $1 == "emu-b" {b = $11} END {print a "," b}') || break
    printf '%s,%s,%s\n' "$(date +%s.%N)" "$rss" "$io" >>"$samples.raw"
    sleep 0.1
  done
}
: >"$samples.raw"
sample_loop &
sampler=$!
sleep 2   # idle
ip netns exec "$c" "$latlab" gen --target 198.18.7.2:9 --rate "$rate" --size 1400 \
  --duration "${secs}s" --no-check --grace 10ms --poll block --json "$out/gen.json" >"$out/gen.log" 2>&1 || true
# The queue drains one delay after the last frame went in; then watch it for 8 s.
sleep "$(python3 -c "import sys; print(float(sys.argv[1].rstrip('s')) + 8)" "$delay")"
kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true
kill -INT "$emu_pid"; wait "$emu_pid" || true; emu_pid=

python3 - "$samples.raw" "$start" "$out" <<'PY'
import json, sys
raw, start, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rows = []
for line in open(raw):
    t, rss, rx, tx = line.strip().split(",")
    rows.append((float(t) - start, int(rss), int(rx), int(tx)))
with open(f"{out}/samples.csv", "w") as f:
    f.write("t_s,rss_kb,in_packets,out_packets\n")
    for r in rows:
        f.write(f"{r[0]:.2f},{r[1]},{r[2]},{r[3]}\n")
# Idle: the last sample before the burst came in; drained: the first sample from which the
# far end got no more than a few stray frames (ARP, IPv6) to the end.
burst = next(i for i, r in enumerate(rows) if r[2] > rows[0][2] + 100)
idle = rows[max(burst - 1, 0)][1]
peak = max(r[1] for r in rows)
out_final = rows[-1][3]
drained = next(r[0] for r in rows if r[3] >= out_final - 10)
def rss_at(dt):
    after = [r for r in rows if r[0] >= drained + dt]
    return after[0][1] if after else None
back = next((r[0] - drained for r in rows if r[0] >= drained and r[1] <= idle * 1.1), None)
result = {
    "frames_through": out_final - rows[0][3],
    "rss_kb_at_start": rows[0][1], "idle_rss_kb": idle, "peak_rss_kb": peak,
    "rss_kb_after_drain": {f"{dt}s": rss_at(dt) for dt in (0, 1, 2, 3, 5)},
    "seconds_to_within_10pct_of_idle": back,
}
json.dump(result, open(f"{out}/result.json", "w"), indent=1)
print(json.dumps(result, indent=1))
PY

#!/usr/bin/env bash
# A trace-driven link against its trace: a saturating UDP flow (iperf3 -u, 1,472-byte datagrams,
# twice the trace's capacity) through `latlab emu --a-to-b "trace=FILE"`, counted by iperf3's
# receiver, against the trace's own capacity over the same time (a queue of 50 frames, so what it
# holds at the end is under 1% of a 10-second run). Traces made here: a constant one
# (an opportunity every millisecond: 12 Mbit/s of IP packets) and a bursty one (bursts of 8
# opportunities every 4 ms, 24 Mbit/s). In namespaces made here (client — emu — server), removed
# on exit and on every signal.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
cargo build --release -q
L=$PWD/target/release/latlab
command -v iperf3 >/dev/null || { apt-get update -qq && apt-get install -y -qq iperf3 >/dev/null; }
P=latlab-bench-trace-$$
C=$P-client; E=$P-emu; S=$P-server
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for ns in "$C" "$E" "$S"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for ns in "$C" "$E" "$S"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n "$C" link add veth0 type veth peer name emu-a netns "$E"
ip -n "$S" link add veth0 type veth peer name emu-b netns "$E"
ip -n "$C" addr add 198.18.0.1/24 dev veth0; ip -n "$S" addr add 198.18.0.2/24 dev veth0
for ns in "$C" "$S"; do ip -n "$ns" link set veth0 up; done
for dev in emu-a emu-b; do ip -n "$E" link set "$dev" up; done
seq 1 1 > "$dir/constant.trace"                       # one opportunity each millisecond
{ for i in 1 2 3 4 5 6 7 8; do echo 4; done; } > "$dir/bursty.trace"   # 8 at once, every 4 ms
ip netns exec "$S" iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
sleep 0.5
for name in constant bursty; do
  trace="$dir/$name.trace"
  capacity=$(awk 'END {print NR * 1500 * 8 / ($1 / 1000)}' "$trace")
  ip netns exec "$E" "$L" emu --iface-a emu-a --iface-b emu-b --a-to-b "trace=$trace limit=50" \
      --duration $((seconds + 4))s --json "$dir/$name.json" >/dev/null 2>&1 & emu=$!
  sleep 1
  got=$(ip netns exec "$C" iperf3 -c 198.18.0.2 -p 5201 -u -b $((capacity * 2 / 1000000))M -l 1472 \
      -t "$seconds" -J 2>/dev/null | python3 -c 'import json,sys; e=json.load(sys.stdin)["end"]["sum"]; print(e["bits_per_second"] * (1500 / 1472) * (1 - e["lost_percent"] / 100))')
  wait "$emu" || true
  awk -v g="$got" -v c="$capacity" -v n="$name" 'BEGIN {printf "%s trace: capacity %.3f Mbit/s of IP packets; the receiver got %.3f Mbit/s of IP packets (%.2f%%)\n", n, c / 1e6, g / 1e6, 100 * g / c}'
done

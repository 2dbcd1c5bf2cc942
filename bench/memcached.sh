#!/usr/bin/env bash
# memcached over UDP, measured by latlab, on a veth pair between two network namespaces
# (root only). memcached -U runs one worker thread (-t 1) pinned to CPU 1 in the server
# namespace; every client is pinned to CPU 0 in the client namespace.
#   1. latlab gen --protocol memcached at a steady rate: p50 / p99.9 from the intended send time
#   2. the same, gets only, at rising rates: the highest get rate one core keeps answered
#   3. latlab gen (latlab's own probes) against latlab echo on the same path and cores: the
#      path alone, so the difference is what memcached adds
#   4. memaslap --udp (libmemcached-tools' memcaslap), closed loop, one connection: its own view
# Run it under the machine's benchmark lock: flock /tmp/latlab-bench.lock bench/memcached.sh
#
# Usage: bench/memcached.sh [SECONDS] [OUT_DIR]   (default 5 s a point, bench/results/memcached-<time>)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
out=${2:-bench/results/memcached-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
cargo build --release -q -p latlab
latlab=$PWD/target/release/latlab
memaslap=$(command -v memaslap || command -v memcaslap || true)

pids=()
ns_c="latlab-mcbench-$$-client"
ns_s="latlab-mcbench-$$-server"
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  ip netns del "$ns_c" 2>/dev/null || true
  ip netns del "$ns_s" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns_c"; ip netns add "$ns_s"
ip -n "$ns_c" link add veth0 type veth peer name veth0 netns "$ns_s"
ip -n "$ns_c" addr add 198.18.3.1/30 dev veth0
ip -n "$ns_s" addr add 198.18.3.2/30 dev veth0
for n in "$ns_c" "$ns_s"; do ip -n "$n" link set lo up; ip -n "$n" link set veth0 up; done
server=198.18.3.2
client=(ip netns exec "$ns_c" taskset -c 0)
on_server=(ip netns exec "$ns_s" taskset -c 1)

start() { # start LOG CMD...: a server in the server namespace on CPU 1
  local log=$1; shift
  "${on_server[@]}" "$@" >"$log" 2>&1 &
  pids+=("$!")
  sleep 0.5
}
stop() {
  local p=${pids[-1]}
  kill "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  unset 'pids[-1]'
}

# The server namespace's UDP receive-buffer drops (/proc/net/snmp's Udp RcvbufErrors): where
# memcached's socket overflowed.
rcvbuf_errors() { ip netns exec "$ns_s" awk '/^Udp:/ { if (h) print $6; h = 1 }' /proc/net/snmp; }

# point NAME ARGS…: one latlab gen run; its summary in $out/NAME.json, a line in results.txt.
point() {
  local name=$1; shift
  local drops_before
  drops_before=$(rcvbuf_errors)
  "${client[@]}" "$latlab" gen --poll busy --cpu 0 --duration "${secs}s" --json "$out/$name.json" "$@" \
    >"$out/$name.txt" 2>&1 || { echo "$name failed: $(tail -1 "$out/$name.txt")"; return; }
  python3 - "$out/$name.json" "$name" <<'EOF' | tee -a "$out/results.txt"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["latency_ns"]
us = lambda v: "-" if v is None else f"{v / 1000:.1f}"
p = d.get("protocol") or {}
answered = p.get("answered", d["received"])
outcomes = " ".join(f"{k}={v}" for k, v in sorted(p.get("outcomes", {}).items()) if v)
print(f"{sys.argv[2]}: offered {d['offered_pps']:.0f}/s achieved {d['achieved_pps']:.0f}/s "
      f"sent {d['sent']} answered {answered} lost {d['lost']} "
      f"p50 {us(l['p50'])} p99 {us(l['p99'])} p99.9 {us(l['p99_9'])} max {us(l['max'])} us "
      f"{outcomes}")
EOF
  echo "  server socket drops (warm-up included): $(($(rcvbuf_errors) - drops_before))" |
    tee -a "$out/results.txt"
}

: >"$out/results.txt"
start "$out/memcached.log" memcached -U 11211 -p 11211 -l "$server" -t 1 -u nobody
mc=(--protocol memcached --target "$server:11211" --warmup 1s)
point mc-10k "${mc[@]}" --rate 10000
point mc-50k "${mc[@]}" --rate 50000
for rate in 50000 100000 150000 200000 250000 300000; do
  point "mc-gets-$rate" "${mc[@]}" --rate "$rate" --set-ratio 0
done
if [ -n "$memaslap" ]; then
  # Closed loop: one connection, one request at a time; its TPS and latency are its own.
  "${client[@]}" "$memaslap" -s "$server:11211" -U -T 1 -c 1 -t "${secs}s" -X 100 -S "${secs}s" \
    >"$out/memaslap.txt" 2>&1 || echo "memaslap failed: $(tail -1 "$out/memaslap.txt")"
  grep -E "TPS|Get|Set|Avg|Min|Max" "$out/memaslap.txt" | head -20 | tee -a "$out/results.txt"
fi
stop
# Blocking, as memcached (libevent) waits for its datagrams.
start "$out/echo.log" "$latlab" echo --listen "$server:7" --poll block --cpu 1
point echo-10k --target "$server:7" --rate 10000
point echo-50k --target "$server:7" --rate 50000
stop
echo "results in $out"

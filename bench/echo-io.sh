#!/usr/bin/env bash
# latlab echo over kernel sockets vs over AF_XDP, side by side in one run, on a veth pair
# between two namespaces (root). The generator is the same (kernel sockets) for both.
# Usage: bench/echo-io.sh [SECONDS]      prints a table of p50 / p99 / p99.9 in µs
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
cargo build --release -q
latlab=$PWD/target/release/latlab
c="latlab-bench-$$-client"; s="latlab-bench-$$-server"
out=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  ip netns del "$c" 2>/dev/null || true; ip netns del "$s" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$c"; ip netns add "$s"
ip -n "$c" link add veth0 type veth peer name veth0 netns "$s"
ip -n "$c" addr add 198.18.3.1/24 dev veth0; ip -n "$s" addr add 198.18.3.2/24 dev veth0
for n in "$c" "$s"; do ip -n "$n" link set lo up; ip -n "$n" link set veth0 up; done
printf '| echo I/O | rate | p50 | p99 | p99.9 | max | lost |\n|---|---:|---:|---:|---:|---:|---:|\n'
for io in socket xdp; do
  for rate in 1000 50000; do
    extra=(); [ "$io" = xdp ] && extra=(--iface veth0)
    ip netns exec "$s" taskset -c 0 "$latlab" echo --io "$io" "${extra[@]}" --listen 198.18.3.2:7777 \
      --duration $((secs + 3))s >/dev/null 2>&1 &
    pid=$!
    sleep 1
    ip netns exec "$c" taskset -c 1 "$latlab" gen --target 198.18.3.2:7777 --rate "$rate" \
      --duration "${secs}s" --threads 1 --rcvbuf 4M --json "$out/$io-$rate.json" >/dev/null
    wait "$pid" || true; pid=
    python3 - "$out/$io-$rate.json" "$io" "$rate" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); l = s["latency_ns"]
f = lambda v: "-" if v is None else "%.1f" % (v / 1000)
print("| %s | %s | %s | %s | %s | %s | %d |" % (sys.argv[2], sys.argv[3], f(l["p50"]), f(l["p99"]), f(l["p99_9"]), f(l["max"]), s["lost"]))
PY
  done
done

#!/usr/bin/env bash
# DualPI2 against CoDel and tail drop at one 20 Mbit/s bottleneck, in one sitting: a cubic TCP
# flow with ECN (iperf3 -C cubic, net.ipv4.tcp_ecn=1 at both ends) and an ECT(1) UDP stream
# (iperf3 -u --tos 1: 2 Mbit/s of 200-byte datagrams) from client to server through
# `latlab emu --a-to-b "rate=20mbit QUEUE"`, QUEUE one of
#   aqm=dualpi2 ecn   the TCP flow in the classic queue, the UDP stream in the L4S queue
#   aqm=codel ecn     one queue for both
#   (tail)            tail drop at the default 1000 frames, one queue for both
# run ROUNDS times (default 1) in turn. Per run and queue: frames sent, the sojourn p50 / p99
# the emulator recorded over the whole run (the flows' start included), CE marks and drops (the
# discipline's and the limit's), and the UDP stream's loss and the TCP flow's goodput as
# iperf3 counted them. For codel and tail the one queue's sojourn is the UDP stream's as well
# ("shared"; its share of the queue's frames in brackets).
# In namespaces made here (client — emu — server), removed on exit and on every signal.
# Run it under the machine's benchmark lock: flock /tmp/latlab-bench.lock bench/dualpi2.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-1}
seconds=${SECONDS_PER_RUN:-20}
cargo build --release -q
L=$PWD/target/release/latlab
command -v iperf3 >/dev/null || { apt-get update -qq && apt-get install -y -qq iperf3 >/dev/null; }
P=latlab-bench-dualpi2-$$
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
ip -n "$C" link add veth0 address 02:00:00:00:00:01 type veth peer name emu-a netns "$E"
ip -n "$S" link add veth0 address 02:00:00:00:00:02 type veth peer name emu-b netns "$E"
ip -n "$C" addr add 198.18.0.1/24 dev veth0; ip -n "$S" addr add 198.18.0.2/24 dev veth0
for ns in "$C" "$S"; do ip -n "$ns" link set veth0 up; done
for dev in emu-a emu-b; do ip -n "$E" link set "$dev" up; done
# No ARP across a bridge that comes and goes between runs.
ip -n "$C" neigh replace 198.18.0.2 lladdr 02:00:00:00:00:02 dev veth0 nud permanent
ip -n "$S" neigh replace 198.18.0.1 lladdr 02:00:00:00:00:01 dev veth0 nud permanent
for ns in "$C" "$S"; do ip netns exec "$ns" sh -c 'echo 1 > /proc/sys/net/ipv4/tcp_ecn'; done
ip netns exec "$S" iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
ip netns exec "$S" iperf3 -s -p 5202 >/dev/null 2>&1 & pids+=($!)
sleep 0.5

one() { # NAME SPEC ROUND
  local name=$1 spec=$2 round=$3
  ip netns exec "$E" "$L" emu --iface-a emu-a --iface-b emu-b --a-to-b "rate=20mbit $spec" \
      --duration $((seconds + 4))s --json "$dir/$round-$name.json" >/dev/null 2>&1 & local emu=$!
  sleep 1
  ip netns exec "$C" iperf3 -c 198.18.0.2 -p 5201 -C cubic -t "$seconds" -J \
      >"$dir/$round-$name.tcp.json" 2>/dev/null & local tcp=$!
  ip netns exec "$C" iperf3 -c 198.18.0.2 -p 5202 -u -b 2M -l 200 --tos 1 -t "$seconds" -J \
      >"$dir/$round-$name.udp.json" 2>/dev/null
  wait "$tcp" || true
  wait "$emu" || true
}
for round in $(seq "$rounds"); do
  one dualpi2 "aqm=dualpi2 ecn" "$round"
  one codel "aqm=codel ecn" "$round"
  one tail "" "$round"
done

echo "latlab emu --a-to-b \"rate=20mbit QUEUE\", ${seconds} s per run, $rounds round(s): one cubic+ECN TCP flow and one ECT(1) UDP stream (2 Mbit/s, 200-byte datagrams)"
python3 - "$dir" "$rounds" <<'EOF'
import json, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def ms(s, k):
    v = s.get(k)
    return "-" if v is None else f"{v / 1e6:.2f}"
print("| round | queue discipline | queue | frames sent | sojourn p50 (ms) | p99 (ms) | marks | drops | UDP loss | TCP goodput (Mbit/s) |")
print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in range(1, rounds + 1):
    for name in ["dualpi2", "codel", "tail"]:
        emu = json.load(open(f"{d}/{r}-{name}.json"))["a_to_b"]
        tcp = json.load(open(f"{d}/{r}-{name}.tcp.json"))["end"]["sum_received"]["bits_per_second"] / 1e6
        udp = json.load(open(f"{d}/{r}-{name}.udp.json"))["end"]["sum"]
        link = emu["link"]
        limit = link["dropped_queue_frames"] + link["dropped_queue_bytes"]
        tail = f"{udp['lost_percent']:.2f}% | {tcp:.1f} |"
        if name == "dualpi2":
            for q in ["classic", "l4s"]:
                x = emu["dualpi2"][q]
                s = x["sojourn_ns"]
                print(f"| {r} | dualpi2 (ecn) | {'classic (TCP)' if q == 'classic' else 'L4S (UDP)'} | {x['sent']} | {ms(s, 'p50')} | {ms(s, 'p99')} | {x['marked']} | {x['dropped']} | {tail}")
            if limit:
                print(f"| {r} | dualpi2 (ecn) | shared limit | | | | | {limit} | | |")
        else:
            s = emu["sojourn_ns"]
            share = 100 * udp["packets"] / max(s["count"], 1)
            label = "codel (ecn)" if name == "codel" else "tail (1000 frames)"
            print(f"| {r} | {label} | shared (UDP {share:.0f}% of frames) | {s['count']} | {ms(s, 'p50')} | {ms(s, 'p99')} | {link['aqm_mark']} | {link['aqm_drop'] + link['aqm_overflow'] + limit} | {tail}")
EOF

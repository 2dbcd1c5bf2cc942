#!/usr/bin/env bash
# Kernel sockets vs AF_XDP, side by side in one run, on veth pairs between namespaces (root).
#   1. generator pps of one core (CPU 1), 64-byte UDP payload (110-byte frames):
#      latlab gen --io socket, latlab gen --io xdp, and trafgen (netsniff-ng) with the same frame
#   2. forwarding, RFC 2544 on 64-byte frames: `latlab rfc2544 --dut D` for the kernel's IP
#      forwarding, latlab fwd by XDP redirect and over AF_XDP, DPDK testpmd over AF_XDP, latlab
#      emu over AF_PACKET and over AF_XDP (no impairment); each in its own lab with the DUT's
#      receive work on the DUT's CPU and the ends' on the other; the NDR, the rate at
#      saturation and the cycles per frame by step there (the kernel's own: every sample but
#      idle and user space, which for the kernel's forwarders and the XDP redirect is only the
#      SCHED_IDLE spinner that stands for idle time), with two ratios: fwd-xdp-redirect's
#      kernel cycles per frame against the kernel forwarder's, fwd-xdp's NDR against testpmd's
#   2b. round trips at 1 kpps (gen and echo) through the same three forwarders, delay 0
#   3. the game-server rows (socket, batched, xdp) of `latlab study game-server`, 4 clients
# In part 1 every frame is addressed to a MAC address nobody has, so the receiving veth drops
# it as soon as it arrives (PACKET_OTHERHOST) and every sender pays the same, smallest, receive
# cost; pps are counted on the receiving veth (what arrived), over the sender's own sending
# time.
# Installs netsniff-ng (trafgen) and DPDK's testpmd from Debian's packages if missing.
#
# Usage: bench/xdp.sh [SECONDS] [OUT_DIR] [PARTS]
#        (default 5 s per point; bench/results/xdp-<time>; PARTS any of "gen fwd latency game",
#        all by default). DUTS="kernel fwd-xdp-redirect" chooses part 2's DUTs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
out=${2:-bench/results/xdp-$(date -u +%Y%m%dT%H%M%SZ)}
parts=" ${3:-gen fwd latency game} "
duts=${DUTS:-kernel fwd-xdp-redirect fwd-xdp testpmd-xdp emu emu-xdp}
part() { [[ "$parts" == *" $1 "* ]]; }
mkdir -p "$out"
[ "$(id -u)" = 0 ] || { echo "bench/xdp.sh needs root (namespaces, AF_XDP)" >&2; exit 1; }
if part gen && ! command -v trafgen >/dev/null; then
  apt-get update -qq && apt-get install -y -qq netsniff-ng
fi
# As .ci/run installs it: testpmd and its AF_PACKET and AF_XDP drivers.
if part fwd && [[ " $duts " == *" testpmd"* ]] && ! command -v dpdk-testpmd >/dev/null; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends \
    dpdk-dev librte-net-af-packet23 librte-net-af-xdp23 librte-mempool-ring23
fi
cargo build --release -q
latlab=$PWD/target/release/latlab

c="latlab-bx-$$-client"; e="latlab-bx-$$-emu"; s="latlab-bx-$$-server"
nobody=02:00:00:00:00:99
pid=
echo_pid=
cleanup() {
  for p in $pid $echo_pid; do kill -INT "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  for n in "$c" "$e" "$s"; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mac() { ip -n "$1" -o link show "$2" | grep -o 'link/ether [^ ]*' | cut -d' ' -f2; }
rx_packets() { ip -n "$1" -s -j link show "$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["packets"])'; }

# trafgen NS CPU SECONDS DST_MAC SRC_IP DST_IP: blasts 110-byte frames until SECONDS pass;
# prints its own sending time in seconds.
trafgen_run() {
  local ns=$1 cpu=$2 t=$3 cfg="$out/trafgen-$4.cfg"
  cat >"$cfg" <<EOF
{
  eth(da=$4, type=0x0800),
  ipv4(saddr=$5, daddr=$6, ttl=64, proto=17),
  udp(sport=40000, dport=9),
  fill(0x00, 64)
}
EOF
  ip netns exec "$ns" taskset -c "$cpu" timeout -s INT "$t" trafgen --dev veth0 --conf "$cfg" \
    --cpus 1 -q >"$out/trafgen.log" 2>&1 || true
  python3 - "$out/trafgen.log" <<'PY'
import re, sys
m = re.search(r"(\d+) sec, (\d+) usec on CPU", open(sys.argv[1]).read())
print(int(m.group(1)) + int(m.group(2)) / 1e6 if m else "nan")
PY
}

results="$out/results.jsonl"
: >"$results"
record() { printf '{"part": "%s", "path": "%s", "pps": %s}\n' "$1" "$2" "$3" >>"$results"; }

# --- 1. generator pps, one core -------------------------------------------------------------
if part gen; then
ip netns add "$c"; ip netns add "$s"
ip -n "$c" link add veth0 type veth peer name veth0 netns "$s"
ip -n "$c" addr add 198.18.3.1/24 dev veth0; ip -n "$s" addr add 198.18.3.2/24 dev veth0
for n in "$c" "$s"; do ip -n "$n" link set lo up; ip -n "$n" link set veth0 up; done
ip -n "$c" neigh replace 198.18.3.2 lladdr "$nobody" dev veth0 nud permanent
for io in socket xdp; do
  extra=(); [ "$io" = xdp ] && extra=(--iface veth0)
  ip netns exec "$c" taskset -c 1 "$latlab" gen --io "$io" "${extra[@]}" --target 198.18.3.2:9 \
    --rate 5M --duration "${secs}s" --size 64 --threads 1 --no-check --grace 10ms \
    --json "$out/gen-$io.json" >"$out/gen-$io.log" 2>&1
  record gen "latlab gen --io $io" "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['achieved_pps'])" "$out/gen-$io.json")"
done
before=$(rx_packets "$s" veth0)
took=$(trafgen_run "$c" 1 "$secs" "$nobody" 198.18.3.1 198.18.3.2)
after=$(rx_packets "$s" veth0)
record gen "trafgen" "$(python3 -c "print(($after - $before) / $took)")"
ip netns del "$c"; ip netns del "$s"
fi

# --- 2. forwarding: RFC 2544 on each forwarder ----------------------------------------------
# latlab rfc2544 builds its own client — dut — server lab per DUT: the DUT alone on CPU 1 with
# its interfaces' receive work, the source and both ends' receive work on CPU 0, an AF_XDP
# source that outruns every DUT, a UDP sink that takes the frames. Its NDR search and its
# saturation trial (the DUT's CPU sampled, cycles per frame by step) are kept per DUT.
if part fwd; then
for dut in $duts; do
  "$latlab" rfc2544 --dut "$dut" --sizes 64 --trial 1s --max-trials 8 --no-loss-sweep \
    --b2b-repeats 0 --latency-trials 0 --source xdp --out "$out/rfc2544-$dut" \
    >"$out/rfc2544-$dut.log" 2>&1 || { echo "rfc2544 --dut $dut failed: $out/rfc2544-$dut.log" >&2; continue; }
  python3 - "$out/rfc2544-$dut" "$dut" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/rfc2544.json"))
size, sat = r["sizes"][0], r["saturation"]
# Cycles per received frame: busy (every sample but idle), and the kernel's (neither idle nor
# user space: for a DUT without a loop of its own, user space is the SCHED_IDLE spinner).
p, cycles = sat.get("profile"), {}
if p and sat["received"] and p["freq_hz"]:
    by = {s["step"]: s["samples"] for s in p["steps"]}
    per = lambda n: n / p["freq_hz"] * sat["tsc_hz"] / sat["received"]
    cycles = {"busy": per(p["samples"] - by.get("Idle", 0)),
              "kernel": per(p["samples"] - by.get("Idle", 0) - by.get("Syscall", 0))}
print(json.dumps({"part": "fwd", "path": sys.argv[2], "ndr": size["ndr_pps"], "pdr": size["pdr_pps"],
                  "kept_up": size["dut_kept_up"], "saturation": sat["received"] / sat["seconds"],
                  **cycles}))
PY
done
fi

# --- 2b. round trips at 1 kpps through each forwarder ---------------------------------------
if part latency; then
# gen in the client and echo in the server, both blocking on CPU 1; the forwarder has CPU 0.
# The bridge carries 198.18.0.1 <-> 198.18.0.2; the kernel routes 198.18.2.1 <-> 198.18.1.2.
# Offloads stay at their defaults: the bridge finishes checksums itself.
ip netns add "$c"; ip netns add "$e"; ip netns add "$s"
ip -n "$c" link add veth0 type veth peer name emu-a netns "$e"
ip -n "$s" link add veth0 type veth peer name emu-b netns "$e"
for n in "$c" "$e" "$s"; do ip -n "$n" link set lo up; done
for l in "$c veth0" "$s veth0" "$e emu-a" "$e emu-b"; do set -- $l; ip -n "$1" link set "$2" up; done
ip -n "$c" addr add 198.18.2.1/24 dev veth0; ip -n "$s" addr add 198.18.1.2/24 dev veth0
ip -n "$e" addr add 198.18.2.254/24 dev emu-a; ip -n "$e" addr add 198.18.1.254/24 dev emu-b
ip -n "$c" route add 198.18.1.0/24 via 198.18.2.254
mc=$(mac "$c" veth0); ms=$(mac "$s" veth0)
ip -n "$c" addr add 198.18.0.1/24 dev veth0; ip -n "$s" addr add 198.18.0.2/24 dev veth0
ip -n "$c" neigh replace 198.18.0.2 lladdr "$ms" dev veth0 nud permanent
ip -n "$s" neigh replace 198.18.0.1 lladdr "$mc" dev veth0 nud permanent
ip -n "$e" neigh replace 198.18.1.2 lladdr "$ms" dev emu-b nud permanent
ip -n "$s" route add 198.18.2.0/24 via 198.18.1.254
latency() { # PATH TARGET_IP
  local json="$out/latency-${1// /-}.json"
  ip netns exec "$c" taskset -c 1 "$latlab" gen --target "$2:7777" --rate 1k --duration "${secs}s" \
    --poll block --threads 1 --json "$json" >"${json%.json}.log" 2>&1
  python3 - "$json" "$1" >>"$results" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))["latency_ns"]
print(json.dumps({"part": "latency", "path": sys.argv[2], "p50": l["p50"], "p99": l["p99"], "p99_9": l["p99_9"]}))
PY
}
ip netns exec "$s" taskset -c 1 "$latlab" echo --listen 0.0.0.0:7777 --poll block >/dev/null 2>&1 &
echo_pid=$!
sleep 0.5
ip netns exec "$e" sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
latency "kernel IP forwarding" 198.18.1.2
ip netns exec "$e" sh -c 'echo 0 > /proc/sys/net/ipv4/ip_forward'
for io in packet xdp; do
  ip netns exec "$e" taskset -c 0 "$latlab" emu --io "$io" --iface-a emu-a --iface-b emu-b \
    --mode run-to-completion >"$out/latency-emu-$io.log" 2>&1 &
  pid=$!
  sleep 0.5
  latency "latlab emu --io $io" 198.18.0.2
  kill -INT "$pid"; wait "$pid" || true; pid=
done
kill -INT "$echo_pid"; wait "$echo_pid" || true; echo_pid=
for n in "$c" "$e" "$s"; do ip netns del "$n"; done
fi

# --- 3. game-server rows --------------------------------------------------------------------
if part game; then
"$latlab" study game-server --clients 4 --rcvbuf default --io socket,batched,xdp \
  --duration 1s --no-flood --out "$out/game-server" >"$out/game-server.log" 2>&1
fi

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
gen = [r for r in rows if r["part"] == "gen"]
if gen:
    print("\nGenerator, one core, 110-byte frames\n\n| path | pps | vs latlab gen --io socket |\n|---|---:|---:|")
    ref = next(r["pps"] for r in gen if r["path"] == "latlab gen --io socket")
    for r in gen:
        print(f"| {r['path']} | {r['pps'] / 1e3:.0f} k | {r['pps'] / ref:.2f}× |")
fwd = {r["path"]: r for r in rows if r["part"] == "fwd"}
if fwd:
    print("\nForwarding, 64-byte frames (latlab rfc2544 --dut D: the DUT's CPU to itself)\n")
    print("| DUT | NDR [kpps] | NDR vs kernel | PDR [kpps] | NDR / PDR | at saturation [kpps] | busy cycles/frame | kernel cycles/frame |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    kernel = fwd.get("kernel", {}).get("ndr")
    c = lambda v: "-" if v is None else f"{v:.0f}"
    k = lambda v: "-" if v is None else f"{v / 1e3:.1f}"
    for r in fwd.values():
        bound = "" if r["kept_up"] is False else " (kept up with the source: a lower bound)"
        vs = f"{r['ndr'] / kernel:.2f}×" if kernel and r["ndr"] else "-"
        share = f"{r['ndr'] / r['pdr']:.2f}" if r["ndr"] and r["pdr"] else "-"
        print(f"| {r['path']} | {k(r['ndr'])}{bound} | {vs} | {k(r['pdr'])} | {share} | {k(r['saturation'])} | {c(r.get('busy'))} | {c(r.get('kernel'))} |")
    ratio = lambda a, b, k: fwd[a][k] / fwd[b][k] if a in fwd and b in fwd and fwd[a].get(k) and fwd[b].get(k) else None
    r = ratio("fwd-xdp-redirect", "kernel", "kernel")
    if r is not None:
        print(f"\nfwd-xdp-redirect's kernel cycles per frame at saturation: {r:.2f}× the kernel forwarder's (target ≤ 0.67×)")
    for k, what in (("ndr", "NDR"), ("saturation", "rate at saturation")):
        r = ratio("fwd-xdp", "testpmd-xdp", k)
        if r is not None:
            print(f"fwd-xdp's {what}: {r:.2f}× testpmd-xdp's")
latency = [r for r in rows if r["part"] == "latency"]
if latency:
    print("\nRound trip at 1 kpps through each forwarder, delay 0 (µs, from the intended send time)\n")
    print("| path | p50 | p99 | p99.9 |\n|---|---:|---:|---:|")
    us = lambda v: "-" if v is None else f"{v / 1000:.1f}"
    for r in latency:
        print(f"| {r['path']} | {us(r['p50'])} | {us(r['p99'])} | {us(r['p99_9'])} |")
PY
for dut in $(part fwd && echo "$duts"); do
  printf '\nCycles per frame at saturation, %s (%s)\n\n' "$dut" "$out/rfc2544-$dut/report.md"
  grep -A2 '^| RX | TX' "$out/rfc2544-$dut/report.md" || true
done
if part game; then
printf '\nGame server, 4 clients, default buffer (%s)\n\n' "$out/game-server/report.md"
grep -E '^\|(---| (I/O|socket|batched|xdp) \|)' "$out/game-server/report.md" || true
fi

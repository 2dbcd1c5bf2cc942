#!/usr/bin/env bash
# latlab vs sockperf, side by side in one run, on loopback and on a veth pair between two
# network namespaces (root only; skipped otherwise):
#   1. low constant rate:  sockperf ping-pong  vs  latlab gen  (against sockperf server / latlab echo)
#   2. high rate:          sockperf under-load vs  latlab gen
#   3. max pps, one core:  sockperf under-load --mps=max  vs  latlab gen at a rate it cannot reach
# Each tool runs in its lowest-latency mode (busy polling) and, for the low rate, also blocking.
# Server on CPU 0, client on CPU 1. Installs sockperf from Debian's packages if missing.
#
# Usage: bench/sockperf.sh [SECONDS] [OUT_DIR]     (default 10 s per point, bench/results/sockperf-<time>)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
out=${2:-bench/results/sockperf-$(date -u +%Y%m%dT%H%M%SZ)}
size=64
low_rate=1000
high_rate=100000
mkdir -p "$out"

if ! command -v sockperf >/dev/null; then
  apt-get update -qq && apt-get install -y -qq sockperf
fi
cargo build --release -q
latlab=$PWD/target/release/latlab

pids=()
ns_c="latlab-bench-$$-client"
ns_s="latlab-bench-$$-server"
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  ip netns del "$ns_c" 2>/dev/null || true
  ip netns del "$ns_s" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

make_veth() {
  ip netns add "$ns_c"; ip netns add "$ns_s"
  ip -n "$ns_c" link add veth0 type veth peer name veth0 netns "$ns_s"
  ip -n "$ns_c" addr add 198.18.1.1/30 dev veth0
  ip -n "$ns_s" addr add 198.18.1.2/30 dev veth0
  for n in "$ns_c" "$ns_s"; do ip -n "$n" link set lo up; ip -n "$n" link set veth0 up; done
  local mc ms
  mc=$(ip -n "$ns_c" -o link show veth0 | grep -o 'link/ether [^ ]*' | cut -d' ' -f2)
  ms=$(ip -n "$ns_s" -o link show veth0 | grep -o 'link/ether [^ ]*' | cut -d' ' -f2)
  ip -n "$ns_c" neigh replace 198.18.1.2 lladdr "$ms" dev veth0 nud permanent
  ip -n "$ns_s" neigh replace 198.18.1.1 lladdr "$mc" dev veth0 nud permanent
}

# on SIDE: sets PRE, the command prefix that runs a command in the server or client place of
# the current topology, pinned to CPU 0 (server) or 1 (client). The command is exec'd, so a
# background job's $! is the tool's own process id.
on() {
  local side=$1 cpu=0 ns=$ns_s
  [ "$side" = client ] && { cpu=1; ns=$ns_c; }
  if [ "$topo" = veth ]; then PRE=(ip netns exec "$ns" taskset -c "$cpu"); else PRE=(taskset -c "$cpu"); fi
}

run_client() { on client; "${PRE[@]}" "$@"; }

start_server() { # start_server LOG CMD...
  local log=$1; shift
  on server
  "${PRE[@]}" "$@" >"$log" 2>&1 &
  pids+=("$!")
  sleep 0.5
}

stop_server() {
  local p=${pids[-1]}
  kill -INT "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  unset 'pids[-1]'
}

results="$out/results.jsonl"
: >"$results"

# One measurement point of each tool. Percentiles in µs.
point_sockperf() { # NAME MODE(ping-pong|under-load) MPS BUSY(0|1)
  local name=$1 mode=$2 mps=$3 busy=$4 log="$out/$1.sockperf.log" flags=()
  [ "$busy" = 1 ] && flags=(--nonblocked --timeout 0)
  start_server "$out/$name.sockperf-server.log" sockperf server -i "$ip" -p 11111 "${flags[@]}"
  run_client sockperf "$mode" -i "$ip" -p 11111 -t "$secs" --mps="$mps" -m "$size" --full-rtt "${flags[@]}" >"$log" 2>&1 || true
  stop_server
  python3 - "$log" "$name" "$topo" >>"$results" <<'PY'
import json, re, sys
text = open(sys.argv[1], errors="replace").read()
def pct(label):
    m = re.search(r"percentile %s = +([0-9.]+)" % re.escape(label), text)
    return float(m.group(1)) if m else None
mx = re.search(r"<MAX> observation = +([0-9.]+)", text)
tot = re.search(r"\[Total Run\] RunTime=([0-9.]+) sec;.*SentMessages=(\d+)", text)
valid = re.search(r"\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", text)
pps = int(valid.group(2)) / float(valid.group(1)) if valid else None
print(json.dumps({"tool": "sockperf", "point": sys.argv[2], "topology": sys.argv[3],
    "p50_us": pct("50.000"), "p99_us": pct("99.000"), "p99_9_us": pct("99.900"),
    "max_us": float(mx.group(1)) if mx else None, "sent_pps": pps,
    "samples": int(valid.group(3)) if valid else None}))
PY
}

point_latlab() { # NAME RATE POLL [WARMUP]
  local name=$1 rate=$2 poll=$3 warmup=${4:-100ms} json="$out/$1.latlab.json"
  start_server "$out/$name.latlab-server.log" "$latlab" echo --listen "$ip:7777" --poll "$poll"
  run_client "$latlab" gen --target "$ip:7777" --rate "$rate" --duration "${secs}s" \
    --size "$size" --poll "$poll" --warmup "$warmup" --threads 1 --rcvbuf 4M --json "$json" >"$out/$name.latlab.log" 2>&1 || true
  stop_server
  python3 - "$json" "$name" "$topo" >>"$results" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception as e:
    print(json.dumps({"tool": "latlab", "point": sys.argv[2], "topology": sys.argv[3], "error": str(e)})); sys.exit()
us = lambda v: None if v is None else v / 1000
# latlab: from the intended send time (open loop); latlab-actual: from the actual send time, as
# a closed-loop tool like sockperf measures.
for tool, key in (("latlab", "latency_ns"), ("latlab-actual", "latency_from_actual_send_ns")):
    l = s[key]
    print(json.dumps({"tool": tool, "point": sys.argv[2], "topology": sys.argv[3],
        "p50_us": us(l["p50"]), "p99_us": us(l["p99"]), "p99_9_us": us(l["p99_9"]), "max_us": us(l["max"]),
        "sent_pps": s["achieved_pps"], "samples": s["received"], "lost": s["lost"], "unsent": s["unsent"]}))
PY
}

topos=(loopback)
if [ "$(id -u)" = 0 ] && ip netns add "latlab-bench-$$-probe" 2>/dev/null; then
  ip netns del "latlab-bench-$$-probe"; topos+=(veth)
else
  echo "veth: skipped (needs root and network namespaces)" | tee "$out/skipped.txt"
fi

for topo in "${topos[@]}"; do
  if [ "$topo" = veth ]; then make_veth; ip=198.18.1.2; else ip=127.0.0.1; fi
  echo "== $topo"
  point_sockperf "$topo-low-busy" ping-pong "$low_rate" 1
  point_latlab   "$topo-low-busy" "$low_rate" busy
  point_sockperf "$topo-low-block" ping-pong "$low_rate" 0
  point_latlab   "$topo-low-block" "$low_rate" block
  point_sockperf "$topo-high-busy" under-load "$high_rate" 1
  point_latlab   "$topo-high-busy" "$high_rate" busy
  point_sockperf "$topo-max-busy" under-load max 1
  # Far above what one core sends: it sends as fast as it can (no warm-up, so every probe counts).
  point_latlab   "$topo-max-busy" 5M busy 0s
  if [ "$topo" = veth ]; then ip netns del "$ns_c"; ip netns del "$ns_s"; fi
done

python3 - "$results" "$secs" >"$out/README.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pts = {}
for r in rows:
    pts.setdefault((r["topology"], r["point"]), {})[r["tool"]] = r
f = lambda v: "-" if v is None else ("%.1f" % v)
print("# latlab vs sockperf (%s s per point, 64-byte UDP payload)\n" % sys.argv[2])
print("Round trips in µs. `latlab` is measured from each probe's intended send time (open loop);")
print("`latlab-actual` from its actual send time, as sockperf measures; `ratio` compares each with sockperf.")
print("Produced by `bench/sockperf.sh %s`.\n" % sys.argv[2])
print("| topology | point | tool | p50 | p99 | p99.9 | max | pps sent | samples |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for (topo, point), tools in pts.items():
    for t in ("sockperf", "latlab", "latlab-actual"):
        r = tools.get(t, {})
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (topo, point, t, f(r.get("p50_us")), f(r.get("p99_us")),
              f(r.get("p99_9_us")), f(r.get("max_us")), "-" if r.get("sent_pps") is None else "%.0f" % r["sent_pps"], r.get("samples", "-")))
    s = tools.get("sockperf", {})
    for t in ("latlab", "latlab-actual"):
        l = tools.get(t, {})
        ratio = lambda k: "-" if not s.get(k) or l.get(k) is None else "%.2f" % (l[k] / s[k])
        print("| %s | %s | ratio %s | %s | %s | %s | %s | %s | |" % (topo, point, t, ratio("p50_us"), ratio("p99_us"), ratio("p99_9_us"), ratio("max_us"), ratio("sent_pps")))
PY
cat "$out/README.md"

#!/usr/bin/env bash
# The host's limits beside latlab's figures, in one sitting on the same CPU (issue 41 item 3).
# Root. Run it under the bench lock: `flock /tmp/latlab-bench.lock bench/noise-floor.sh`.
#
#   1. Limits on CPU 1, the CPU the core plan gives the emulator on this 2-CPU machine:
#      cyclictest (SCHED_FIFO 80, one thread on CPU 1, -i 1000 and -i 100, its histogram) and
#      a spinning loop recording every gap between two clock reads (the example tsc_gaps).
#   2. The emulator, client — emu — server in three namespaces (offloads off, static
#      neighbours, as `latlab study emulator` builds them), 20k round trips a second:
#      (i) the study's plan: emu spinning on CPU 1 (`taskset -c 1 … --poll busy`; no receive
#          steering, as the study), gen (one thread, 300 ms warm-up, 4 MiB buffer) and echo
#          (4 MiB buffer) blocking on CPU 0;
#      (ii) the defaults: emu with only its interfaces, echo with only --listen, gen with only
#          --target and --rate (the core plan places them).
#   3. latlab gen against latlab echo, both at their defaults (--rate only), beside sockperf
#      ping-pong (server on CPU 0, client on CPU 1, 64-byte messages as gen's default) at 1k
#      and 10k messages a second, on a namespace's loopback and over a veth pair between two
#      namespaces.
# --duration and --json are given to every latlab command: they stop it and record it.
#
# Usage: bench/noise-floor.sh [SECONDS] [LIMIT_SECONDS] [RAW_DIR]
#   SECONDS per latlab and sockperf point (default 10), LIMIT_SECONDS per cyclictest and
#   tsc_gaps run (default 20); the raw outputs go to RAW_DIR if given (else a temporary folder,
#   removed). Prints a markdown report on stdout. Installs rt-tests, sockperf and ethtool from
#   Debian's packages if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
limit_secs=${2:-20}
raw=${3:-}
command_line="bench/noise-floor.sh $*"
[ "$(id -u)" = 0 ] || { echo "noise-floor: needs root (namespaces, SCHED_FIFO)" >&2; exit 1; }
for tool in cyclictest:rt-tests sockperf:sockperf ethtool:ethtool; do
  if ! command -v "${tool%%:*}" >/dev/null; then
    apt-get install -y -qq "${tool#*:}" >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq "${tool#*:}" >/dev/null; }
  fi
done
cargo build --release -q -p latlab
cargo build --release -q -p latlab-engine --example tsc_gaps
latlab=$PWD/target/release/latlab
tsc_gaps=$PWD/target/release/examples/tsc_gaps

keep_raw=1
if [ -z "$raw" ]; then raw=$(mktemp -d); keep_raw=0; else mkdir -p "$raw"; fi
rows="$raw/rows.jsonl"
: >"$rows"
p="latlab-noise-$$"
c="$p-client"; e="$p-emu"; s="$p-server"; lo="$p-lo"; vc="$p-vc"; vs="$p-vs"
pids=()
cleanup() {
  for pid in "${pids[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]:-}"; do [ -n "$pid" ] && wait "$pid" 2>/dev/null || true; done
  for n in "$c" "$e" "$s" "$lo" "$vc" "$vs"; do ip netns del "$n" 2>/dev/null || true; done
  [ "$keep_raw" = 1 ] || rm -rf "$raw"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The namespaces: the emulator's lab, a loopback, and a veth pair.
offloads_off() { ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null 2>&1 || true; }
mac() { ip -n "$1" -o link show "$2" | grep -o 'link/ether [^ ]*' | cut -d' ' -f2; }
for n in "$c" "$e" "$s" "$lo" "$vc" "$vs"; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip -n "$c" link add veth0 type veth peer name emu-a netns "$e"
ip -n "$s" link add veth0 type veth peer name emu-b netns "$e"
ip -n "$c" addr add 198.18.4.1/24 dev veth0
ip -n "$s" addr add 198.18.4.2/24 dev veth0
for nd in "$c veth0" "$s veth0" "$e emu-a" "$e emu-b"; do
  read -r n d <<<"$nd"; offloads_off "$n" "$d"; ip -n "$n" link set "$d" up
done
ip -n "$c" neigh replace 198.18.4.2 lladdr "$(mac "$s" veth0)" dev veth0 nud permanent
ip -n "$s" neigh replace 198.18.4.1 lladdr "$(mac "$c" veth0)" dev veth0 nud permanent
ip -n "$vc" link add veth0 type veth peer name veth0 netns "$vs"
ip -n "$vc" addr add 198.18.5.1/30 dev veth0
ip -n "$vs" addr add 198.18.5.2/30 dev veth0
for n in "$vc" "$vs"; do ip -n "$n" link set veth0 up; done
ip -n "$vc" neigh replace 198.18.5.2 lladdr "$(mac "$vs" veth0)" dev veth0 nud permanent
ip -n "$vs" neigh replace 198.18.5.1 lladdr "$(mac "$vc" veth0)" dev veth0 nud permanent

# How busy the CPUs were over the next second, in % (from /proc/stat); sets $load.
busy() {
  local a b total=0 i
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) ))
  for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
  load=$(( total > 0 ? 100 * (total - idle) / total : 0 ))
}
# Before a point: waits for a second at most 15% busy, spending at most 60 s of waiting over
# the whole run (others' builds share the machine; the bench lock keeps out only benchmarks
# and test suites); sets $load to how busy the last second was.
quiet_budget=60
quiet() {
  busy
  while [ "$load" -gt 15 ] && [ "$quiet_budget" -gt 0 ]; do
    quiet_budget=$(( quiet_budget - 1 )); busy
  done
  others_now
}
# What else of latlab's kind runs now (latlab and its tests, peers, compilers): none of this
# script's own, which start only after it looks; sets $others ("-" or "name×count, …").
others_now() {
  others=$(ps -eo comm= | grep -Ex 'latlab.*|sockperf|cyclictest|rustc|cargo|memcached|unbound|iperf3' \
    | sort | uniq -c | awk '{ printf "%s%s×%s", (NR > 1 ? ", " : ""), $2, $1 }' || true)
  [ -n "$others" ] || others="-"
}
# The hypervisor's steal so far, ms (all CPUs, from /proc/stat).
steal_ms() { local f; f=($(head -1 /proc/stat)); echo $(( f[8] * 1000 / $(getconf CLK_TCK) )); }

# row NAME KIND FILE… : one JSON line in $rows from a measurement's output files.
row() {
  python3 bench/noise-floor.py row "$@" --load "$load" --steal-ms "$(( $(steal_ms) - steal0 ))" \
    --others "$others" >>"$rows"
}

# Starts a command in the background, keeping its pid (ip netns exec and taskset exec it).
start() { local log=$1; shift; "$@" >"$log" 2>&1 & pids+=("$!"); }
# Waits for every command started, then forgets them.
wait_all() { for pid in "${pids[@]:-}"; do [ -n "$pid" ] && { wait "$pid" || true; }; done; pids=(); }

# 1. The limits on CPU 1.
for interval in 1000 100; do
  quiet; steal0=$(steal_ms)
  f="$raw/cyclictest-i$interval.txt"
  cyclictest -m -p 80 -a 1 -t 1 -i "$interval" -D "${limit_secs}s" -h 2000 -q >"$f" 2>"$f.err" || true
  row "cyclictest -i $interval" cyclictest "$f"
done
quiet; steal0=$(steal_ms)
"$tsc_gaps" --seconds "$limit_secs" --cpu 1 >"$raw/tsc_gaps.json"
row "tsc_gaps" tsc_gaps "$raw/tsc_gaps.json"

# 2. The emulator at 20k round trips a second. emu_point NAME EMU_PREFIX EMU_FLAGS ECHO_FLAGS GEN_FLAGS
target=198.18.4.2:7777
emu_point() {
  local name=$1 f="$raw/emu-$1"
  local -a pre=($2) emu_flags=($3) echo_flags=($4) gen_flags=($5)
  quiet; steal0=$(steal_ms)
  start "$f-emu.log" ip netns exec "$e" "${pre[@]}" "$latlab" emu --iface-a emu-a --iface-b emu-b \
    "${emu_flags[@]}" --duration $((secs + 4))s --json "$f-emu.json"
  sleep 0.5
  start "$f-echo.log" ip netns exec "$s" "$latlab" echo --listen "$target" "${echo_flags[@]}" \
    --duration $((secs + 3))s --json "$f-echo.json"
  sleep 0.5
  ip netns exec "$c" "$latlab" gen --target "$target" --rate 20k "${gen_flags[@]}" \
    --duration "${secs}s" --json "$f-gen.json" >"$f-gen.log" 2>&1 || true
  wait_all
  row "emu $name" emu "$f-emu.json" "$f-gen.json" "$f-echo.json"
}
emu_point "study plan" "taskset -c 1" "--poll busy" "--poll block --cpu 0 --rcvbuf 4M" \
  "--poll block --cpu 0 --threads 1 --warmup 300ms --rcvbuf 4M"
emu_point defaults "" "" "" ""

# 3. latlab gen/echo at their defaults beside sockperf ping-pong, loopback and veth.
# net_point TOPO RATE CLIENT_NS SERVER_NS IP
net_point() {
  local topo=$1 rate=$2 cns=$3 sns=$4 ip=$5 f="$raw/$1-$2"
  quiet; steal0=$(steal_ms)
  start "$f-sockperf-server.log" ip netns exec "$sns" taskset -c 0 sockperf server -i "$ip" -p 11111
  sleep 0.5
  ip netns exec "$cns" taskset -c 1 sockperf ping-pong -i "$ip" -p 11111 -t "$secs" \
    --mps "$rate" -m 64 >"$f-sockperf.log" 2>&1 || true
  kill -INT "${pids[0]}" 2>/dev/null || true
  wait_all
  row "$topo sockperf $rate" sockperf "$f-sockperf.log"
  quiet; steal0=$(steal_ms)
  start "$f-echo.log" ip netns exec "$sns" "$latlab" echo --listen "$ip:7777" \
    --duration $((secs + 3))s --json "$f-echo.json"
  sleep 0.5
  ip netns exec "$cns" "$latlab" gen --target "$ip:7777" --rate "$rate" \
    --duration "${secs}s" --json "$f-gen.json" >"$f-gen.log" 2>&1 || true
  wait_all
  row "$topo latlab $rate" latlab "$f-gen.json" "$f-echo.json"
}
for rate in 1000 10000; do net_point loopback "$rate" "$lo" "$lo" 127.0.0.1; done
for rate in 1000 10000; do net_point veth "$rate" "$vc" "$vs" 198.18.5.2; done

python3 bench/noise-floor.py report "$rows" \
  --date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --commit "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . && echo || echo ' (uncommitted changes)')" \
  --kernel "$(uname -sr)" --command "flock /tmp/latlab-bench.lock $command_line" \
  --cpus "$(nproc)" --secs "$secs" --limit-secs "$limit_secs"

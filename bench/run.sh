#!/usr/bin/env bash
# `latlab run` against the same path without the emulator, in one sitting:
#   1. the round trip from CMD to a service on the host, with no impairment (sockperf ping-pong,
#      closed loop, median), through `latlab run` and through a namespace joined to the host by
#      one veth, as `latlab run`'s is, but with no emulator between;
#   2. a TCP transfer from CMD to the host (iperf3, 5 s), both ways of wiring;
#   3. `latlab run --delay 20ms`: the median round trip less the one through `latlab run` with no
#      delay, both at 20 messages a second (so both find the machine idle between messages, as a
#      delayed exchange does), should be 40 ms.
# Each pair is measured REPEATS times (default 3), alternately; the medians are reported.
# Everything runs in namespaces made here: one stands for the host (latlab runs inside it), so
# the machine's own namespace is never touched. All are removed on exit and on every signal.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
cargo build --release -q
L=$PWD/target/release/latlab
for tool in sockperf iperf3; do
  command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool" >/dev/null; }
done
H=latlab-bench-run-host-$$
D=latlab-bench-run-direct-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del "$D" 2>/dev/null || true
  ip netns del "$H" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ip netns add "$H"; ip -n "$H" link set lo up
ip netns add "$D"; ip -n "$D" link set lo up
ip -n "$D" link add veth0 type veth peer name direct netns "$H"
ip -n "$D" addr add 198.18.250.2/30 dev veth0; ip -n "$D" link set veth0 up
ip -n "$H" addr add 198.18.250.1/30 dev direct; ip -n "$H" link set direct up
ip netns exec "$H" sockperf server -i 0.0.0.0 -p 11111 >/dev/null 2>&1 & pids+=($!)
ip netns exec "$H" iperf3 -s -p 5201 >/dev/null 2>&1 & pids+=($!)
sleep 0.5

# sockperf reports half the round trip; prints the median round trip, µs.
rtt() { sockperf ping-pong -i "$1" -p 11111 -t 5 ${2:+--mps $2} 2>&1 | awk '/percentile 50.000 =/ {printf "%.1f", 2*$NF}'; }
tcp() { iperf3 -c "$1" -p 5201 -t 5 -J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6))'; }
export -f rtt tcp

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
direct_rtt=(); run_rtt=(); paced_rtt=(); delay_rtt=(); direct_tcp=(); run_tcp=()
for i in $(seq "$repeats"); do
  direct_rtt+=("$(ip netns exec "$D" bash -c 'rtt 198.18.250.1')")
  run_rtt+=("$(ip netns exec "$H" "$L" run -- bash -c 'rtt $LATLAB_HOST' 2>/dev/null)")
  paced_rtt+=("$(ip netns exec "$H" "$L" run -- bash -c 'rtt $LATLAB_HOST 20' 2>/dev/null)")
  delay_rtt+=("$(ip netns exec "$H" "$L" run --delay 20ms -- bash -c 'rtt $LATLAB_HOST 20' 2>/dev/null)")
  direct_tcp+=("$(ip netns exec "$D" bash -c 'tcp 198.18.250.1')")
  run_tcp+=("$(ip netns exec "$H" "$L" run -- bash -c 'tcp $LATLAB_HOST' 2>/dev/null)")
  echo "repeat $i: rtt direct ${direct_rtt[-1]} µs, run ${run_rtt[-1]} µs, run at 20/s ${paced_rtt[-1]} µs, run --delay 20ms at 20/s ${delay_rtt[-1]} µs; tcp direct ${direct_tcp[-1]} Mbit/s, run ${run_tcp[-1]} Mbit/s"
done
m() { printf '%s\n' "$@" | median; }
dr=$(m "${direct_rtt[@]}"); rr=$(m "${run_rtt[@]}"); pr=$(m "${paced_rtt[@]}"); de=$(m "${delay_rtt[@]}")
dt=$(m "${direct_tcp[@]}"); rt=$(m "${run_tcp[@]}")
echo
echo "median round trip: direct $dr µs, through latlab run $rr µs (added $(awk -v a="$rr" -v b="$dr" 'BEGIN{printf "%.1f", a-b}') µs)"
echo "at 20 messages/s: latlab run $pr µs, latlab run --delay 20ms $de µs: $(awk -v a="$de" -v b="$pr" 'BEGIN{printf "%.1f", a-b}') µs added (40000 asked; error $(awk -v a="$de" -v b="$pr" 'BEGIN{printf "%.1f", a-b-40000}') µs)"
echo "TCP: direct $dt Mbit/s, through latlab run $rt Mbit/s (ratio $(awk -v a="$rt" -v b="$dt" 'BEGIN{printf "%.3f", a/b}'))"

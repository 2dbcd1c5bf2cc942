#!/bin/bash
# DNS benchmark: latlab gen --protocol dns vs dnsperf against unbound, one core each.
set -u
mkdir -p "${DNSBENCH_DIR:-/tmp/dnsbench}"
L=$(realpath "${LATLAB:-target/release/latlab}")
C=latlab-bench-dns-c; S=latlab-bench-dns-s; D=${DNSBENCH_DIR:-/tmp/dnsbench}
cleanup() { [ -n "${UB:-}" ] && kill $UB 2>/dev/null; wait 2>/dev/null; ip netns del $C 2>/dev/null; ip netns del $S 2>/dev/null; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
ip netns add $C; ip netns add $S
ip -n $C link add veth0 type veth peer name veth0 netns $S
ip -n $C addr add 198.18.0.1/30 dev veth0; ip -n $S addr add 198.18.0.2/30 dev veth0
ip -n $C link set veth0 up; ip -n $S link set veth0 up; ip -n $C link set lo up; ip -n $S link set lo up
cat > $D/unbound.conf <<CONF
server:
  do-daemonize: no
  chroot: ""
  username: ""
  use-syslog: no
  logfile: ""
  pidfile: ""
  directory: "$D"
  do-ip6: no
  num-threads: 1
  module-config: "iterator"
  interface: 198.18.0.2
  port: 53
  access-control: 198.18.0.0/24 allow
  local-zone: "." static
  local-zone: "lab.test." static
  local-data: "a.lab.test. A 10.0.0.1"
  local-data: "b.lab.test. AAAA 2001:db8::1"
  local-data: 't.lab.test. TXT "latlab"'
  local-data: "lab.test. MX 10 a.lab.test."
CONF
printf 'a.lab.test A\nb.lab.test AAAA\nt.lab.test TXT\nlab.test MX\nnope.lab.test A\n' > $D/queries.txt
ip netns exec $S taskset -c 1 unbound -d -c $D/unbound.conf & UB=$!
sleep 2
gen() { # rate name [capture]
  ip netns exec $C taskset -c 0 $L gen --target 198.18.0.2:53 --protocol dns --queries $D/queries.txt \
    --rate $1 --duration 10s --json $D/gen-$2.json > $D/gen-$2.txt 2>&1
  echo "gen $1 -> exit $?"
}
cap() { # rate name
  ip netns exec $S tshark -q -i veth0 -f "udp port 53" -w $D/cap-$2.pcap > /dev/null 2>&1 & T=$!
  sleep 2
  gen $1 $2
  sleep 1; kill -INT $T; wait $T
  tshark -r $D/cap-$2.pcap -Y "dns.flags.response == 1" -T fields -e dns.time > $D/dnstime-$2.txt 2>/dev/null
}
capc() { # rate name: the same, captured on the client's veth (the client's wire round trip)
  ip netns exec $C tshark -q -i veth0 -f "udp port 53" -w $D/capc-$2.pcap > /dev/null 2>&1 & T=$!
  sleep 2
  gen $1 $2
  sleep 1; kill -INT $T; wait $T
  tshark -r $D/capc-$2.pcap -Y "dns.flags.response == 1" -T fields -e dns.time > $D/dnstime-$2.txt 2>/dev/null
}
dp() { # name [args]
  local n=$1; shift
  ip netns exec $C taskset -c 0 dnsperf -s 198.18.0.2 -d $D/queries.txt -c 1 -T 1 -l 10 "$@" > $D/dnsperf-$n.txt 2>&1
  echo "dnsperf $n -> exit $?"
}
for step in "$@"; do eval "$step"; done

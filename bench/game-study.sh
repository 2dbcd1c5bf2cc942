#!/usr/bin/env bash
# The game-server study (Table I, Figures 2-3) against a real server nobody here wrote, on a
# veth pair between two network namespaces this script makes and removes (root only): unbound
# (dns), memcached (its UDP protocol) or OpenArena's dedicated server (quake3, the ioquake3
# engine). The server runs pinned to CPU 1 in the server namespace, the study pinned to CPU 0
# in the client namespace.
# Run it under the machine's benchmark lock: flock /tmp/latlab-bench.lock bench/game-study.sh dns
#
# Usage: bench/game-study.sh dns|memcached|quake3 [OUT_DIR] [LOADS] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
server_kind=${1:?dns, memcached or quake3}
out=${2:-bench/results/game-study-$server_kind-$(date -u +%Y%m%dT%H%M%SZ)}
cargo build --release -q -p latlab
latlab=$PWD/target/release/latlab

pids=()
ns_c="latlab-gsbench-$$-client"
ns_s="latlab-gsbench-$$-server"
tmp=$(mktemp -d)
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  ip netns del "$ns_c" 2>/dev/null || true
  ip netns del "$ns_s" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

ip netns add "$ns_c"; ip netns add "$ns_s"
ip -n "$ns_c" link add veth0 type veth peer name veth0 netns "$ns_s"
ip -n "$ns_c" addr add 198.18.4.1/30 dev veth0
ip -n "$ns_s" addr add 198.18.4.2/30 dev veth0
for n in "$ns_c" "$ns_s"; do ip -n "$n" link set lo up; ip -n "$n" link set veth0 up; done
server=198.18.4.2
on_server=(ip netns exec "$ns_s" taskset -c 1)

case "$server_kind" in
  dns)
    cat >"$tmp/unbound.conf" <<CONF
server:
  do-daemonize: no
  chroot: ""
  username: ""
  use-syslog: no
  logfile: ""
  pidfile: ""
  directory: "$tmp"
  do-ip6: no
  num-threads: 1
  module-config: "iterator"
  interface: $server
  port: 53
  access-control: 198.18.4.0/30 allow
  local-zone: "." static
  local-zone: "lab.test." static
  local-data: 'a.lab.test. A 10.0.0.1'
CONF
    "${on_server[@]}" unbound -d -c "$tmp/unbound.conf" >"$tmp/server.log" 2>&1 &
    target=$server:53
    protocol=(--protocol dns --query a.lab.test)
    loads=${3:-5k,10k,20k,40k,80k,120k,160k}
    duration=${4:-3s}
    ;;
  memcached)
    "${on_server[@]}" memcached -U 11211 -p 0 -l "$server" -t 1 -u nobody >"$tmp/server.log" 2>&1 &
    target=$server:11211
    protocol=(--protocol memcached --keys 1000 --set-ratio 0.1)
    loads=${3:-5k,10k,20k,40k,80k,120k,160k}
    duration=${4:-3s}
    ;;
  quake3)
    mkdir -p "$tmp/home"
    "${on_server[@]}" /usr/games/openarena-server +set dedicated 1 +set net_ip "$server" \
      +set net_port 27960 +set fs_homepath "$tmp/home" +set sv_maxclients 8 +map aggressor \
      >"$tmp/server.log" 2>&1 &
    target=$server:27960
    protocol=(--protocol quake3)
    loads=${3:-0.5,1,1.5,2,3}
    duration=${4:-30s}
    ready=10
    ;;
  *) echo "unknown server $server_kind: dns, memcached or quake3" >&2; exit 2 ;;
esac
pids+=("$!")
# The study's own check waits a second for the first answer: give the server time to be up
# (OpenArena loads its map first).
sleep "${ready:-2}"
ip netns exec "$ns_c" taskset -c 0 "$latlab" study game-server --target "$target" "${protocol[@]}" \
  --loads "$loads" --duration "$duration" --out "$out"
echo "results: $out (table1.md, report.md)"

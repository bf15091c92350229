#!/usr/bin/env bash
# The rocedp demo: installs and builds, then
#  1. runs rocedpd on the host end of a veth pair whose other end lives in the network namespace
#     rdp-ns, pings the daemon from the namespace, shows what the namespace learned, prints the
#     daemon's telemetry and stops it with SIGTERM;
#  2. runs two rocedp endpoints joined by a shared-memory memif link: rocedpd with
#     config/examples/memif-server.yaml (echo service on ND port 7000, memory service on 7001) and
#     rocedp-perf --connect with config/examples/memif-client.yaml as the load generator. A 10-second
#     mixed load goes through connections the IB CM sets up (WRITE bw and READ bw into the memory
#     region, SEND latency and SEND bw against the echo), each prints its perftest-style table; the
#     daemon's /rocedp/connections and /rocedp/qps telemetry is shown while the WRITE run holds its
#     connections; then SIGTERM and exit status 0.
#
#   scripts/demo.sh          (as root; Debian 12)
#
# CPUs (2): rocedpd's polling core on lcore 1, its main and control threads (mostly asleep) and
# rocedp-perf (one inline polling core running the benchmark loop too) on lcore 0.
# Everything it creates (namespace, veth pair, daemons, perf, temporary files, EAL run directories)
# is removed on exit, also on failure or Ctrl-C. Environment: ROCEDP_BUILD_DIR (default build/),
# ROCEDP_DEMO_SKIP_BUILD=1 to reuse an existing build.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${ROCEDP_BUILD_DIR:-$root/build}
bin=${ROCEDP_BIN_DIR:-$build/bin}
config=$root/config/examples/netns-af-packet.yaml
ns=rdp-ns
veth_host=rdp-veth0   # the daemon's port (net_af_packet)
veth_ns=rdp-veth1
ns_ip=198.18.0.2
daemon_ip=198.18.0.1
prefix=$(awk '/^[[:space:]]*file_prefix:/ {print $2; exit}' "$config")
memif_server=$root/config/examples/memif-server.yaml
memif_client=$root/config/examples/memif-client.yaml
memif_prefix=$(awk '/^[[:space:]]*file_prefix:/ {print $2; exit}' "$memif_server")
perf_prefix=$(awk '/^[[:space:]]*file_prefix:/ {print $2; exit}' "$memif_client")

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (network namespaces, veth, AF_PACKET, package installation)"

work=""
pid=""
pid2=""       # rocedpd over memif
perf_pid=""   # rocedp-perf running in the background
created_ns=0
source "$root/scripts/lib/stop_pid.sh"
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$perf_pid"
  stop_pid "$pid2"
  stop_pid "$pid"
  if [ "$created_ns" -eq 1 ]; then
    ip netns del "$ns" 2>/dev/null || true     # takes the namespace end of the veth with it
    ip link del "$veth_host" 2>/dev/null || true
  fi
  for p in "$prefix" "$memif_prefix" "$perf_prefix"; do [ -n "$p" ] && rm -rf "/var/run/dpdk/$p"; done
  if [ $rc -ne 0 ] && [ -n "$work" ]; then
    for f in rocedpd.log rocedpd-memif.log perf.log; do
      [ -s "$work/$f" ] || continue
      echo "---- $f (last lines) ----" >&2
      tail -n 40 "$work/$f" >&2 || true
    done
  fi
  [ -n "$work" ] && rm -rf "$work"
  [ $rc -eq 0 ] && printf '\n\033[1mdemo finished: everything it created is removed\033[0m\n' || echo "demo FAILED (status $rc)" >&2
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap '' PIPE  # a closed output pipe (demo.sh | head) must not cut the clean-up short

if [ "${ROCEDP_DEMO_SKIP_BUILD:-0}" != 1 ]; then
  step "installing packages (scripts/setup.sh)"
  "$root/scripts/setup.sh"
  step "building (scripts/build.sh $build)"
  "$root/scripts/build.sh" "$build"
fi
[ -x "$bin/rocedpd" ] || die "$bin/rocedpd is missing"
work=$(mktemp -d /tmp/rocedp-demo.XXXXXX)

step "creating namespace $ns with veth $veth_host <-> $veth_ns ($ns_ip/24)"
if ip netns list | grep -qw "$ns" || ip link show "$veth_host" >/dev/null 2>&1; then
  die "$ns or $veth_host already exists (a previous run?): remove it with 'ip netns del $ns; ip link del $veth_host'"
fi
created_ns=1
ip netns add "$ns"
ip link add "$veth_host" type veth peer name "$veth_ns"
ip link set "$veth_ns" netns "$ns"
# The host end has no IPv4 address: the daemon owns $daemon_ip on it through AF_PACKET. Keep the host
# kernel quiet there (no ARP answers, no IPv6 chatter) so what the namespace sees comes from rocedpd.
sysctl -qw "net.ipv4.conf.$veth_host.arp_ignore=8" || true
sysctl -qw "net.ipv6.conf.$veth_host.disable_ipv6=1" 2>/dev/null || true
ip link set "$veth_host" up
ip -n "$ns" link set lo up
ip -n "$ns" addr add "$ns_ip/24" dev "$veth_ns"
ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$veth_ns.disable_ipv6=1" 2>/dev/null || true
ip -n "$ns" link set "$veth_ns" up

step "starting rocedpd --config ${config#$root/}"
"$bin/rocedpd" --config "$config" > "$work/rocedpd.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  grep -q "event=running" "$work/rocedpd.log" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || die "rocedpd exited during start-up"
  sleep 0.1
done
grep -q "event=running" "$work/rocedpd.log" || die "rocedpd did not come up"
grep -E "event=(eal_ready|port_opened|core_launched|control_thread_started|port_ready|running)" "$work/rocedpd.log" | sed 's/^/  /'

step "ping -c 3 $daemon_ip from $ns"
ip netns exec "$ns" ping -c 3 -W 2 "$daemon_ip"

step "neighbour entry for $daemon_ip in $ns"
entry=$(ip -n "$ns" neigh show "$daemon_ip" dev "$veth_ns")
echo "  $entry"
daemon_mac=$(awk '/^[[:space:]]*mac:/ {gsub(/"/, "", $2); print $2; exit}' "$config")
echo "$entry" | grep -qi "lladdr $daemon_mac" || die "the namespace did not learn the daemon's MAC $daemon_mac"

tel() {
  # Refresh happens every telemetry.stats_interval_ms; wait one round so the pings are counted.
  # One line per field; a column (one value per port or core) prints its values side by side.
  python3 "$root/tests/integration/telemetry_query.py" "$prefix" "$1" | python3 -c '
import json, sys
for k, v in json.load(sys.stdin).items():
    print(f"  {k:<22} " + ("  ".join(str(x) for x in v) if isinstance(v, list) else str(v)))'
}
sleep 0.3
for cmd in /rocedp/ports /rocedp/cores /rocedp/drops /rocedp/neighbours; do
  step "telemetry $cmd"
  tel "$cmd"
done

step "stopping rocedpd with SIGTERM"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
grep -E "event=(signal_received|shutdown_begin|cores_stopped|port_stopped|core_joined|port_closed|mempool_freed|eal_cleaned_up|exit)" \
  "$work/rocedpd.log" | sed 's/^/  /'
[ "$status" -eq 0 ] || die "rocedpd exited with status $status"
echo "  rocedpd exited with status 0"

# ------------------------------------------------------------------------------------------------
# Part 2: two endpoints over memif, a mixed load through CM-established connections.
[ -x "$bin/rocedp-perf" ] || die "$bin/rocedp-perf is missing"
step "starting rocedpd --config ${memif_server#$root/} (memif server; echo on ND port 7000, memory on 7001)"
"$bin/rocedpd" --config "$memif_server" > "$work/rocedpd-memif.log" 2>&1 &
pid2=$!
for _ in $(seq 300); do
  grep -q "event=running" "$work/rocedpd-memif.log" 2>/dev/null && break
  kill -0 "$pid2" 2>/dev/null || die "rocedpd (memif) exited during start-up"
  sleep 0.1
done
grep -q "event=running" "$work/rocedpd-memif.log" || die "rocedpd (memif) did not come up"
grep -E "event=(port_ready|service_listening|running)" "$work/rocedpd-memif.log" | sed 's/^/  /'

tel2() {
  python3 "$root/tests/integration/telemetry_query.py" "$memif_prefix" "$1" | python3 -c '
import json, sys
for k, v in json.load(sys.stdin).items():
    print(f"  {k:<22} " + ("  ".join(str(x) for x in v) if isinstance(v, list) else str(v)))'
}
# perf TEST... : rocedp-perf --connect with the memif client example, its table on stdout.
perf() {
  local target=$1; shift
  "$bin/rocedp-perf" --config "$memif_client" --connect "$target" --timeout 30 "$@"
}

step "load 1/4: rocedp-perf --connect 198.18.1.1:7001 write bw -s 65536 -q 2 -D 3 (memory service)"
perf 198.18.1.1:7001 write bw -s 65536 -q 2 -D 3 > "$work/perf.log" 2>&1 &
perf_pid=$!
# While it runs: the daemon's view of the two connections and their QPs.
seen=0
for _ in $(seq 100); do
  kill -0 "$perf_pid" 2>/dev/null || break
  if [ "$(python3 "$root/tests/integration/telemetry_query.py" "$memif_prefix" /rocedp/connections "d['count'] == 2 and d['state'] == ['established'] * 2" 2>/dev/null)" = True ]; then
    seen=1
    break
  fi
  sleep 0.1
done
[ "$seen" -eq 1 ] || die "the daemon's telemetry never showed the two connections"
echo "  -- telemetry /rocedp/connections (during the run)"
tel2 /rocedp/connections
echo "  -- telemetry /rocedp/qps (during the run)"
tel2 /rocedp/qps
status=0
wait "$perf_pid" || status=$?
perf_pid=""
grep -v "level=warning event=port_mac_in_software" "$work/perf.log"
[ "$status" -eq 0 ] || die "rocedp-perf write bw exited with status $status"

step "load 2/4: rocedp-perf --connect 198.18.1.1:7001 read bw -s 65536 -q 2 -D 2 (memory service)"
perf 198.18.1.1:7001 read bw -s 65536 -q 2 -D 2 2>&1 | grep -v "event=port_mac_in_software"
[ "${PIPESTATUS[0]}" -eq 0 ] || die "rocedp-perf read bw failed"

step "load 3/4: rocedp-perf --connect 198.18.1.1:7000 send lat -s 64 -D 2 (echo service: ping-pong)"
perf 198.18.1.1:7000 send lat -s 64 -D 2 2>&1 | grep -v "event=port_mac_in_software"
[ "${PIPESTATUS[0]}" -eq 0 ] || die "rocedp-perf send lat failed"

step "load 4/4: rocedp-perf --connect 198.18.1.1:7000 send bw -s 4096 -q 2 -D 3 (echo service)"
perf 198.18.1.1:7000 send bw -s 4096 -q 2 -D 3 2>&1 | grep -v "event=port_mac_in_software"
[ "${PIPESTATUS[0]}" -eq 0 ] || die "rocedp-perf send bw failed"

step "the daemon after the load: every connection closed"
python3 "$root/tests/integration/telemetry_query.py" "$memif_prefix" /rocedp/connections "d['count'] == 0" | grep -qx True \
  || { sleep 1; python3 "$root/tests/integration/telemetry_query.py" "$memif_prefix" /rocedp/connections "d['count'] == 0" | grep -qx True; } \
  || die "connections left open: $(python3 "$root/tests/integration/telemetry_query.py" "$memif_prefix" /rocedp/connections)"
echo "  accepted $(grep -c 'event=service_connected' "$work/rocedpd-memif.log") connections, closed $(grep -c 'event=service_disconnected' "$work/rocedpd-memif.log")"

step "stopping rocedpd (memif) with SIGTERM"
kill -TERM "$pid2"
status=0
wait "$pid2" || status=$?
pid2=""
grep -E "event=(signal_received|shutdown_begin|connection_manager_detached|port_closed|eal_cleaned_up|exit)" \
  "$work/rocedpd-memif.log" | sed 's/^/  /'
[ "$status" -eq 0 ] || die "rocedpd (memif) exited with status $status"
echo "  rocedpd exited with status 0"

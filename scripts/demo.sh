#!/usr/bin/env bash
# The rocedp demo: installs and builds, then runs rocedpd on the host end of a veth pair whose
# other end lives in the network namespace rdp-ns, pings the daemon from the namespace, shows what
# the namespace learned, prints the daemon's telemetry and stops it with SIGTERM.
#
#   scripts/demo.sh          (as root; Debian 12)
#
# Everything it creates (namespace, veth pair, daemon, temporary files) is removed on exit, also on
# failure or Ctrl-C. Environment: ROCEDP_BUILD_DIR (default build/), ROCEDP_DEMO_SKIP_BUILD=1 to
# reuse an existing build.
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

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (network namespaces, veth, AF_PACKET, package installation)"

work=""
pid=""
created_ns=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if [ "$created_ns" -eq 1 ]; then
    ip netns del "$ns" 2>/dev/null || true     # takes the namespace end of the veth with it
    ip link del "$veth_host" 2>/dev/null || true
  fi
  [ -n "$prefix" ] && rm -rf "/var/run/dpdk/$prefix"
  if [ $rc -ne 0 ] && [ -n "$work" ] && [ -s "$work/rocedpd.log" ]; then
    echo "---- rocedpd log (last lines) ----" >&2
    tail -n 40 "$work/rocedpd.log" >&2 || true
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

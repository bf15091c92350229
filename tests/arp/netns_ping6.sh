#!/usr/bin/env bash
# End to end, IPv6: rocedpd on the host end of a veth pair (net_af_packet) with an IPv6 address.
# The Linux kernel in a network namespace is the peer:
#   1. it resolves rocedpd's address by neighbour discovery (its NS, our NA) and pings it
#      (ping -6 -c 3): every echo must come back, and `ip -6 neigh` must hold our MAC;
#   2. rocedpd learned the namespace's address from the solicitation it answered (telemetry);
#   3. the kernel's duplicate address detection for rocedpd's address, run in the namespace, is
#      answered (our NA to all-nodes), so the kernel marks that address "dadfailed";
#   4. after rocedpd stopped, resolve6_probe (AdapterRuntime::resolve_neighbour6 over the same
#      port) resolves the namespace's address from the kernel's NA, and an address nobody has is
#      reported unreachable.
# A wrong NA or echo reply (checksum, flags, option, hop limit) is dropped by the kernel, so each
# step fails. Traffic goes only to the namespace and veth this script creates; everything it
# creates is removed by the EXIT trap, also on failure; processes are stopped by PID.
# Usage: netns_ping6.sh RESOLVE6_PROBE. Exit 77 (skip) when not root or without IPv6.
set -u

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (network namespaces, veth, AF_PACKET)"
  exit 77
fi
if [ ! -d /proc/sys/net/ipv6 ]; then
  echo "SKIP: the kernel has no IPv6"
  exit 77
fi

PROBE=${1:-}
BIN_DIR=${ROCEDP_BIN_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin}
DAEMON=$BIN_DIR/rocedpd
[ -x "$DAEMON" ] || { echo "FAIL: $DAEMON not built"; exit 1; }
[ -n "$PROBE" ] && [ -x "$PROBE" ] || { echo "FAIL: resolve6_probe not given or not built"; exit 1; }

ID=$$
NS=rocedp-nd6-$ID
VH=rd6${ID}h   # host end, the daemon's port
VN=rd6${ID}n   # namespace end
PREFIX=rocedp-nd6-$ID
DAEMON_IP=198.18.6.1
DAEMON_IP6=fd52::20
NS_IP6=fd52::10
ABSENT_IP6=fd52::99
DAEMON_MAC=02:52:44:50:06:01
TMP=$(mktemp -d /tmp/rocedp-nd6.XXXXXX)
LOG=$TMP/rocedpd.log
PID=""
PROBE_PID=""

stop_pid() {  # stop_pid PID: SIGKILL and reap, if it still runs
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
  fi
}
cleanup() {
  local rc=$?
  stop_pid "$PID"
  stop_pid "$PROBE_PID"
  ip netns del "$NS" 2>/dev/null      # also deletes the veth pair
  ip link del "$VH" 2>/dev/null
  rm -rf "$TMP" "/var/run/dpdk/$PREFIX" "/var/run/dpdk/$PREFIX-probe"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "FAIL: $*"
  for f in "$LOG" "$TMP/probe.log"; do
    if [ -s "$f" ]; then
      echo "--- $(basename "$f") ---"
      tail -n 40 "$f"
    fi
  done
  exit 1
}

# The namespace's IPv6 neighbour entry for the daemon, "fd52::20 lladdr MAC STATE" or empty.
ns_neigh6() { ip -n "$NS" -6 neigh show "$DAEMON_IP6" dev "$VN" 2>/dev/null; }

# ---- namespace and veth ----
ip netns add "$NS" || fail "ip netns add"
ip link add "$VH" type veth peer name "$VN" || fail "ip link add veth"
ip link set "$VN" netns "$NS" || fail "move $VN"
# The host end is the daemon's: the host kernel must not answer for it (no IPv6 on it, no ARP).
sysctl -qw "net.ipv4.conf.$VH.arp_ignore=8" || fail "arp_ignore"
sysctl -qw "net.ipv6.conf.$VH.disable_ipv6=1" || fail "disable_ipv6 on $VH"
ip link set "$VH" up || fail "link up $VH"
ip -n "$NS" link set lo up
ip netns exec "$NS" sysctl -qw "net.ipv6.conf.$VN.disable_ipv6=0" || fail "enable IPv6 on $VN"
ip netns exec "$NS" sysctl -qw "net.ipv6.conf.$VN.accept_dad=1" || fail "accept_dad"
ip -n "$NS" addr add "$NS_IP6/64" dev "$VN" nodad || fail "addr add $NS_IP6"
ip -n "$NS" link set "$VN" up || fail "link up $VN"
NS_MAC=$(ip -n "$NS" -br link show "$VN" | awk '{print $3}')

# ---- configuration ----
write_config() {  # write_config FILE PREFIX
  cat > "$1" <<EOF
eal:
  lcores: [0, 1]
  main_lcore: 0
  memory_mb: 256
  hugepages: false
  file_prefix: $2
ports:
  - name: p0
    devargs: net_af_packet0,iface=$VH
    mac: "$DAEMON_MAC"
    address: $DAEMON_IP/24
    ipv6: "$DAEMON_IP6"
dataplane:
  lcores: [1]
  mbuf_count: 4095
  mbuf_cache_size: 64
control:
  arp_retry_ms: 200
  arp_retries: 3
telemetry:
  enabled: true
  stats_interval_ms: 100
logging:
  level: info
EOF
}
write_config "$TMP/rocedpd.yaml" "$PREFIX"
write_config "$TMP/probe.yaml" "$PREFIX-probe"

[ -z "$(ns_neigh6)" ] || fail "namespace already has an entry for $DAEMON_IP6: $(ns_neigh6)"

# ---- start the daemon; wait until its port is attached ----
"$DAEMON" --config "$TMP/rocedpd.yaml" > "$LOG" 2>&1 &
PID=$!
ready=""
for _ in $(seq 1 150); do
  kill -0 "$PID" 2>/dev/null || fail "rocedpd exited early"
  if grep -q "port_ready" "$LOG"; then
    ready=yes
    break
  fi
  sleep 0.1
done
[ -n "$ready" ] || fail "rocedpd's port did not come up"
grep -q "port_ndp_groups.*mode=" "$LOG" || fail "the port did not open its multicast groups"
echo "ok: $(grep -o 'port_ndp_groups.*' "$LOG" | head -1)"

# 1. Ping: the kernel resolves fd52::20 by neighbour discovery and gets three echo replies.
out=$(ip netns exec "$NS" ping -6 -c 3 -W 2 "$DAEMON_IP6" 2>&1) || fail "ping -6 $DAEMON_IP6: $out"
echo "$out"
echo "$out" | grep -q "3 received" || fail "not every echo request was answered"
echo "ok: ping -6"

entry=$(ns_neigh6)
echo "$entry" | grep -qi "lladdr $DAEMON_MAC" || fail "namespace IPv6 neighbour entry is '$entry'"
echo "$entry" | grep -qE "FAILED|INCOMPLETE" && fail "namespace IPv6 neighbour entry is '$entry'"
echo "ok: namespace neighbour: $entry"

# 2. Telemetry: our address on the port, the NS answered, the echoes, no checksum drops, and the
# solicitor learned (RFC 4861 7.2.3; it rides on a stats round, so allow a few).
SOCK=/var/run/dpdk/$PREFIX/dpdk_telemetry.v2
[ -S "$SOCK" ] || fail "no telemetry socket at $SOCK"
telemetry_check() {
  python3 - "$SOCK" "$DAEMON_IP6" "$NS_IP6" "$NS_MAC" <<'PY'
import json, socket, sys
path, ours, peer, mac = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].lower()
def query(cmd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    s.recv(16384)
    s.send(cmd.encode())
    return json.loads(s.recv(1 << 20).decode())[cmd]
ports = query("/rocedp/ports")
if ports.get("ipv6") != [ours]:
    sys.exit(f"/rocedp/ports ipv6 is {ports.get('ipv6')}")
cores = query("/rocedp/cores")
if sum(cores["na_sent"]) < 1 or sum(cores["echo6_replies"]) < 3:
    sys.exit(f"na_sent {cores['na_sent']}, echo6_replies {cores['echo6_replies']}")
drops = query("/rocedp/drops")
for bad in ("icmp6_bad_checksum", "ndp_bad_hop_limit", "ndp_bad_format", "ndp_reply_failed"):
    if drops.get(bad, -1) != 0:
        sys.exit(f"/rocedp/drops {bad} = {drops.get(bad)}")
table = query("/rocedp/neighbours")
ips, macs = table.get("ip", []), table.get("mac", [])
if peer not in ips:
    sys.exit(f"the daemon's neighbour table does not list {peer}: {table}")
if macs[ips.index(peer)].lower() != mac:
    sys.exit(f"the daemon maps {peer} to {macs[ips.index(peer)]}, the namespace's MAC is {mac}")
print(f"ok: telemetry: ipv6 {ours}, na_sent {sum(cores['na_sent'])}, "
      f"echo6_replies {sum(cores['echo6_replies'])}, learned {peer} -> {mac}")
PY
}
passed=""
for _ in $(seq 1 20); do
  if telemetry_check > "$TMP/telemetry.out" 2>&1; then
    passed=yes
    break
  fi
  sleep 0.2
done
cat "$TMP/telemetry.out"
[ -n "$passed" ] || fail "telemetry"

# 3. Duplicate address detection: the namespace claims rocedpd's address; our NA to all-nodes
# (Override, not Solicited) must make the kernel give it up.
ip -n "$NS" addr add "$DAEMON_IP6/64" dev "$VN" || fail "addr add $DAEMON_IP6 (with DAD)"
dad=""
for _ in $(seq 1 50); do
  if ip -n "$NS" -6 addr show dev "$VN" | grep -q "$DAEMON_IP6/64.*dadfailed"; then
    dad=yes
    break
  fi
  sleep 0.1
done
state=$(ip -n "$NS" -6 addr show dev "$VN" | grep "$DAEMON_IP6/64")
ip -n "$NS" addr del "$DAEMON_IP6/64" dev "$VN" 2>/dev/null
[ -n "$dad" ] || fail "the kernel's DAD did not see our NA: '$state'"
echo "ok: DAD answered: $state"

# ---- stop the daemon by PID: clean shutdown, exit status 0 ----
kill -TERM "$PID"
status=""
for _ in $(seq 1 300); do
  if ! kill -0 "$PID" 2>/dev/null; then
    wait "$PID"
    status=$?
    break
  fi
  sleep 0.1
done
[ -n "$status" ] || fail "rocedpd did not stop within 30 s of SIGTERM"
PID=""
[ "$status" -eq 0 ] || fail "rocedpd exited with status $status after SIGTERM"
echo "ok: rocedpd stopped with status 0"

# 4. resolve_neighbour6 against the kernel: our NS, its NA. The namespace's entry for us is
# flushed first, so the kernel learns our MAC from the NS's source link-layer option.
ip -n "$NS" -6 neigh flush dev "$VN"
"$PROBE" "$TMP/probe.yaml" "$NS_IP6" 5000 > "$TMP/probe.out" 2> "$TMP/probe.log" &
PROBE_PID=$!
wait "$PROBE_PID"
rc=$?
PROBE_PID=""
out=$(cat "$TMP/probe.out")
[ "$rc" -eq 0 ] || fail "resolve6_probe $NS_IP6 exited $rc: $out"
[ "$out" = "mac $NS_MAC" ] || fail "resolve6_probe: '$out', the namespace's MAC is $NS_MAC"
echo "ok: resolve_neighbour6($NS_IP6) = $NS_MAC"

"$PROBE" "$TMP/probe.yaml" "$ABSENT_IP6" 5000 > "$TMP/probe.out" 2> "$TMP/probe.log" &
PROBE_PID=$!
wait "$PROBE_PID"
rc=$?
PROBE_PID=""
out=$(cat "$TMP/probe.out")
[ "$rc" -eq 1 ] && [ "$out" = "unreachable" ] ||
  fail "resolve6_probe $ABSENT_IP6: exit $rc, '$out' (expected unreachable)"
echo "ok: resolve_neighbour6($ABSENT_IP6) unreachable after the retries"
echo "PASS"

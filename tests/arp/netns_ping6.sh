#!/usr/bin/env bash
# End to end, IPv6: rocedpd on the host end of a veth pair (net_af_packet) with an IPv6 address.
# The Linux kernel in a network namespace is the peer:
#   0. the namespace holds a stale entry for rocedpd's address with another MAC; the unsolicited
#      NA rocedpd sends as its port starts (RFC 4861 7.2.6: all nodes, Override) replaces it with
#      rocedpd's MAC before any traffic needs it;
#   1. it resolves rocedpd's address by neighbour discovery (its NS, our NA) and pings it
#      (ping -6 -c 3): every echo must come back, and `ip -6 neigh` must hold our MAC;
#   2. rocedpd learned the namespace's address from the solicitation it answered (telemetry);
#   3. the kernel's duplicate address detection for rocedpd's address, run in the namespace, is
#      answered (our NA to all-nodes), so the kernel marks that address "dadfailed"; a node that
#      advertises rocedpd's address (an unsolicited NA) is answered by one of ours in defence, a
#      second within 10 s is not;
#   4. after rocedpd stopped, resolve6_probe (AdapterRuntime::resolve_neighbour6 over the same
#      port) resolves the namespace's address from the kernel's NA, an address nobody has is
#      reported unreachable, and a static IPv6 neighbour of the configuration (ports[].neighbours,
#      an `ip` with colons) resolves at once.
# A wrong NA or echo reply (checksum, flags, option, hop limit) is dropped by the kernel, so each
# step fails. Traffic goes only to the namespace and veth this script creates; everything it
# creates is removed by the EXIT trap, also on failure; processes are stopped by PID.
# Usage: netns_ping6.sh RESOLVE6_PROBE. Exit 77 (skip) when not root or without IPv6.
set -u

if [ ! -d /proc/sys/net/ipv6 ]; then
  echo "SKIP: the kernel has no IPv6"
  exit 77
fi
# shellcheck source=netns_lib.sh
source "$(dirname "$0")/netns_lib.sh"
netns_init nd6 rd6
PROBE=${1:-}
[ -n "$PROBE" ] && [ -x "$PROBE" ] || { echo "FAIL: resolve6_probe not given or not built"; exit 1; }
DAEMON_IP=198.18.6.1
DAEMON_IP6=fd52::20
NS_IP6=fd52::10
ABSENT_IP6=fd52::99
STATIC_IP6=fd52::77 STATIC_MAC=02:52:44:50:06:77
STALE_MAC=02:52:44:50:06:99  # the namespace's wrong entry for rocedpd's address
DAEMON_MAC=02:52:44:50:06:01
PROBE_PID=""
FAIL_LOGS+=("$TMP/probe.log")
netns_cleanup_hook() {
  stop_pid "$PROBE_PID"
  rm -rf "/var/run/dpdk/$PREFIX-probe"
}

# The namespace's IPv6 neighbour entry for the daemon, "fd52::20 lladdr MAC STATE" or empty.
ns_neigh6() { ip -n "$NS" -6 neigh show "$DAEMON_IP6" dev "$VN" 2>/dev/null; }

# ---- namespace and veth ----
netns_veth
ip netns exec "$NS" sysctl -qw "net.ipv6.conf.$VN.disable_ipv6=0" || fail "enable IPv6 on $VN"
ip netns exec "$NS" sysctl -qw "net.ipv6.conf.$VN.accept_dad=1" || fail "accept_dad"
ip -n "$NS" addr add "$NS_IP6/64" dev "$VN" nodad || fail "addr add $NS_IP6"
netns_veth_up

# ---- configuration ----
config=(port.ipv6="\"$DAEMON_IP6\"" control.arp_retries=3 telemetry.stats_interval_ms=100)
netns_write_config "$TMP/rocedpd.yaml" "$PREFIX" "${config[@]}"
netns_write_config "$TMP/probe.yaml" "$PREFIX-probe" "${config[@]}" \
  port.neighbours="[{ip: \"$STATIC_IP6\", mac: \"$STATIC_MAC\"}]"

[ -z "$(ns_neigh6)" ] || fail "namespace already has an entry for $DAEMON_IP6: $(ns_neigh6)"
ip -n "$NS" -6 neigh add "$DAEMON_IP6" lladdr "$STALE_MAC" dev "$VN" nud stale ||
  fail "neigh add $DAEMON_IP6 (stale)"

# ---- start the daemon; wait until its port is attached ----
netns_start_daemon "$TMP/rocedpd.yaml"
netns_poll 150 0.1 grep -q "port_ready" "$LOG" || fail "rocedpd's port did not come up"
grep -q "port_ndp_groups.*mode=" "$LOG" || fail "the port did not open its multicast groups"
echo "ok: $(grep -o 'port_ndp_groups.*' "$LOG" | head -1)"

# 0. The unsolicited NA: the stale entry now holds rocedpd's MAC, with no traffic in between.
took_our_mac() { ns_neigh6 | grep -qi "lladdr $DAEMON_MAC"; }
netns_poll 50 0.1 took_our_mac || fail "the unsolicited NA did not replace $STALE_MAC: '$(ns_neigh6)'"
echo "ok: unsolicited NA: $(ns_neigh6)"
ip -n "$NS" -6 neigh del "$DAEMON_IP6" dev "$VN" || fail "neigh del $DAEMON_IP6"  # step 1 solicits

# 1. Ping: the kernel resolves fd52::20 by neighbour discovery and gets three echo replies.
netns_ping "ping -6 $DAEMON_IP6" -6 "$DAEMON_IP6"
echo "ok: ping -6"
netns_expect_neigh "IPv6 neighbour" "$(ns_neigh6)"

# 2. Telemetry: our address on the port, the NS answered, the echoes, no checksum drops, and the
# solicitor learned (RFC 4861 7.2.3; it rides on a stats round, so allow a few).
SOCK=/var/run/dpdk/$PREFIX/dpdk_telemetry.v2
[ -S "$SOCK" ] || fail "no telemetry socket at $SOCK"
telemetry_check() {
  python3 - "$SOCK" "$DAEMON_IP6" "$NS_IP6" "$NS_MAC" > "$TMP/telemetry.out" 2>&1 <<'PY'
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
netns_poll 20 0.2 telemetry_check
passed=$?
cat "$TMP/telemetry.out"
[ "$passed" -eq 0 ] || fail "telemetry"

# 3. Duplicate address detection: the namespace claims rocedpd's address; our NA to all-nodes
# (Override, not Solicited) must make the kernel give it up.
ip -n "$NS" addr add "$DAEMON_IP6/64" dev "$VN" || fail "addr add $DAEMON_IP6 (with DAD)"
dad_failed() { ip -n "$NS" -6 addr show dev "$VN" | grep -q "$DAEMON_IP6/64.*dadfailed"; }
netns_poll 50 0.1 dad_failed
dad=$?
state=$(ip -n "$NS" -6 addr show dev "$VN" | grep "$DAEMON_IP6/64")
ip -n "$NS" addr del "$DAEMON_IP6/64" dev "$VN" 2>/dev/null
[ "$dad" -eq 0 ] || fail "the kernel's DAD did not see our NA: '$state'"
echo "ok: DAD answered: $state"

# 3b. A node claims rocedpd's address with an unsolicited NA (RFC 4862 5.4.4: from the address,
# to all-nodes, Override, its MAC in the target link-layer option; sent with scapy). The
# namespace first holds that node's MAC for the address; rocedpd's unsolicited NA in defence puts
# its own back. A second claim within 10 s is logged, not answered.
CLAIMANT=02:66:66:66:66:66
claim6() {
  ip -n "$NS" -6 neigh replace "$DAEMON_IP6" lladdr "$CLAIMANT" dev "$VN" nud stale ||
    fail "neigh replace $DAEMON_IP6"
  ip netns exec "$NS" /usr/bin/python3 - "$VN" "$NS_MAC" "$CLAIMANT" "$DAEMON_IP6" <<'PY' || fail "scapy: the claim was not sent"
import sys
from scapy.all import Ether, ICMPv6ND_NA, ICMPv6NDOptDstLLAddr, IPv6, sendp
iface, src, claimant, ip = sys.argv[1:5]
sendp(Ether(src=src, dst="33:33:00:00:00:01") / IPv6(src=ip, dst="ff02::1", hlim=255) /
      ICMPv6ND_NA(tgt=ip, R=0, S=0, O=1) / ICMPv6NDOptDstLLAddr(lladdr=claimant),
      iface=iface, verbose=False)
PY
}
netns_check_defence ns_neigh6 claim6

# ---- stop the daemon by PID: clean shutdown, exit status 0 ----
netns_stop_daemon

# 4. resolve_neighbour6 against the kernel: our NS, its NA. The namespace's entry for us is
# flushed first, so the kernel learns our MAC from the NS's source link-layer option.
# run_probe IP: resolve6_probe for IP (5 s at most), stopped by PID on exit; $rc and $out.
run_probe() {
  "$PROBE" "$TMP/probe.yaml" "$1" 5000 > "$TMP/probe.out" 2> "$TMP/probe.log" &
  PROBE_PID=$!
  wait "$PROBE_PID"
  rc=$?
  PROBE_PID=""
  out=$(cat "$TMP/probe.out")
}
ip -n "$NS" -6 neigh flush dev "$VN"
run_probe "$NS_IP6"
[ "$rc" -eq 0 ] || fail "resolve6_probe $NS_IP6 exited $rc: $out"
[ "$out" = "mac $NS_MAC" ] || fail "resolve6_probe: '$out', the namespace's MAC is $NS_MAC"
echo "ok: resolve_neighbour6($NS_IP6) = $NS_MAC"

run_probe "$ABSENT_IP6"
[ "$rc" -eq 1 ] && [ "$out" = "unreachable" ] ||
  fail "resolve6_probe $ABSENT_IP6: exit $rc, '$out' (expected unreachable)"
echo "ok: resolve_neighbour6($ABSENT_IP6) unreachable after the retries"

run_probe "$STATIC_IP6"
[ "$rc" -eq 0 ] && [ "$out" = "mac $STATIC_MAC" ] ||
  fail "resolve6_probe $STATIC_IP6: exit $rc, '$out' (expected the static $STATIC_MAC)"
echo "ok: resolve_neighbour6($STATIC_IP6) = $STATIC_MAC, the static entry"
echo "PASS"

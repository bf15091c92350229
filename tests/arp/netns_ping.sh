#!/usr/bin/env bash
# End to end: rocedpd on the host end of a veth pair (net_af_packet) announces itself
# with a gratuitous ARP, answers ARP and ICMP echo from a network namespace, defends its address
# against a station that claims it (RFC 5227 §2.4, once per 10 s), and stops cleanly on SIGTERM. Traffic goes only to the namespace and veth this script creates; everything it creates
# is removed by the EXIT trap, also on failure. Exit 77 (skip) only when not root.
set -u

# shellcheck source=netns_lib.sh
source "$(dirname "$0")/netns_lib.sh"
netns_init arp rda
DAEMON_IP=198.18.0.1
NS_IP=198.18.0.2
DAEMON_MAC=02:52:44:50:00:01

# The namespace's ARP entry for the daemon, "lladdr MAC STATE" or empty.
ns_neigh() { ip -n "$NS" neigh show "$DAEMON_IP" dev "$VN" 2>/dev/null; }

# ---- namespace and veth ----
netns_veth
ip -n "$NS" addr add "$NS_IP/24" dev "$VN" || fail "addr add"
# Accept the daemon's gratuitous ARP (RFC 5227 announcement) as a new neighbour entry.
ip netns exec "$NS" sysctl -qw "net.ipv4.conf.$VN.arp_accept=1" || fail "arp_accept"
ip netns exec "$NS" sysctl -qw "net.ipv6.conf.$VN.disable_ipv6=1" 2>/dev/null
netns_veth_up

# ---- configuration ----
netns_write_config "$TMP/rocedpd.yaml" "$PREFIX" port.mtu=1500 control.arp_retries=5 \
  control.neighbour_expiry_s=300

[ -z "$(ns_neigh)" ] || fail "namespace already has an entry for $DAEMON_IP: $(ns_neigh)"

# ---- start the daemon ----
netns_start_daemon "$TMP/rocedpd.yaml"

# 1. The gratuitous ARP sent at start-up, before any ping, teaches the namespace our MAC.
learned_gratuitous() { ns_neigh | grep -qi "lladdr $DAEMON_MAC"; }
netns_poll 150 0.1 learned_gratuitous ||
  fail "namespace did not learn $DAEMON_MAC from the gratuitous ARP (entry: '$(ns_neigh)')"
echo "ok: gratuitous ARP learned: $(ns_neigh)"

# 2. Ping: the namespace's kernel ARPs (or reuses the announced entry) and gets echo replies.
# Flush first so that ARP resolution itself is exercised by the ping.
ip -n "$NS" neigh flush dev "$VN"
netns_ping "ping $DAEMON_IP from $NS" "$DAEMON_IP"
echo "ok: ping"

# 3. The namespace's neighbour table holds the daemon's MAC, resolved by ARP.
netns_expect_neigh neighbour "$(ns_neigh)"

# 4. Telemetry: the daemon's own neighbour table lists the namespace's address with its MAC,
# learned from the ARP request it answered (RFC 826). Learning rides on the next stats snapshot
# round, so allow a few rounds.
SOCK=/var/run/dpdk/$PREFIX/dpdk_telemetry.v2
if [ -S "$SOCK" ]; then
  listed() {
    python3 - "$SOCK" "$NS_IP" >/dev/null 2>&1 <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.recv(16384)
s.send(b"/rocedp/neighbours")
table = json.loads(s.recv(1 << 20).decode()).get("/rocedp/neighbours") or {}
sys.exit(0 if sys.argv[2] in table.get("ip", []) else 1)
PY
  }
  netns_poll 9 0.2 listed
  python3 - "$SOCK" "$NS_IP" "$NS_MAC" <<'PY' || fail "telemetry /rocedp/neighbours"
import json, socket, sys
path, ip, mac = sys.argv[1], sys.argv[2], sys.argv[3].lower()
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
json.loads(s.recv(16384).decode())          # greeting
s.send(b"/rocedp/neighbours")
reply = json.loads(s.recv(1 << 20).decode())
table = reply.get("/rocedp/neighbours")
if not isinstance(table, dict):
    print("telemetry reply:", reply); sys.exit(1)
ips = table.get("ip", [])
macs = table.get("mac", [])
if ip in ips:
    got = macs[ips.index(ip)].lower()
    if got != mac:
        print(f"daemon maps {ip} to {got}, namespace MAC is {mac}"); sys.exit(1)
    print(f"ok: daemon resolved {ip} -> {got} ({table.get('state', ['?'])[ips.index(ip)]})")
else:
    print(f"note: daemon's neighbour table does not list {ip}: {table}")
PY
else
  fail "no telemetry socket at $SOCK"
fi

# 5. Another station claims the daemon's address (RFC 5227 §2.4). The namespace first holds that
# station's MAC for the address, then the claim (an ARP announcement, sent with scapy) reaches
# the daemon: it logs the conflict and defends with one announcement of its own, which puts its
# MAC back in the namespace's table. A second claim within 10 s is logged, not answered.
CLAIMANT=02:66:66:66:66:66
claim() {
  ip -n "$NS" neigh replace "$DAEMON_IP" lladdr "$CLAIMANT" dev "$VN" nud stale || fail "neigh replace"
  ip netns exec "$NS" /usr/bin/python3 - "$VN" "$NS_MAC" "$CLAIMANT" "$DAEMON_IP" <<'PY' || fail "scapy: the claim was not sent"
import sys
from scapy.all import ARP, Ether, sendp
iface, src, claimant, ip = sys.argv[1:5]
sendp(Ether(src=src, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=claimant, psrc=ip, pdst=ip),
      iface=iface, verbose=False)
PY
}
netns_check_defence ns_neigh claim

# 6. SIGTERM by PID: clean shutdown, exit status 0.
netns_stop_daemon
echo "PASS"

#!/usr/bin/env bash
# End to end: rocedpd on the host end of a veth pair (net_af_packet) announces itself
# with a gratuitous ARP, answers ARP and ICMP echo from a network namespace, and stops cleanly on
# SIGTERM. Traffic goes only to the namespace and veth this script creates; everything it creates
# is removed by the EXIT trap, also on failure. Exit 77 (skip) only when not root.
set -u

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (network namespaces, veth, AF_PACKET)"
  exit 77
fi

BIN_DIR=${ROCEDP_BIN_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin}
DAEMON=$BIN_DIR/rocedpd
if [ ! -x "$DAEMON" ]; then
  echo "FAIL: $DAEMON not built"
  exit 1
fi

# Unique names per run (interface names have at most 15 characters).
ID=$$
NS=rocedp-arp-$ID
VH=rda${ID}h   # host end, the daemon's port
VN=rda${ID}n   # namespace end
PREFIX=rocedp-arp-$ID
DAEMON_IP=198.18.0.1
NS_IP=198.18.0.2
DAEMON_MAC=02:52:44:50:00:01
TMP=$(mktemp -d /tmp/rocedp-arp.XXXXXX)
LOG=$TMP/rocedpd.log
PID=""

cleanup() {
  local rc=$?
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -KILL "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
  fi
  ip netns del "$NS" 2>/dev/null      # also deletes the veth pair
  ip link del "$VH" 2>/dev/null
  rm -rf "$TMP" "/var/run/dpdk/$PREFIX"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "FAIL: $*"
  if [ -s "$LOG" ]; then
    echo "--- rocedpd log ---"
    tail -n 50 "$LOG"
  fi
  exit 1
}

# The namespace's ARP entry for the daemon, "lladdr MAC STATE" or empty.
ns_neigh() { ip -n "$NS" neigh show "$DAEMON_IP" dev "$VN" 2>/dev/null; }

# ---- namespace and veth ----
ip netns add "$NS" || fail "ip netns add"
ip link add "$VH" type veth peer name "$VN" || fail "ip link add veth"
ip link set "$VN" netns "$NS" || fail "move $VN"
# The host end carries no IPv4 address; keep the host kernel from answering ARP on it in any case
# and from sending IPv6 noise, so that what the namespace learns comes from rocedpd.
sysctl -qw "net.ipv4.conf.$VH.arp_ignore=8" || fail "arp_ignore"
sysctl -qw "net.ipv6.conf.$VH.disable_ipv6=1" 2>/dev/null
ip link set "$VH" up || fail "link up $VH"
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$NS_IP/24" dev "$VN" || fail "addr add"
# Accept the daemon's gratuitous ARP (RFC 5227 announcement) as a new neighbour entry.
ip netns exec "$NS" sysctl -qw "net.ipv4.conf.$VN.arp_accept=1" || fail "arp_accept"
ip netns exec "$NS" sysctl -qw "net.ipv6.conf.$VN.disable_ipv6=1" 2>/dev/null
ip -n "$NS" link set "$VN" up || fail "link up $VN"
NS_MAC=$(ip -n "$NS" -br link show "$VN" | awk '{print $3}')

# ---- configuration ----
cat > "$TMP/rocedpd.yaml" <<EOF
eal:
  lcores: [0, 1]
  main_lcore: 0
  memory_mb: 256
  hugepages: false
  file_prefix: $PREFIX
ports:
  - name: p0
    devargs: net_af_packet0,iface=$VH
    mac: "$DAEMON_MAC"
    address: $DAEMON_IP/24
    mtu: 1500
dataplane:
  lcores: [1]
  mbuf_count: 4095
  mbuf_cache_size: 64
control:
  arp_retry_ms: 200
  arp_retries: 5
  neighbour_expiry_s: 300
telemetry:
  enabled: true
logging:
  level: info
EOF

[ -z "$(ns_neigh)" ] || fail "namespace already has an entry for $DAEMON_IP: $(ns_neigh)"

# ---- start the daemon ----
"$DAEMON" --config "$TMP/rocedpd.yaml" > "$LOG" 2>&1 &
PID=$!

# 1. The gratuitous ARP sent at start-up, before any ping, teaches the namespace our MAC.
learned=""
for _ in $(seq 1 150); do
  kill -0 "$PID" 2>/dev/null || fail "rocedpd exited early"
  if ns_neigh | grep -qi "lladdr $DAEMON_MAC"; then
    learned=yes
    break
  fi
  sleep 0.1
done
[ -n "$learned" ] || fail "namespace did not learn $DAEMON_MAC from the gratuitous ARP (entry: '$(ns_neigh)')"
echo "ok: gratuitous ARP learned: $(ns_neigh)"

# 2. Ping: the namespace's kernel ARPs (or reuses the announced entry) and gets echo replies.
# Flush first so that ARP resolution itself is exercised by the ping.
ip -n "$NS" neigh flush dev "$VN"
out=$(ip netns exec "$NS" ping -c 3 -W 2 "$DAEMON_IP" 2>&1) || fail "ping $DAEMON_IP from $NS: $out"
echo "$out"
echo "$out" | grep -q "3 received" || fail "not every echo request was answered"
echo "ok: ping"

# 3. The namespace's neighbour table holds the daemon's MAC, resolved by ARP.
entry=$(ns_neigh)
echo "$entry" | grep -qi "lladdr $DAEMON_MAC" || fail "namespace neighbour entry is '$entry'"
echo "$entry" | grep -qE "FAILED|INCOMPLETE" && fail "namespace neighbour entry is '$entry'"
echo "ok: namespace neighbour: $entry"

# 4. Telemetry: the daemon's own neighbour table lists the namespace's address with its MAC,
# learned from the ARP request it answered (RFC 826). Learning rides on the next stats snapshot
# round, so allow a few rounds.
SOCK=/var/run/dpdk/$PREFIX/dpdk_telemetry.v2
if [ -S "$SOCK" ]; then
  for _ in 1 2 3 4 5 6 7 8 9; do
    python3 - "$SOCK" "$NS_IP" "$NS_MAC" >/dev/null 2>&1 <<'PY' && break
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.recv(16384)
s.send(b"/rocedp/neighbours")
table = json.loads(s.recv(1 << 20).decode()).get("/rocedp/neighbours") or {}
sys.exit(0 if sys.argv[2] in table.get("ip", []) else 1)
PY
    sleep 0.2
  done
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

# 5. SIGTERM by PID: clean shutdown, exit status 0.
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
echo "PASS"

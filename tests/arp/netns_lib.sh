# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables it sets are the sourcing test's
# Shared by netns_ping.sh and netns_ping6.sh (sourced, not run): rocedpd on the host end of a veth
# pair (net_af_packet), its peer the kernel in a network namespace of the test's own. Everything
# created is removed by the EXIT trap, also on failure; processes are stopped by PID.
#
#   netns_init TAG SHORT    exit 77 (skipped) when not root; $DAEMON (rocedpd, must be built);
#                           unique names: $NS and $PREFIX (rocedp-TAG-PID), $VH (host end) and
#                           $VN (namespace end) (SHORT PID h|n); $TMP, $LOG; traps
#   netns_cleanup_hook      optional, the test's own: runs in the EXIT trap before the namespace
#                           and $TMP are removed (stop its other processes, remove their files)
#   FAIL_LOGS               files whose tail fail prints (default: $LOG)
#   fail MESSAGE            print, tails of FAIL_LOGS, exit 1
#   stop_pid PID            SIGKILL and reap, if it still runs
#   netns_veth              namespace and veth; the host end up, without IPv6 and ARP answers
#                           from the host kernel (so what the namespace learns comes from rocedpd)
#   netns_veth_up           the namespace end up (after the test configured it); sets $NS_MAC
#   netns_write_config FILE PREFIX [SECTION.KEY=VALUE...]   rocedpd's configuration: one port on
#                           $VH with $DAEMON_MAC and $DAEMON_IP/24; SECTION port, control or
#                           telemetry adds KEY: VALUE there
#   netns_start_daemon CONFIG   rocedpd in the background, log $LOG, PID $PID
#   netns_poll TRIES SECONDS CMD...   run CMD every SECONDS until it succeeds (status 0), at most
#                           TRIES times (status 1 then); fails the test if rocedpd ($PID) exits
#   netns_ping WHAT PING_ARG...   ping -c 3 in the namespace, printed; all 3 echoes must come back
#                           (fails "WHAT: output" when ping itself fails)
#   netns_expect_neigh WHAT ENTRY   ENTRY (ip neigh show) must hold $DAEMON_MAC and be usable
#   netns_stop_daemon       SIGTERM by PID: rocedpd must exit with status 0 within 30 s

netns_init() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (network namespaces, veth, AF_PACKET)"
    exit 77
  fi
  BIN_DIR=${ROCEDP_BIN_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin}
  DAEMON=$BIN_DIR/rocedpd
  [ -x "$DAEMON" ] || { echo "FAIL: $DAEMON not built"; exit 1; }
  # Unique names per run (interface names have at most 15 characters).
  ID=$$
  NS=rocedp-$1-$ID
  VH=$2${ID}h  # host end, the daemon's port
  VN=$2${ID}n  # namespace end
  PREFIX=rocedp-$1-$ID
  TMP=$(mktemp -d "/tmp/rocedp-$1.XXXXXX")
  LOG=$TMP/rocedpd.log
  FAIL_LOGS=("$LOG")
  PID=""
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM
}

stop_pid() {
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
  fi
}

netns_cleanup() {
  local rc=$?
  stop_pid "$PID"
  if declare -F netns_cleanup_hook >/dev/null; then netns_cleanup_hook; fi
  ip netns del "$NS" 2>/dev/null  # also deletes the veth pair
  ip link del "$VH" 2>/dev/null
  rm -rf "$TMP" "/var/run/dpdk/$PREFIX"
  exit "$rc"
}

fail() {
  echo "FAIL: $*"
  local f
  for f in "${FAIL_LOGS[@]}"; do
    if [ -s "$f" ]; then
      echo "--- $(basename "$f") ---"
      tail -n 50 "$f"
    fi
  done
  exit 1
}

netns_veth() {
  ip netns add "$NS" || fail "ip netns add"
  ip link add "$VH" type veth peer name "$VN" || fail "ip link add veth"
  ip link set "$VN" netns "$NS" || fail "move $VN"
  sysctl -qw "net.ipv4.conf.$VH.arp_ignore=8" || fail "arp_ignore"
  if [ -d /proc/sys/net/ipv6 ]; then
    sysctl -qw "net.ipv6.conf.$VH.disable_ipv6=1" || fail "disable_ipv6 on $VH"
  fi
  ip link set "$VH" up || fail "link up $VH"
  ip -n "$NS" link set lo up
}

netns_veth_up() {
  ip -n "$NS" link set "$VN" up || fail "link up $VN"
  NS_MAC=$(ip -n "$NS" -br link show "$VN" | awk '{print $3}')
}

# The SECTION.KEY=VALUE arguments of one section as YAML lines: _netns_config_lines SECTION INDENT
# ARG...
_netns_config_lines() {
  local section=$1 indent=$2 arg
  shift 2
  for arg in "$@"; do
    [ "${arg%%.*}" = "$section" ] || continue
    arg=${arg#*.}
    printf '%s%s: %s\n' "$indent" "${arg%%=*}" "${arg#*=}"
  done
}

netns_write_config() {
  local file=$1 prefix=$2
  shift 2
  {
    cat <<EOF
eal:
  lcores: [0, 1]
  main_lcore: 0
  memory_mb: 256
  hugepages: false
  file_prefix: $prefix
ports:
  - name: p0
    devargs: net_af_packet0,iface=$VH
    mac: "$DAEMON_MAC"
    address: $DAEMON_IP/24
EOF
    _netns_config_lines port "    " "$@"
    cat <<EOF
dataplane:
  lcores: [1]
  mbuf_count: 4095
  mbuf_cache_size: 64
control:
  arp_retry_ms: 200
EOF
    _netns_config_lines control "  " "$@"
    echo "telemetry:"
    echo "  enabled: true"
    _netns_config_lines telemetry "  " "$@"
    echo "logging:"
    echo "  level: info"
  } > "$file"
}

netns_start_daemon() {
  "$DAEMON" --config "$1" > "$LOG" 2>&1 &
  PID=$!
}

netns_poll() {
  local tries=$1 interval=$2
  shift 2
  for _ in $(seq 1 "$tries"); do
    kill -0 "$PID" 2>/dev/null || fail "rocedpd exited early"
    "$@" && return 0
    sleep "$interval"
  done
  return 1
}

netns_ping() {
  local what=$1 out
  shift
  out=$(ip netns exec "$NS" ping -c 3 -W 2 "$@" 2>&1) || fail "$what: $out"
  echo "$out"
  echo "$out" | grep -q "3 received" || fail "not every echo request was answered"
}

netns_expect_neigh() {
  echo "$2" | grep -qi "lladdr $DAEMON_MAC" || fail "namespace $1 entry is '$2'"
  echo "$2" | grep -qE "FAILED|INCOMPLETE" && fail "namespace $1 entry is '$2'"
  echo "ok: namespace neighbour: $2"
}

# netns_control KEY: KEY of the running daemon's /rocedp/control (telemetry).
netns_control() {
  python3 - "/var/run/dpdk/$PREFIX/dpdk_telemetry.v2" "$1" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.recv(16384)
s.send(b"/rocedp/control")
print(json.loads(s.recv(1 << 20).decode())["/rocedp/control"][sys.argv[2]])
PY
}

# netns_check_defence NEIGH CLAIM: another node claims the daemon's address. CLAIM points the
# namespace's entry for the address (printed by NEIGH) at $CLAIMANT and sends the claim with that
# MAC; the daemon must log the conflict and defend with one announcement of its own, which puts
# its MAC back in the entry, and count it (address_defences). A second claim within 10 s is
# logged, not answered: the entry keeps $CLAIMANT.
netns_check_defence() {
  local neigh=$1 claim=$2 before
  before=$(netns_control address_defences) || fail "telemetry /rocedp/control"
  "$claim"
  restored() { "$neigh" | grep -qi "lladdr $DAEMON_MAC"; }
  netns_poll 50 0.1 restored || fail "the daemon did not defend its address: entry '$("$neigh")'"
  grep -q "event=address_conflict .*claimed_by=$CLAIMANT defended=yes" "$LOG" ||
    fail "the conflict was not logged as defended"
  defended() { [ "$(netns_control address_defences)" = $((before + 1)) ]; }
  netns_poll 20 0.1 defended || fail "address_defences $(netns_control address_defences), not $((before + 1))"
  echo "ok: conflict defended: $("$neigh")"
  "$claim"
  refused() { grep -q "event=address_conflict .*claimed_by=$CLAIMANT defended=no" "$LOG"; }
  netns_poll 50 0.1 refused || fail "the second conflict within 10 s was not logged as not defended"
  sleep 0.5
  "$neigh" | grep -qi "lladdr $CLAIMANT" || fail "a second announcement within 10 s: entry '$("$neigh")'"
  [ "$(netns_control address_defences)" = $((before + 1)) ] || fail "address_defences moved on the second claim"
  echo "ok: the second conflict within 10 s logged, not answered"
}

netns_stop_daemon() {
  kill -TERM "$PID"
  local status=""
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
}

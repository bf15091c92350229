# Shared by the interop tests (sourced, not run): a live Linux Soft-RoCE peer from the rig
# (../shared/rig: QEMU guests with rdma_rxe on a bridge in the netns "rig"), our processes in that
# netns on net_af_packet veths, one capture per case on the bridge, roce-check on every capture,
# and cleanup of everything we started or created, by PID, on any exit.
#
#   iop_init NAME            work dir, traps; exit 77 (skipped) without root
#   iop_net MTU VETH...      the rig's bridge (netns and bridge are removed at exit if we made
#                            them) and one veth per name for our processes
#   iop_devargs N VETH MTU   net_af_packet devargs for a DPDK port on VETH
#   iop_start NAME CMD...    CMD in the rig netns, in the background, log $IOP_WORK/NAME.log
#   iop_guest NAME IP MTU SCRIPT   boot a Linux peer running SCRIPT (busy-box sh), in the
#                            background; its console goes to $IOP_WORK/NAME.console
#                            (IOP_GUEST_IPV6=1: with IPv6 on its eth0)
#   iop_wait FILE REGEX SECONDS    wait until a line of FILE matches (false on timeout)
#   iop_capture_start CASE FILTER [PACKETS]  / iop_capture_stop CASE: tcpdump on the bridge
#                            into $IOP_ARTIFACTS/interop-$IOP_PREFIX-CASE.pcap (its first
#                            PACKETS frames only, if given)
#   iop_check_captures       roce-check on every capture stopped so far (one report)
#   iop_follow CONSOLE FILTER SECS  drive a guest's cases (see below)
#   iop_cm_sources CASE ATTR / iop_hw CONSOLE TAG COUNTER   read results
#   iop_capture_dropped CASE  true if the kernel dropped frames of that capture
#   iop_bridge_loss PCT|off  drop PCT % of the RoCEv2 frames the bridge forwards (nftables)
#   iop_bridge_impair DROP CORRUPT DUP PORT_A PORT_B | off   the same with corruption, duplicates
#   stop_pid PID             TERM, then KILL after 5 s (scripts/lib/stop_pid.sh)
#   iop_fail MESSAGE         print, mark the test failed (it goes on, so every case reports)
#
# Guest scripts call `begin CASE` before and `end CASE $?` after each case (iop_case_lines gives
# these shell helpers): begin prints "BEGIN CASE" and waits until the host, its capture running,
# creates go-CASE in the guest's 9p share; end prints "END CASE rc=N". So each case is captured
# on its own, whatever the timing.

iop_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IOP_ROOT=$(cd "$iop_here/../.." && pwd)
IOP_BIN=${ROCEDP_BIN_DIR:-$IOP_ROOT/build/bin}
IOP_RIG=${ROCEDP_RIG_DIR:-$(cd "$IOP_ROOT/../shared/rig" 2>/dev/null && pwd)}
IOP_CHECK=${ROCEDP_SHARED_DIR:-$IOP_ROOT/../shared}/tools/roce-check
# RoCEv2 over IPv6 captures: roce-check less tshark's zero-UDP-checksum finding (the script says
# why); a test sets IOP_CHECK to it.
IOP_CHECK_IPV6=$IOP_ROOT/tests/common/roce-check-ipv6
IOP_ARTIFACTS=${ROCEDP_ARTIFACT_DIR:-$IOP_ROOT/build/test-artifacts}
IOP_FAILED=0
IOP_PREFIX=${IOP_PREFIX:-}  # artifact names: interop-$IOP_PREFIX$case.pcap
iop_pids=()
iop_veths=()
iop_own_netns=0
iop_captures=()
iop_checks=()
# Cases whose capture holds only their first N frames (iop_guest_cases): a case that moves
# hundreds of MB would make a capture that roce-check takes minutes over.
declare -A IOP_CAPTURE_PACKETS=()

iop_fail() {
  echo "FAIL: $*" >&2
  IOP_FAILED=1
}

iop_init() {
  IOP_NAME=$1
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (netns, bridge, taps)"
    exit 77
  fi
  [ -n "$IOP_RIG" ] && [ -x "$IOP_RIG/peer.sh" ] || { echo "FAIL: no rig at ../shared/rig" >&2; exit 1; }
  IOP_WORK=$(mktemp -d "/tmp/rocedp-$IOP_NAME.XXXXXX")
  mkdir -p "$IOP_ARTIFACTS"
  trap iop_cleanup EXIT
  trap 'exit 143' INT TERM
  # Builds the guest image on first use (apt-get download + qemu); a no-op afterwards.
  "$IOP_RIG/up.sh" >"$IOP_WORK/up.log" 2>&1 || { cat "$IOP_WORK/up.log" >&2; echo "FAIL: rig/up.sh" >&2; exit 1; }
}

source "$iop_here/../../scripts/lib/stop_pid.sh"

iop_cleanup() {
  local rc=$?
  for c in "${iop_captures[@]}"; do iop_capture_stop "$c" >/dev/null 2>&1 || true; done
  for pid in "${iop_pids[@]}"; do stop_pid "$pid"; done
  [ "${iop_bridge_loss_on:-0}" = 1 ] && iop_bridge_loss off
  [ "${iop_bridge_drop_on:-0}" = 1 ] && iop_bridge_drop_first off
  [ "${iop_bridge_ce_on:-0}" = 1 ] && iop_bridge_mark_ce off
  for v in "${iop_veths[@]}"; do "$IOP_RIG/net.sh" del "$v" >/dev/null 2>&1 || true; done
  [ $iop_own_netns = 1 ] && "$IOP_RIG/net.sh" down >/dev/null 2>&1
  if [ $rc -ne 0 ] || [ $IOP_FAILED -ne 0 ]; then
    for f in "$IOP_WORK"/*.log "$IOP_WORK"/*.console; do
      [ -f "$f" ] && { echo "---- $f (last 40 lines)"; tail -n 40 "$f"; } >&2
    done
  fi
  if [ $rc -ne 0 ] || [ $IOP_FAILED -ne 0 ]; then
    echo "work directory kept: $IOP_WORK" >&2
  else
    rm -rf "$IOP_WORK"
  fi
  rm -rf /var/run/dpdk/rdp-iop-*
  [ $rc -eq 0 ] && [ $IOP_FAILED -ne 0 ] && rc=1
  exit $rc
}

iop_net() {
  local mtu=$1
  shift
  grep -qx rig <(ip netns list | awk '{print $1}') || iop_own_netns=1
  RIG_MTU=$mtu "$IOP_RIG/net.sh" up >/dev/null
  for v in "$@"; do
    RIG_MTU=$mtu "$IOP_RIG/net.sh" veth "$v" >/dev/null
    iop_veths+=("$v")
  done
}

# Devargs of a DPDK port on veth VETH. Above MTU 1500, net_af_packet's socket frames must hold a
# jumbo frame and its tpacket header (framesz, in 256-byte steps), and a block must hold a whole
# number of frames at page granularity (the PMD strides frames by framesz): 16 frames a block.
iop_devargs() {
  local n=$1 veth=$2 mtu=$3
  if [ "$mtu" -le 1500 ]; then
    echo "net_af_packet$n,iface=$veth"
  else
    local frame=$(((mtu + 14 + 4 + 64 + 255) / 256 * 256))
    echo "net_af_packet$n,iface=$veth,framesz=$frame,blocksz=$((frame * 16)),framecnt=512"
  fi
}

# Starts rocedpd (EAL file prefix rdp-iop-d-PID) on the rig port DEVARGS with ADDR/24 and MTU,
# port name rig0, its polling core on CPU 1, and the listeners given (YAML flow maps, one an
# argument, e.g. "{port: rig0, nd_port: 7471, service: echo}"); false unless it runs within 30 s.
# IOP_ROCEDPD_IPV6=ADDR gives the port that IPv6 address too; IOP_ROCEDPD_PORT2="DEVARGS ADDR"
# adds a second port, rig1 (MAC 02:00:00:00:00:16, ADDR/24), with an adapter of its own.
iop_rocedpd() {
  local mtu=$1 dev=$2 addr=$3 l
  shift 3
  {
    cat <<EOF
eal:
  lcores: [0, 1]
  main_lcore: 0
  memory_mb: 256
  hugepages: false
  file_prefix: rdp-iop-d-$$
  extra_args: ["--no-pci", "--log-level=lib.eal:notice"]
ports:
  - {name: rig0, devargs: "$dev", mac: "02:00:00:00:00:14", address: $addr/24, mtu: $mtu${IOP_ROCEDPD_IPV6:+, ipv6: "$IOP_ROCEDPD_IPV6"}}
EOF
    if [ -n "${IOP_ROCEDPD_PORT2:-}" ]; then
      local dev2 addr2
      read -r dev2 addr2 <<<"$IOP_ROCEDPD_PORT2"
      echo "  - {name: rig1, devargs: \"$dev2\", mac: \"02:00:00:00:00:16\", address: $addr2/24, mtu: $mtu}"
    fi
    cat <<EOF
dataplane:
  lcores: [1]
  idle_sleep_us: 50
listeners:
EOF
    for l in "$@"; do echo "  - $l"; done
  } >"$IOP_WORK/rocedpd.yaml"
  iop_start rocedpd "$IOP_BIN/rocedpd" --config "$IOP_WORK/rocedpd.yaml"
  iop_wait "$IOP_WORK/rocedpd.log" "event=running" 30
}

iop_start() {
  local name=$1
  shift
  ip netns exec rig "$@" >"$IOP_WORK/$name.log" 2>&1 &
  iop_pids+=($!)
  IOP_LAST_PID=$!
}

# iop_serve_guest NAME MARKER ARGS...: rocedp-perf ARGS in the rig as NAME (its log NAME.log);
# once it listens, the guest's client may start (the share's MARKER file). Its PID in IOP_LAST_PID.
iop_serve_guest() {
  local name=$1 marker=$2
  shift 2
  iop_start "$name" "$IOP_BIN/rocedp-perf" "$@"
  iop_wait "$IOP_WORK/$name.log" "listening on port" 30 || iop_fail "$name: rocedp-perf $1 $2 did not listen"
  touch "$IOP_WORK/share/$marker"
}

# The Linux ends of the ops and CM checks (tests/interop/*_check_peer.c, built on the host) into
# the guest's share (/mnt/share there).
iop_share_check_peers() {
  local p
  mkdir -p "$IOP_WORK/share"
  for p in ops_check_peer cm_check_peer; do
    cp "$IOP_BIN/$p" "$IOP_WORK/share/" 2>/dev/null ||
      iop_fail "$IOP_BIN/$p is not built (scripts/setup.sh installs libibverbs-dev and librdmacm-dev)"
  done
}

# iop_perf_echo SERVER N LOG ARGS...: once the guest's rdma_server printed its N-th start line,
# rocedp-perf ARGS connects to SERVER:7471, SENDs 16 bytes and awaits the echo; tried again (up to
# three times) while the server refuses, as one not listening yet does. Its status in IOP_PERF_RC.
iop_perf_echo() {
  local server=$1 n=$2 log=$3 tries
  shift 3
  for _ in $(seq 300); do
    [ "$(grep -c "rdma_server: start" "$IOP_WORK/linux.console")" -ge "$n" ] && break
    sleep 0.1
  done
  for tries in 1 2 3; do
    sleep 0.5
    ip netns exec rig "$IOP_BIN/rocedp-perf" "$@" --connect "$server:7471" send lat -s 16 -n 1 --peer-echoes \
      >"$log.try" 2>&1
    IOP_PERF_RC=$?
    cat "$log.try" >>"$log"
    grep -q "REFUSED\|refused" "$log.try" && [ $IOP_PERF_RC -ne 0 ] && [ $tries -lt 3 ] && continue
    break
  done
  rm -f "$log.try"
}

# Kernel modules the guest's image does not hold (e.g. 8021q), with their dependencies, from the
# rig's copy of the guest's kernel package into the share: the guest loads them with
# `sh /mnt/share/modules/load.sh`.
iop_share_modules() {
  local cache kroot kver line
  for cache in ${RIG_CACHE:-} "$IOP_RIG/cache" "${RIG_STATE:-/var/tmp/rocedp-rig}/cache"; do
    [ -d "$cache/kpkg/lib/modules" ] && { kroot=$cache/kpkg; break; }
  done
  [ -n "${kroot:-}" ] || { iop_fail "no guest kernel package under the rig's cache (../shared/rig/up.sh)"; return 1; }
  kver=$(ls "$kroot/lib/modules" | head -1)
  mkdir -p "$IOP_WORK/share/modules"
  : >"$IOP_WORK/share/modules/load.sh"
  while read -r line; do
    set -- $line
    [ "$1" = insmod ] || continue
    cp "$2" "$IOP_WORK/share/modules/"
    echo "insmod /mnt/share/modules/${2##*/} 2>/dev/null" >>"$IOP_WORK/share/modules/load.sh"
  done < <(modprobe -d "$kroot" -S "$kver" --show-depends "$@")
  [ -s "$IOP_WORK/share/modules/load.sh" ] || iop_fail "modules $* not found in $kroot ($kver)"
}

iop_guest() {
  local name=$1 ip=$2 mtu=$3 script=$4
  mkdir -p "$IOP_WORK/share"
  local v6=()
  [ "${IOP_GUEST_IPV6:-0}" = 1 ] && v6=(--ipv6)  # keep IPv6 on the guest's eth0
  RIG_MTU=$mtu "$IOP_RIG/peer.sh" --quiet "${v6[@]}" --timeout "${IOP_GUEST_TIMEOUT:-240}" --mtu "$mtu" --log "$IOP_WORK/$name.console" \
    --share "$IOP_WORK/share" --script "$script" "$name" "$ip" >"$IOP_WORK/$name.peer.log" 2>&1 &
  iop_pids+=($!)
  IOP_LAST_PID=$!
}

# iop_guest_cases NAME IP MTU CASE...: boots the guest NAME at IP with $IOP_WORK/guest.sh, whose
# cases begin and end (iop_case_lines) in the order given; each case's capture (the guest's
# traffic) runs from its BEGIN to its END. Waits for the guest: its exit status in IOP_GUEST_RC,
# the seconds from boot to power-off in IOP_GUEST_SECS, its console in $IOP_WORK/NAME.console.
# IOP_CAPTURE_PACKETS[CASE]=N: that case's capture holds its first N frames.
iop_guest_cases() {
  local name=$1 ip=$2 mtu=$3 c t0 gpid
  shift 3
  t0=$(date +%s)
  iop_guest "$name" "$ip" "$mtu" "$IOP_WORK/guest.sh"
  gpid=$IOP_LAST_PID
  for c in "$@"; do
    iop_wait "$IOP_WORK/$name.console" "BEGIN $c" 150 || { iop_fail "$c: the guest never began it"; break; }
    iop_capture_start "$c" "host $ip" "${IOP_CAPTURE_PACKETS[$c]:-}"
    touch "$IOP_WORK/share/go-$c"
    iop_wait "$IOP_WORK/$name.console" "END $c rc=" 120 || iop_fail "$c: the guest did not end it"
    iop_capture_stop "$c"
  done
  wait "$gpid"
  IOP_GUEST_RC=$?
  IOP_GUEST_SECS=$(($(date +%s) - t0))
}

# iop_console_has FILE REGEX: the guest console FILE (CRs dropped) has a line matching the
# extended REGEX. grep reads through a process substitution: under pipefail `tr | grep -q` fails
# whenever grep's early exit kills tr with SIGPIPE (a console is larger than one write).
iop_console_has() { grep -qE -- "$2" <(tr -d '\r' <"$1"); }

iop_wait() {
  local file=$1 regex=$2 secs=$3
  for _ in $(seq $((secs * 10))); do
    grep -qE "$regex" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# Guest-side helpers, prepended to every guest script.
iop_case_lines() {
  cat <<'EOF'
hw() { for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "HW $1 ${f##*/}=$(cat $f)"; done; }
# A case starts when the host says so (its capture runs): /mnt/share is the host's 9p share.
begin() { echo "BEGIN $1"; n=0; while [ ! -e /mnt/share/go-$1 ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done; }
end() { echo "END $1 rc=$2"; sleep 0.5; }
# await MARKER: until the host created MARKER in the share (a rocedp server listens), 30 s at most.
await() { n=0; while [ ! -e /mnt/share/$1 ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done; }
EOF
}

iop_capture_start() {
  local case=$1 filter=$2 count=${3:-} f="$IOP_ARTIFACTS/interop-$IOP_PREFIX$1.pcap"
  rm -f "$f"
  # A 16 MiB buffer (2 MiB by default): with QEMU and rocedp on two busy CPUs the kernel dropped
  # frames before tcpdump read them.
  ip netns exec rig tcpdump --immediate-mode -U -n -B 16384 -i br-rig -s 0 ${count:+-c "$count"} -w "$f" "$filter" >"$IOP_WORK/tcpdump-$case.log" 2>&1 &
  eval "iop_cap_pid_${case//-/_}=$!"
  iop_captures+=("$case")
  iop_wait "$IOP_WORK/tcpdump-$case.log" "listening on" 10 || iop_fail "$case: tcpdump did not start"
}

iop_capture_stop() {
  local case=$1 var="iop_cap_pid_${1//-/_}"
  local pid=${!var:-}
  [ -n "$pid" ] || return 0
  sleep 0.2  # frames still on their way through the bridge
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  eval "$var="
  iop_captures=("${iop_captures[@]/$case}")
  iop_checks+=("$case")
}

# roce-check on every capture taken so far (run it after the guest, not between cases). The
# captures go into one group per CPU (the largest first, each to the smallest group), each group
# merged and checked by one roce-check run (tshark's start-up dominates per file; roce-check is
# single-threaded). Where a group fails, each of its captures is checked on its own to name the
# case. Report: interop-${IOP_PREFIX}roce-check.txt.
iop_check_captures() {
  local report="$IOP_ARTIFACTS/interop-${IOP_PREFIX}roce-check.txt" case f g n size
  local groups sizes=() files=() pids=() lists=() part=()
  for case in "${iop_checks[@]}"; do files+=("$IOP_ARTIFACTS/interop-$IOP_PREFIX$case.pcap"); done
  iop_checks=()
  [ ${#files[@]} -gt 0 ] || return 0
  groups=$(nproc)
  [ "$groups" -gt ${#files[@]} ] && groups=${#files[@]}
  for ((g = 0; g < groups; g++)); do sizes[g]=0 lists[g]=""; done
  while read -r size f; do
    n=0
    for ((g = 1; g < groups; g++)); do [ "${sizes[g]}" -lt "${sizes[n]}" ] && n=$g; done
    sizes[n]=$((sizes[n] + size)) lists[n]+="$f"$'\n'
  done < <(for f in "${files[@]}"; do echo "$(stat -c %s "$f" 2>/dev/null || echo 0) $f"; done | sort -rn)
  : >"$report"
  for ((g = 0; g < groups; g++)); do
    (
      mapfile -t part <<<"${lists[g]%$'\n'}"
      mergecap -F pcap -w "$IOP_WORK/all-$g.pcap" "${part[@]}" &&
        /usr/bin/python3 "$IOP_CHECK" "$IOP_WORK/all-$g.pcap" >"$IOP_WORK/roce-check-$g.txt" 2>&1
    ) &
    pids[g]=$!
  done
  for ((g = 0; g < groups; g++)); do
    if wait "${pids[g]}"; then
      cat "$IOP_WORK/roce-check-$g.txt" >>"$report"
      continue
    fi
    mapfile -t part <<<"${lists[g]%$'\n'}"
    for f in "${part[@]}"; do
      /usr/bin/python3 "$IOP_CHECK" "$f" >>"$report" 2>&1 || iop_fail "roce-check finds problems in $f (see $report)"
    done
  done
}

# Drops PCT % of the RoCEv2 (UDP 4791) frames the rig's bridge forwards, both directions
# (nftables, bridge family, forward hook, numgen random); `iop_bridge_loss off` removes it.
iop_bridge_loss() {
  if [ "$1" = off ]; then iop_bridge_impair off; else iop_bridge_impair "$1" 0 0; fi
}
# The bridge impairs the RoCEv2 frames it forwards (nftables, numgen random): DROP % dropped, then
# CORRUPT % with one byte changed (half in the BTH's PSN, which every packet has, half 40 bytes
# into the BTH, in the payload of data packets), and with PORT_A and PORT_B (bridge ports) DUP %
# of the frames that enter either port also sent out of the other one a second time (a netdev
# ingress `dup`, which bypasses the bridge and its capture). `off` removes it all. Named counters:
# dropped, corrupted, duplicated (iop_bridge_count).
iop_bridge_impair() {
  ip netns exec rig nft delete table bridge rocedp_loss 2>/dev/null
  ip netns exec rig nft delete table netdev rocedp_dup 2>/dev/null
  [ "$1" = off ] && return 0
  iop_bridge_loss_on=1
  local per_mille_drop per_mille_half_corrupt per_mille_dup
  per_mille_drop=$(awk "BEGIN{print int($1 * 10)}")
  per_mille_half_corrupt=$(awk "BEGIN{print int($2 * 5)}")
  # nft cannot XOR a field with a constant: the byte is set to 0xa5, or to 0x5a where it was 0xa5.
  ip netns exec rig nft -f - <<EOF || return 1
table bridge rocedp_loss {
  counter dropped {}
  counter corrupted {}
  chain forward {
    type filter hook forward priority 0; policy accept;
    udp dport 4791 numgen random mod 1000 < $per_mille_drop counter name dropped drop
    udp dport 4791 numgen random mod 1000 < $per_mille_half_corrupt meta mark set 0x52440001
    udp dport 4791 numgen random mod 1000 < $per_mille_half_corrupt meta mark set 0x52440002
    meta mark 0x52440001 @ih,88,8 0xa5 @ih,88,8 set 0x5a meta mark set 0 counter name corrupted
    meta mark 0x52440001 @ih,88,8 set 0xa5 meta mark set 0 counter name corrupted
    meta mark 0x52440002 @ih,320,8 0xa5 @ih,320,8 set 0x5a meta mark set 0 counter name corrupted
    meta mark 0x52440002 @ih,320,8 set 0xa5 meta mark set 0 counter name corrupted
    meta mark 0x52440002 meta mark set 0
  }
}
EOF
  [ "$3" = 0 ] && return 0
  per_mille_dup=$(awk "BEGIN{print int($3 * 10)}")
  ip netns exec rig nft -f - <<EOF
table netdev rocedp_dup {
  counter duplicated {}
  chain from_a {
    type filter hook ingress device "$4" priority 0; policy accept;
    udp dport 4791 numgen random mod 1000 < $per_mille_dup counter name duplicated dup to "$5"
  }
  chain from_b {
    type filter hook ingress device "$5" priority 0; policy accept;
    udp dport 4791 numgen random mod 1000 < $per_mille_dup counter name duplicated dup to "$4"
  }
}
EOF
}
# iop_bridge_drop_first SRC WHAT [N]: drops the first (N: the first N) CM message with attribute
# WHAT (0x0010 REQ, 0x0011 MRA, 0x0012 REJ, 0x0013 REP, 0x0014 RTU, 0x0015 DREQ, 0x0016 DREP), or
# with WHAT `nak-access` the first NAK remote access error (BTH opcode 0x11, AETH syndrome 0x62),
# that IPv4 SRC sends through the rig's bridge, and only those (nftables, bridge family, forward hook; in the UDP payload: MAD management class 7 at byte
# 21 and the attribute at byte 36, or the opcode at byte 0 and the syndrome at byte 12;
# `numgen inc` counts only the frames that got that far in the rule).
# SRC and WHAT may be comma lists of one length (SRC1,SRC2 WHAT1,WHAT2): two messages of one
# exchange lost, one rule each, each dropping the first N of its own kind.
# `off` removes it; `iop_bridge_drop_first count` prints how many it dropped.
iop_bridge_drop_first() {
  case $1 in
    count)
      iop_nft_count bridge rocedp_cm_drop dropped
      return 0
      ;;
    off)
      ip netns exec rig nft delete table bridge rocedp_cm_drop 2>/dev/null
      return 0
      ;;
  esac
  local n=${3:-1} rules="" i src what match
  local -a srcs whats
  IFS=, read -ra srcs <<<"$1"
  IFS=, read -ra whats <<<"$2"
  [ ${#srcs[@]} -eq ${#whats[@]} ] || return 1
  for i in "${!srcs[@]}"; do
    src=${srcs[$i]} what=${whats[$i]}
    match="@ih,168,8 0x07 @ih,288,16 $what"
    [ "$what" = nak-access ] && match="@ih,0,8 0x11 @ih,96,8 0x62"
    # numgen keeps a count per rule: each rule drops the first N of its own kind.
    rules+="    ip saddr $src udp dport 4791 $match numgen inc mod 1000000 < $n counter name dropped drop"$'\n'
  done
  ip netns exec rig nft delete table bridge rocedp_cm_drop 2>/dev/null
  iop_bridge_drop_on=1
  ip netns exec rig nft -f - <<EOF
table bridge rocedp_cm_drop {
  counter dropped {}
  chain forward {
    type filter hook forward priority 0; policy accept;
$rules  }
}
EOF
}
# A congested switch: the rig's bridge marks every RoCEv2 frame from IPv4 SRC to DST with ECN = CE
# (nftables, bridge family, forward hook; nft updates the IPv4 checksum). `off` removes it;
# `iop_bridge_mark_ce count` prints how many it marked.
iop_bridge_mark_ce() {
  case $1 in
    count)
      iop_nft_count bridge rocedp_ce marked
      return 0
      ;;
    off)
      ip netns exec rig nft delete table bridge rocedp_ce 2>/dev/null
      return 0
      ;;
  esac
  ip netns exec rig nft delete table bridge rocedp_ce 2>/dev/null
  iop_bridge_ce_on=1
  ip netns exec rig nft -f - <<EOF
table bridge rocedp_ce {
  counter marked {}
  chain forward {
    type filter hook forward priority 0; policy accept;
    ip saddr $1 ip daddr $2 udp dport 4791 ip ecn set ce counter name marked
  }
}
EOF
}
# Packets counted by the impairment's counter NAME (dropped, corrupted, duplicated); 0 if none.
iop_bridge_count() {
  if [ "$1" = duplicated ]; then iop_nft_count netdev rocedp_dup "$1"; else iop_nft_count bridge rocedp_loss "$1"; fi
}
# Packets counted by the rig's nftables counter NAME in table FAMILY TABLE; 0 if there is none.
iop_nft_count() {
  local n
  n=$(ip netns exec rig nft list counter "$1" "$2" "$3" 2>/dev/null | sed -n 's/.*packets \([0-9]*\).*/\1/p' | head -1)
  echo "${n:-0}"
}
iop_bridge_loss_dropped() {
  iop_bridge_count dropped
}

# How many connections and QPs rocedpd (EAL file prefix PREFIX) holds, "C Q " (rocedpctl). Waits up
# to 10 s for "0 0 ", should a last DREQ still be on its way or a DREQ be sent again.
iop_daemon_holds() {
  local held=""
  for _ in $(seq 20); do
    held=$(for v in connections qps; do
      "$IOP_BIN/rocedpctl" "$v" --json --prefix "$1" 2>&1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["count"], end=" ")' 2>&1
    done)
    [ "$held" = "0 0 " ] && break
    sleep 0.5
  done
  echo "$held"
}

# Sources (IPv4) of the CM messages with attribute ATTR (0x0015 DREQ, 0x0016 DREP, ...) in a case's
# capture, one per line.
# True if the kernel dropped frames of CASE's capture before tcpdump read them (its log says).
iop_capture_dropped() {
  local n
  n=$(sed -n 's/^\([0-9]*\) packets\{0,1\} dropped by kernel.*/\1/p' "$IOP_WORK/tcpdump-$1.log" 2>/dev/null)
  [ "${n:-0}" -gt 0 ]
}

iop_cm_sources() {
  tshark -r "$IOP_ARTIFACTS/interop-$IOP_PREFIX$1.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.mad.attributeid == $2" -T fields -e ip.src 2>/dev/null
}

# Value of a Linux hw_counter printed by `hw TAG` in a guest console.
# The address of rocedp-perf --perftest's own region, from its banner in LOG ("local address:
# ... VAddr 0x..."): where the peer's atomics land.
iop_local_vaddr() {
  awk '/local address:/ {for (i = 1; i < NF; i++) if ($i == "VAddr") print $(i + 1); exit}' "$1"
}

iop_hw() {
  sed -n "s/^HW $2 $3=\([0-9]*\).*/\1/p" "$1" | tail -1
}

# iop_clean_link CONSOLE: the guest's rxe counters of `hw end` must show no sequence error and
# no exhausted retry (a clean link).
iop_clean_link() {
  local k v
  for k in rcvd_seq_err retry_exceeded_err retry_rnr_exceeded_err; do
    v=$(iop_hw "$1" end $k)
    [ "${v:-x}" = 0 ] || iop_fail "Linux $k=${v:-missing} at the end"
  done
}

# Follows a guest's console until it prints RIG-EXIT (false after SECS): each case is captured
# between its BEGIN and END lines with tcpdump FILTER; at BEGIN, a function named on_ready_CASE
# (dashes as underscores) runs if the test defines one, before the guest may start the case, then
# on_begin_CASE, once the guest may (the host's side of that case); at END,
# IOP_RC_CASE holds the guest's rc.
iop_follow() {
  local console=$1 filter=$2 secs=$3 seen=0 lines kind case rest fn
  local snap done_=0
  for _ in $(seq $((secs * 20))); do
    # Whole lines only: the guest may be mid-line ("END client-roced"), and a line counted as
    # seen is never read again.
    snap=$(tr -d '\r' 2>/dev/null <"$console"; echo .)
    snap=${snap%.}
    case $snap in
      *$'\n') ;;
      *$'\n'*) snap=${snap%$'\n'*}$'\n' ;;
      *) snap= ;;
    esac
    grep -q "RIG-EXIT" <<<"$snap" && done_=1
    lines=$(grep -E '^(BEGIN|END) ' <<<"$snap" | tail -n +$((seen + 1)))
    while read -r kind case rest; do
      [ -n "$kind" ] || continue
      seen=$((seen + 1))
      echo "$(date +%T.%N) $kind $case $rest" >>"$IOP_WORK/follow.log"
      fn="on_begin_${case//-/_}"
      if [ "$kind" = BEGIN ]; then
        iop_capture_start "$case" "$filter"
        if declare -F "on_ready_${case//-/_}" >/dev/null; then "on_ready_${case//-/_}"; fi
        touch "$IOP_WORK/share/go-$case"
        if declare -F "$fn" >/dev/null; then "$fn"; fi
      else
        iop_capture_stop "$case"
        eval "IOP_RC_${case//-/_}=${rest#rc=}"
      fi
    done <<<"$lines"
    [ $done_ = 1 ] && return 0
    sleep 0.05
  done
  return 1
}

#!/usr/bin/env bash
# RoCEv2 over IPv6 against Linux: the rig's Soft-RoCE guest with IPv6 on (fd52::33/64, its own
# RoCEv2 GID for it) and rocedp-perf on a port with an IPv6 address (fd52::41). Cases, in one
# guest boot:
#   ping6            first, the guest's kernel pings rocedp's IPv6 address while the first case's
#                    rocedp-perf runs: rocedp answers its neighbour solicitation and the echo
#                    requests (3 of 3 replies)
#   pingpong         ibv_rc_pingpong -g <the fd52 GID> against rocedp-perf --rc-pingpong --verify,
#                    both roles: 20 SEND ping-pongs of 4 KiB, every message checked
#   write_bw, read_bw, send_bw  ib_{write,read,send}_bw -x <the fd52 GID> against rocedp-perf
#                    --perftest, both roles, 64 KiB messages (64 packets at MTU 1024)
#   write_bw_ll      the same WRITEs with Linux's link-local GID (fe80::, its GID 0: what perftest
#                    takes without -x): Linux sends from its link-local address, rocedp from its
#                    port's (fd52::42) to Linux's
#   write_bw_llboth  the same with rocedp-perf's port given a link-local address too (--ip6
#                    fe80::42): link-local at both ends, as between hosts with no IPv6 prefix
#   echo             librdmacm's rdma_client -s <rocedpd's IPv6 address> against rocedpd's echo
#                    service (its listener on 0.0.0.0 takes the IPv6 request): connect, SEND, the
#                    echo back, disconnect, the CM exchange over IPv6
#   mem              ops_check_peer -M (tests/interop/ops_check_peer.c, Linux verbs) against
#                    rocedpd's memory service over IPv6: the region from the REP's private data,
#                    WRITE and READ at its start and end, a WRITE past the end refused
#   perftest         ib_write_bw -x <the fd52 GID> without -R against rocedpd's perftest service:
#                    perftest's exchange over IPv4 TCP to the listener's tcp_exchange (the bridge's
#                    address), whose key gives the daemon's IPv6 address as its GID; the data QP
#                    connects out of band over IPv6 (the daemon solicits the guest's address)
#   rping            librdmacm's rping over IPv6 addresses, through the IB CM (REQ, REP, RTU,
#                    DREQ, DREP over IPv6; the rdma_cm header of IP version 6): Linux rping -c
#                    against rocedp-perf --rping -s, and rocedp-perf --rping -c against Linux
#                    rping -s; 10 validated pings of 3000 bytes (a SEND, a READ, a SEND, a WRITE
#                    each)
# The exchanges of perftest and ibv_rc_pingpong run over IPv4 TCP as in perftest.sh; the RDMA
# traffic is IPv6 only. Each case's capture (ip6 host fd52::33) must hold IPv6 RoCEv2 frames from
# both sides and no IPv4 ones, pass tests/common/roce-check-ipv6, and both sides must exit 0; the
# guest's rxe counters must show no sequence error and no exhausted retry.
#
#   ipv6.sh BUILD_DIR [FILTER]   (FILTER: a grep -E on the case names)
set -uo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
FILTER=${2:-.}
export ROCEDP_BIN_DIR=${ROCEDP_BIN_DIR:-$BUILD/bin}
export ROCEDP_ARTIFACT_DIR=${ROCEDP_ARTIFACT_DIR:-$BUILD/test-artifacts}
IOP_PREFIX=ipv6-
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
iop_init ipv6
IOP_CHECK=$IOP_CHECK_IPV6
guest=198.18.0.34 rocedp=198.18.0.42
guest6=fd52::34 rocedp6=fd52::42
daemon=198.18.0.43 daemon6=fd52::43  # rocedpd, on a veth of its own
bridge=198.18.0.1  # the exchanges reach rocedp-perf's TCP socket at the bridge's address
iters_bw=10 size=65536 iters_pingpong=20 pings=10

cases=()
for c in pingpong-rocedp_server pingpong-rocedp_client write_bw-rocedp_server \
  write_bw-rocedp_client write_bw_ll-rocedp_server write_bw_ll-rocedp_client \
  write_bw_llboth-rocedp_server write_bw_llboth-rocedp_client read_bw-rocedp_server \
  read_bw-rocedp_client send_bw-rocedp_server send_bw-rocedp_client rping-rocedp_server rping-rocedp_client echo-rocedpd_server \
  mem-rocedpd_server perftest-rocedpd_server; do
  grep -Eq "$FILTER" <<<"$c" && cases+=("$c")
done
[ ${#cases[@]} -gt 0 ] || { echo "no case matches $FILTER" >&2; exit 2; }

# The guest's side, in case order: its address, the index of the RoCEv2 GID that carries it, then
# each case (a client retries until rocedp-perf listens).
{
  echo "ip -6 addr add $guest6/64 dev eth0 nodad"
  # v2_gid PREFIX: the index of the first RoCE v2 GID that starts with PREFIX (empty: none).
  echo 'v2_gid() { local d=/sys/class/infiniband/rxe0/ports/1 i=0 g t'
  echo '  while [ -e $d/gids/$i ]; do read -r g < $d/gids/$i'
  echo '    case $g in $1*) read -r t < $d/gid_attrs/types/$i; [ "$t" = "RoCE v2" ] && { echo $i; return; } ;; esac'
  echo '    i=$((i+1)); done; }'
  echo 'G6=; n=0; while [ -z "$G6" ] && [ $n -lt 50 ]; do'
  echo '  G6=$(v2_gid fd52:); [ -z "$G6" ] && sleep 0.2; n=$((n+1)); done; echo "GID6 index ${G6:-none}"'
  echo 'GLL=$(v2_gid fe80:)'
  echo 'echo "GIDLL index ${GLL:-none} $(cat /sys/class/infiniband/rxe0/ports/1/gids/${GLL:-0})"'
  echo 'run() { name=$1; shift; i=0; while :; do "$@" > /tmp/out 2>&1; rc=$?; cat /tmp/out'
  echo '  grep -q "Couldn.t connect\|Unable to init the socket\|100% packet loss\|REJECTED\|ADDR_ERROR\|UNREACHABLE" /tmp/out || break'
  echo '  i=$((i+1)); [ $i -ge 120 ] && break; sleep 0.5; done; echo "V6CASE $name rc=$rc"; }'
  echo "run ping6 ping -6 -c 3 -W 2 $rocedp6"
  for c in "${cases[@]}"; do
    test=${c%-*} role=${c#*-}
    host=""; [ "$role" = rocedp_server ] && host=$bridge
    case $test in
      pingpong) echo "run $c ibv_rc_pingpong -d rxe0 -g \$G6 -n $iters_pingpong -s 4096 $host" ;;
      echo)  # once the host's capture runs (the share's go-CASE)
        echo "n=0; while [ ! -e /mnt/share/go-$c ] && [ \$n -lt 600 ]; do sleep 0.1; n=\$((n+1)); done"
        echo "run $c rdma_client -s $daemon6 -p 7471"
        ;;
      mem)
        echo "n=0; while [ ! -e /mnt/share/go-$c ] && [ \$n -lt 600 ]; do sleep 0.1; n=\$((n+1)); done"
        echo "run $c /mnt/share/ops_check_peer -M -a $daemon6 -p 7474"
        ;;
      perftest)
        echo "n=0; while [ ! -e /mnt/share/go-$c ] && [ \$n -lt 600 ]; do sleep 0.1; n=\$((n+1)); done"
        echo "run $c ib_write_bw -d rxe0 -x \$G6 -n $iters_bw -s $size -F -p 7475 $bridge"
        ;;
      rping)
        if [ "$role" = rocedp_server ]; then
          echo "run $c rping -c -a $rocedp6 -C $pings -S 3000 -V"
        else
          echo "run $c rping -s -a $guest6 -C $pings -S 3000"
        fi
        ;;
      write_bw_ll*) echo "run $c ib_write_bw -d rxe0 -x \$GLL -n $iters_bw -s $size -F $host" ;;
      *) echo "run $c ib_$test -d rxe0 -x \$G6 -n $iters_bw -s $size -F $host" ;;
    esac
  done
  echo 'ip -6 neigh show dev eth0'
  echo 'sleep 1; for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "HWC ${f##*/} $(cat $f)"; done'
} >"$IOP_WORK/guest.sh"

iop_net 1500 dpdkv6 dpdkv6d
if printf '%s\n' "${cases[@]}" | grep -q '^echo-\|^mem-\|^perftest-'; then
  iop_share_check_peers
  IOP_ROCEDPD_IPV6=$daemon6 iop_rocedpd 1500 "$(iop_devargs 1 dpdkv6d 1500)" "$daemon" \
    "{port: rig0, nd_port: 7471, service: echo}" \
    "{port: rig0, nd_port: 7474, service: memory, memory_bytes: 65536}" \
    "{port: rig0, nd_port: 7475, service: perftest, memory_bytes: 1048576, tcp_exchange: $bridge}" ||
    { iop_fail "rocedpd did not start"; exit 1; }
fi
t0=$(date +%s)
IOP_GUEST_IPV6=1 IOP_GUEST_TIMEOUT=300 iop_guest v6g "$guest" 1500 "$IOP_WORK/guest.sh"
gpid=$IOP_LAST_PID
glog=$IOP_WORK/v6g.console

ep=(--port-devargs "$(iop_devargs 0 dpdkv6 1500)" --ip "$rocedp/24" --ip6 "$rocedp6" --file-prefix "rdp-iop-v6-$$" --memory-mb 256 --timeout 90)
# Frames of a case's capture: IPv6 RoCEv2 ones from SRC (an address or a prefix), with a DST
# (default: any), and IPv4 RoCEv2 ones at all.
count6() {
  tshark -r "$IOP_ARTIFACTS/interop-ipv6-$1.pcap" -Y "ipv6.src == $2 && ipv6.dst == ${3:-::/0} && udp.dstport == 4791" 2>/dev/null | wc -l
}
rocedp_ll=fe80::42  # write_bw_llboth: rocedp-perf's port address
count4() { tshark -r "$IOP_ARTIFACTS/interop-ipv6-$1.pcap" -Y "ip && udp.dstport == 4791" 2>/dev/null | wc -l; }
# The CM messages of a case, "SOURCE:ATTRIBUTE" per MAD (REQ 0x0010, REP 0x0013, RTU 0x0014,
# DREQ 0x0015, DREP 0x0016), and whether the whole exchange is there (cm_ok CASE OURS: OURS is our
# address in it): the active side's REQ, the passive side's REP, an RTU, a DREQ and a DREP.
cm_seen() {
  tshark -r "$IOP_ARTIFACTS/interop-ipv6-$1.pcap" -d udp.port==4791,infiniband -Y "infiniband.mad.attributeid" \
    -T fields -e ipv6.src -e infiniband.mad.attributeid 2>/dev/null | sort -u | tr '\t\n' ': '
}
cm_ok() {
  local seen active passive
  seen=$(cm_seen "$1")
  cmtxt=$seen
  if [[ $1 == *rocedp_client ]]; then active=$2 passive=$guest6; else active=$guest6 passive=$2; fi
  grep -q "$active:0x0010" <<<"$seen" && grep -q "$passive:0x0013" <<<"$seen" &&
    grep -q "$active:0x0014" <<<"$seen" && grep -q ":0x0015" <<<"$seen" && grep -q ":0x0016" <<<"$seen"
}
for c in "${cases[@]}"; do
  kill -0 "$gpid" 2>/dev/null || { iop_fail "the guest is gone: $(tail -3 "$IOP_WORK/v6g.peer.log")"; break; }
  test=${c%-*} role=${c#*-}
  log=$IOP_ARTIFACTS/interop-ipv6-$c.log
  iop_capture_start "$c" "ip6 host $guest6 or host $guest or ip6 net fe80::/10"
  case $test in
    echo | mem | perftest)  # the guest's client against rocedpd, which runs already
      touch "$IOP_WORK/share/go-$c"
      iop_wait "$glog" "V6CASE $c rc=" 60 || iop_fail "$c: the guest's rdma_client did not end"
      rc=0
      ;;
    rping)
      args=(-s)
      [ "$role" = rocedp_client ] && args=(-c -V -a "$guest6" -C "$pings")
      ip netns exec rig "$IOP_BIN/rocedp-perf" --rping "${args[@]}" -S 3000 "${ep[@]}" >"$log" 2>&1
      rc=$?
      ;;
    pingpong)
      args=(-n "$iters_pingpong" -s 4096 --verify)
      [ "$role" = rocedp_client ] && args=("$guest" "${args[@]}")
      ip netns exec rig "$IOP_BIN/rocedp-perf" --rc-pingpong "${ep[@]}" "${args[@]}" >"$log" 2>&1
      rc=$?
      ;;
    *)
      args=("${test%%_*}" bw -n "$iters_bw" -s "$size" -F)
      [ "$role" = rocedp_client ] && args=("$guest" "${args[@]}")
      epc=("${ep[@]}")
      [ "$test" = write_bw_llboth ] && epc=("${ep[@]/#$rocedp6/$rocedp_ll}")
      ip netns exec rig "$IOP_BIN/rocedp-perf" --perftest "${epc[@]}" "${args[@]}" >"$log" 2>&1
      rc=$?
      ;;
  esac
  iop_capture_stop "$c"
  ours=$rocedp6
  [[ $test == @(echo|mem|perftest) ]] && ours=$daemon6
  theirs=$guest6
  if [[ $test == write_bw_ll* ]]; then
    # Linux's link-local GID, as its console printed it (before its first case).
    theirs=$(tr -d '\r' <"$glog" | awk '$1 == "GIDLL" {print $4; exit}')
    [ "$test" = write_bw_llboth ] && ours=$rocedp_ll
  fi
  from_rocedp=$(count6 "$c" "$ours" "$theirs") from_guest=$(count6 "$c" "$theirs" "$ours") v4=$(count4 "$c")
  if [ $rc != 0 ]; then
    iop_fail "$c: rocedp-perf exit $rc ($(tail -1 "$log"))"
  elif [ "$test" = pingpong ] && ! grep -q "verify: $iters_pingpong messages of 4096 bytes checked byte for byte" "$log"; then
    iop_fail "$c: not every message verified"
  elif [ "$from_rocedp" -eq 0 ] || [ "$from_guest" -eq 0 ] || [ "$v4" -ne 0 ]; then
    iop_fail "$c: RoCEv2 frames: $from_rocedp IPv6 from rocedp to $theirs, $from_guest IPv6 from $theirs to rocedp, $v4 IPv4"
  elif [ "$(count6 "$c" "$ours")" != "$from_rocedp" ] || [ "$(count6 "$c" "$theirs")" != "$from_guest" ]; then
    iop_fail "$c: RoCEv2 frames between other addresses than $ours and $theirs"
  elif [[ $test == @(rping|echo|mem) ]] && ! cm_ok "$c" "$ours"; then
    iop_fail "$c: the CM exchange over IPv6 is not all there: $(cm_seen "$c")"
  else
    echo "ok   $c: $from_rocedp IPv6 RoCEv2 frames from rocedp ($ours) to $theirs, $from_guest from $theirs, none IPv4${cmtxt:+; CM $cmtxt}"
  fi
done

wait "$gpid"
grc=$?
t1=$(date +%s)
iop_check_captures
cp "$glog" "$IOP_ARTIFACTS/interop-ipv6-guest.log" 2>/dev/null
iop_console_has "$glog" "GID6 index [0-9]" || iop_fail "the guest has no RoCEv2 GID for $guest6"
if [[ " ${cases[*]} " == *_ll-* ]]; then
  iop_console_has "$glog" "GIDLL index [0-9]" || iop_fail "the guest has no link-local RoCEv2 GID"
fi
if iop_console_has "$glog" "3 packets transmitted, 3 packets received"; then
  echo "ok   ping6: 3 of 3 echo replies from $rocedp6"
else
  iop_fail "ping6: the guest's ping -6 did not get 3 replies"
fi
for c in "${cases[@]}"; do
  iop_console_has "$glog" "V6CASE $c rc=0" ||
    iop_fail "$c: the Linux side did not succeed ($(tr -d '\r' <"$glog" | grep "V6CASE $c"))"
done
# rocedp answered the guest's neighbour solicitation: its solicited NA is in the captures. (The
# guest's table, printed at the end, shows the entry only while the guest has not probed it again:
# its reachable time may run out after the last rocedp-perf exited, and nothing answers then.)
# (iop_check_captures merged the captures into one file per CPU, all-N.pcap.)
na=$(for f in "$IOP_WORK"/all-*.pcap; do
  tshark -r "$f" -Y "icmpv6.type == 136 && ipv6.src == $rocedp6 && icmpv6.nd.na.flag.s == 1 && icmpv6.nd.na.target_address == $rocedp6" \
    -T fields -e icmpv6.opt.linkaddr 2>/dev/null
done | head -1)
if [ -n "$na" ]; then
  echo "ok   rocedp answered the guest's neighbour solicitation for $rocedp6 ($na)"
else
  iop_fail "no solicited neighbour advertisement from $rocedp6 in the captures"
fi
for k in rcvd_seq_err retry_exceeded_err retry_rnr_exceeded_err; do
  v=$(tr -d '\r' <"$glog" | awk -v k="$k" '$1 == "HWC" && $2 == k {print $3}')
  [ "$v" = 0 ] || iop_fail "guest hw_counters: $k = ${v:-missing}"
done
echo "guest exit $grc; ${#cases[@]} cases in $((t1 - t0)) s"
[ $IOP_FAILED = 0 ] && echo "PASS: IPv6 interop"

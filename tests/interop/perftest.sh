#!/usr/bin/env bash
# rocedp-perf --perftest against Linux perftest 4.5 in the rig's Soft-RoCE guest.
# One guest boot runs every case's Linux side one after another; rocedp-perf runs its side of each
# case in the same order (as the server: the guest's client retries until rocedp listens; as the
# client: rocedp-perf retries until the guest's server listens). Cases: write|read|send x bw|lat x
# {TCP exchange, -R} x {rocedp server, rocedp client}, 64 KiB messages (64 packets at MTU 1024);
# and write|read|send bw with the TCP exchange x {rocedp server, rocedp client} at 64 B (the
# one-packet ONLY opcodes, which rocedp's requester and responder build and take on short paths);
# and atomics (ib_atomic_{bw,lat}): FETCH_AND_ADD ("atomic") bw and lat and CMP_AND_SWAP ("cswap")
# bw with the TCP exchange, FETCH_AND_ADD bw with -R, x {rocedp server, rocedp client}. Every atomic
# case's capture goes through tests/interop/atomic_check.py (each request executed once, in order,
# each answer the word's value before it); as the server rocedp also dumps its region, which must
# end as the capture's replay. Several QPs: write bw with 4 QPs ("q4": 4 data connections with -R),
# and send bw with 4 QPs receiving through one shared receive queue (--use-srq on both ends, "srq4").
# perftest's -m: write bw with the TCP exchange where rocedp-perf alone is given -m 512 ("mtu512"):
# it offers 512 in the exchange, and every RDMA WRITE MIDDLE of the writer (Linux, when rocedp
# serves; rocedp, when it is the client) carries 512 bytes, where the port's MTU would give 1024.
# And libibverbs' ibv_rc_pingpong ("pingpong": its own TCP exchange, 20 SEND ping-pongs of 4 KiB)
# against rocedp-perf --rc-pingpong --verify, both roles: every message checked, a SEND LAST per
# message each way in the capture.
# Each case's traffic is captured on the bridge (build/test-artifacts/interop-perftest-CASE.pcap)
# and must pass roce-check; each side must exit 0 and print perftest's result row (a bandwidth
# row with an average above 0); the guest's rxe hw_counters must show no sequence error and no
# exhausted retry (a clean link).
#
#   perftest.sh BUILD_DIR [FILTER]   (FILTER: a grep -E on the case names)
set -uo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
FILTER=${2:-.}
export ROCEDP_BIN_DIR=${ROCEDP_BIN_DIR:-$BUILD/bin}
export ROCEDP_ARTIFACT_DIR=${ROCEDP_ARTIFACT_DIR:-$BUILD/test-artifacts}
IOP_PREFIX=perftest-
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
iop_init perftest
guest=198.18.0.33 rocedp=198.18.0.41
bridge=198.18.0.1  # the bridge's kernel address: perftest's TCP exchange reaches rocedp-perf there
iters_bw=10 iters_lat=5 size=65536 small=64
iters_atomic_bw=300 iters_atomic_lat=20  # bw: several rounds of perftest's 64 words, a window deep
iters_pingpong=20

cases=()
for ex in tcp rdmacm; do
  for op in write read send; do
    for kind in bw lat; do
      for role in server client; do
        c="$ex-${op}_$kind-rocedp_$role-$size"
        grep -Eq "$FILTER" <<<"$c" && cases+=("$c")
      done
    done
  done
done
for op in write read send; do
  for role in server client; do
    c="tcp-${op}_bw-rocedp_$role-$small"
    grep -Eq "$FILTER" <<<"$c" && cases+=("$c")
  done
done
for c in tcp-atomic_bw tcp-atomic_lat tcp-cswap_bw rdmacm-atomic_bw tcpq4-write_bw-$size rdmacmq4-write_bw-$size \
  tcpsrq4-send_bw-$size tcpmtu512-write_bw-$size; do
  case $c in *-$size) c=${c%-"$size"} sz=$size ;; *) sz=8 ;; esac
  for role in server client; do
    grep -Eq "$FILTER" <<<"$c-rocedp_$role-$sz" && cases+=("$c-rocedp_$role-$sz")
  done
done
# libibverbs' ibv_rc_pingpong (its own TCP exchange, SEND ping-pong of 4 KiB messages) against
# rocedp-perf --rc-pingpong --verify.
for role in server client; do
  c="tcp-pingpong-rocedp_$role-4096"
  grep -Eq "$FILTER" <<<"$c" && cases+=("$c")
done
[ ${#cases[@]} -gt 0 ] || { echo "no case matches $FILTER" >&2; exit 2; }

# A case's test: the Linux tool (ib_OP_KIND) and its extra options; size 8 is an atomic case.
atomic_type() { [ "$1" = cswap ] && echo CMP_AND_SWAP || echo FETCH_AND_ADD; }
# The exchange (tcp, rdmacm) and the QP options of the case's first word (q4, srq4), and what
# only rocedp-perf is given (mtu512).
exchange_of() { case $1 in rdmacm*) echo rdmacm ;; *) echo tcp ;; esac; }
qp_options() { case $1 in *srq4) echo "-q 4 --use-srq" ;; *q4) echo "-q 4" ;; esac; }
rocedp_options() { case $1 in *mtu512) echo "-m 512" ;; esac; }
# The frame of an RDMA WRITE MIDDLE with PMTU bytes: Ethernet, IPv4, UDP, BTH, payload, ICRC.
middle_frame() { echo $((14 + 20 + 8 + 12 + $1 + 4)); }

# The guest's side, in case order: a client retries until rocedp-perf listens.
{
  iop_case_lines  # await: an rdma_cm client waits for rocedp-perf's listener (below)
  echo 'run() { name=$1; shift; i=0; while :; do "$@" > /tmp/out 2>&1; rc=$?; cat /tmp/out'
  echo '  grep -q "Couldn.t connect\|Unable to perform rdma_client\|Unexpected CM event\|REJECTED\|Unable to init the socket" /tmp/out || break'
  echo '  i=$((i+1)); [ $i -ge 120 ] && break; sleep 0.5; done; echo "PTCASE $name rc=$rc"; }'
  for c in "${cases[@]}"; do
    IFS=- read -r ex test role sz <<<"$c"
    if [ "$test" = pingpong ]; then
      host=""; [ "$role" = rocedp_server ] && host=$bridge
      echo "run $c ibv_rc_pingpong -d rxe0 -g \$GID -n $iters_pingpong -s $sz $host"
      continue
    fi
    op=${test%_*} kind=${test#*_}
    n=$iters_bw; [ "$kind" = lat ] && n=$iters_lat
    opts="-d rxe0 -n $n -s $sz -F $(qp_options "$ex")" tool=ib_${op}_$kind ex=$(exchange_of "$ex")
    if [ "$sz" = 8 ]; then
      n=$iters_atomic_bw; [ "$kind" = lat ] && n=$iters_atomic_lat
      opts="-d rxe0 -n $n -A $(atomic_type "$op") -F" tool=ib_atomic_$kind
    fi
    if [ "$ex" = tcp ]; then opts="$opts -x \$GID"; else opts="$opts -R"; fi
    if [ "$role" = rocedp_server ]; then
      # An rdma_cm client waits for rocedp-perf's listener: a REQ sent before rocedp-perf's port is
      # up is lost, and Linux's CM sends it again only after its response timeout (about 6 s).
      host=$bridge wait=""
      [ "$ex" = rdmacm ] && host=$rocedp wait="await $c-listening; "
      echo "${wait}run $c $tool $opts $host"
    else
      echo "run $c $tool $opts"
    fi
  done
  echo 'sleep 1; for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "HWC ${f##*/} $(cat $f)"; done'
} >"$IOP_WORK/guest.sh"

iop_net 1500 dpdkpt
t0=$(date +%s)
IOP_GUEST_TIMEOUT=400 iop_guest ptg "$guest" 1500 "$IOP_WORK/guest.sh"
gpid=$IOP_LAST_PID
glog=$IOP_WORK/ptg.console

ep=(--port-devargs "$(iop_devargs 0 dpdkpt 1500)" --ip "$rocedp/24" --file-prefix "rdp-iop-pt-$$" --memory-mb 256 --timeout 90)
for c in "${cases[@]}"; do
  kill -0 "$gpid" 2>/dev/null || { iop_fail "the guest is gone: $(tail -3 "$IOP_WORK/ptg.peer.log")"; break; }
  IFS=- read -r ex test role sz <<<"$c"
  if [ "$test" = pingpong ]; then
    log=$IOP_ARTIFACTS/interop-perftest-$c.log
    args=(-n "$iters_pingpong" -s "$sz" --verify --counters)
    [ "$role" = rocedp_client ] && args=("$guest" "${args[@]}")
    iop_capture_start "$c" "host $guest"
    ip netns exec rig "$IOP_BIN/rocedp-perf" --rc-pingpong "${ep[@]}" "${args[@]}" >"$log" 2>&1
    rc=$?
    iop_capture_stop "$c"
    row=$(grep -E "^$iters_pingpong iters in " "$log")
    sends=$(tshark -r "$IOP_ARTIFACTS/interop-perftest-$c.pcap" -d udp.port==4791,infiniband \
      -Y "infiniband.bth.opcode == 2" -T fields -e ip.src -e infiniband.bth.psn 2>/dev/null | sort -u |
      awk '{n[$1]++} END {for (a in n) printf "%s:%s ", a, n[a]}')
    if [ $rc != 0 ]; then
      iop_fail "$c: rocedp-perf exit $rc ($(tail -1 "$log"))"
    elif [ -z "$row" ] || ! grep -q "verify: $iters_pingpong messages of $sz bytes checked byte for byte" "$log"; then
      iop_fail "$c: no result row or not every message verified"
    elif ! grep -q "$guest:$iters_pingpong " <<<"$sends" || ! grep -q "$rocedp:$iters_pingpong " <<<"$sends"; then
      # A SEND LAST (opcode 2) per message each way: as many distinct PSNs as messages.
      iop_fail "$c: the capture's SEND LASTs per side are not $iters_pingpong each: $sends"
    else
      echo "ok   $c: $row; SEND LASTs per side: $sends"
    fi
    continue
  fi
  op=${test%_*} kind=${test#*_}
  n=$iters_bw; [ "$kind" = lat ] && n=$iters_lat
  # shellcheck disable=SC2207
  args=("$op" "$kind" -n "$n" -s "$sz" -F $(qp_options "$ex") $(rocedp_options "$ex"))
  mtu_case=$ex ex=$(exchange_of "$ex")
  dump=$IOP_WORK/region-$c.bin
  if [ "$sz" = 8 ]; then
    n=$iters_atomic_bw; [ "$kind" = lat ] && n=$iters_atomic_lat
    args=(atomic "$kind" -n "$n" -A "$(atomic_type "$op")" -F)
    [ "$role" = rocedp_server ] && args+=(--dump-recv "$dump")
  fi
  [ "$ex" = rdmacm ] && args+=(-R)
  [ "$role" = rocedp_client ] && args=("$guest" "${args[@]}")
  log=$IOP_ARTIFACTS/interop-perftest-$c.log
  iop_capture_start "$c" "host $guest"
  if [ "$ex" = rdmacm ] && [ "$role" = rocedp_server ]; then
    iop_serve_guest "perftest-$c" "$c-listening" --perftest "${ep[@]}" "${args[@]}"
  else
    iop_start "perftest-$c" "$IOP_BIN/rocedp-perf" --perftest "${ep[@]}" "${args[@]}"
  fi
  wait "$IOP_LAST_PID"
  rc=$?
  cp "$IOP_WORK/perftest-$c.log" "$log"
  iop_capture_stop "$c"
  row=$(grep -E "^ $sz +[0-9]" "$log" | head -1)
  if [ $rc != 0 ]; then
    iop_fail "$c: rocedp-perf exit $rc ($(tail -1 "$log"))"
  elif [ -z "$row" ] && ! { [[ $test == @(read|atomic)_lat ]] && [ "$role" = rocedp_server ]; }; then
    iop_fail "$c: no result row"
  elif [ "$kind" = bw ] && ! awk '{exit !($4 > 0)}' <<<"$row"; then
    # perftest times a bw run with the cycle counter it calibrates at start; on the TCG guest
    # that calibration can fail ("Correlation coefficient r^2: ... < 0.9"), and its row then
    # reads 0 however the transfer went (seen once in CI). The transfer is still checked: both
    # exit 0.
    corr=$(grep -c "Correlation coefficient" "$glog")
    if [ "$corr" -gt "${corr_seen:-0}" ]; then
      corr_seen=$corr
      echo "$c: Linux's perftest could not calibrate its clock; its result row reads 0 ($row)"
    else
      iop_fail "$c: no bandwidth in the result row ($row)"
    fi
  else
    echo "ok   $c${row:+: $row}"
  fi
  if [[ $mtu_case == *mtu512 ]] && [ $rc = 0 ]; then
    writer=$rocedp; [ "$role" = rocedp_server ] && writer=$guest
    lens=$(tshark -r "$IOP_ARTIFACTS/interop-perftest-$c.pcap" -d udp.port==4791,infiniband \
      -Y "ip.src == $writer && infiniband.bth.opcode == 7" -T fields -e frame.len 2>/dev/null)
    seen=$(sort <<<"$lens" | uniq -c | awk '{printf "%s%s x %s B", (NR > 1 ? ", " : ""), $1, $2}')
    if [ "$(sort -u <<<"$lens")" != "$(middle_frame 512)" ]; then
      iop_fail "$c: the WRITE MIDDLEs from $writer are not all $(middle_frame 512)-byte frames (512 B of payload): ${seen:-none}"
    else
      echo "     $c: WRITE MIDDLEs from $writer: $seen (512 B of payload each)"
    fi
  fi
  if [ "$sz" = 8 ] && [ $rc = 0 ]; then
    pcap=$IOP_ARTIFACTS/interop-perftest-$c.pcap
    if [ "$role" = rocedp_server ]; then
      base=$(iop_local_vaddr "$log")
      check=(/usr/bin/python3 "$iop_here/atomic_check.py" "$pcap" "$guest" "$dump" "$base")
    else
      check=(/usr/bin/python3 "$iop_here/atomic_check.py" "$pcap" "$rocedp")
    fi
    if out=$("${check[@]}" 2>&1); then
      echo "     $c: $(tail -1 <<<"$out")"
    else
      iop_fail "$c: atomic_check: $(tail -4 <<<"$out" | tr '\n' ' ')"
    fi
  fi
done

# The guest finishes its last case, prints its counters and powers off.
wait "$gpid"
grc=$?
t1=$(date +%s)
iop_check_captures
cp "$glog" "$IOP_ARTIFACTS/interop-perftest-guest.log" 2>/dev/null
for c in "${cases[@]}"; do
  iop_console_has "$glog" "PTCASE $c rc=0" ||
    iop_fail "$c: the Linux side did not succeed ($(tr -d '\r' <"$glog" | grep "PTCASE $c"))"
done
# With -R, rocedp ends the connections: as the active side too (rdma_client-style peers end
# theirs themselves), read off the capture.
for c in "${cases[@]}"; do
  case $c in rdmacm*-rocedp_client-*) ;; *) continue ;; esac
  drep=$(iop_cm_sources "$c" 0x0016)
  if ! grep -qx "$rocedp" <<<"$(iop_cm_sources "$c" 0x0015)"; then
    # Linux sends a DREP only to answer a DREQ, so its DREP shows rocedp's DREQ when the capture
    # lost that frame (the kernel drops frames when QEMU and rocedp keep both CPUs busy).
    if iop_capture_dropped "$c" && grep -qx "$guest" <<<"$drep"; then
      echo "note $c: the capture dropped frames, rocedp's DREQ among them; Linux's DREP answers it"
    else
      iop_fail "$c: rocedp sent no DREQ"
    fi
  fi
  grep -qx "$guest" <<<"$drep" || iop_fail "$c: Linux answered no DREQ"
done
# No sequence error and no exhausted retry on a clean link. Retransmissions themselves are shown,
# not failed: against this TCG-emulated (slow, jittery) peer, rocedp's adaptive timer still
# re-requests some READs early (Linux's duplicate_request), and Linux's own timer has resent a
# control SEND of a busy rocedp-perf (completer_retry_err).
for k in rcvd_seq_err retry_exceeded_err retry_rnr_exceeded_err; do
  v=$(tr -d '\r' <"$glog" | awk -v k="$k" '$1 == "HWC" && $2 == k {print $3}')
  [ "$v" = 0 ] || iop_fail "guest hw_counters: $k = ${v:-missing}"
done
tr -d '\r' <"$glog" | awk '$1 == "HWC" && ($2 == "completer_retry_err" || $2 == "duplicate_request") {print "Linux " $2 " = " $3}'
echo "guest exit $grc; ${#cases[@]} cases in $((t1 - t0)) s"
[ $IOP_FAILED = 0 ] && echo "PASS: perftest interop"

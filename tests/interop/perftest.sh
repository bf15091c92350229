#!/bin/bash
# rocedp-perf --perftest against Linux perftest 4.5 in the rig's Soft-RoCE guest (../shared/rig).
# One guest boot runs every case's Linux side one after another; rocedp-perf runs its side of each
# case in the same order (as the server: the guest's client retries until rocedp listens; as the
# client: rocedp-perf retries until the guest's server listens). Cases: write|read|send x bw|lat x
# {TCP exchange, -R} x {rocedp server, rocedp client}, 64 KiB messages (64 packets at MTU 1024).
# Each case's traffic is captured on the bridge into build/test-artifacts/interop-perftest-*.pcap
# and must pass ../shared/tools/roce-check; each side must exit 0 and print perftest's result row;
# the guest's rxe hw_counters must show no sequence or retry errors.
#
# Usage: tests/interop/perftest.sh BUILD_DIR [FILTER]   (FILTER: a grep -E on the case names)
# Needs root, the rig (up.sh done), tcpdump, tshark, python3-scapy.
set -uo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
FILTER=${2:-.}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RIG=${RIG:-$(cd "$ROOT/.." && pwd)/shared/rig}
CHECK=${ROCE_CHECK:-$(cd "$ROOT/.." && pwd)/shared/tools/roce-check}
export RIG_STATE=${RIG_STATE:-/var/tmp/rocedp-rig}
[ -z "${RIG_CACHE:-}" ] && [ -s "$RIG/cache/initramfs.cpio.gz" ] && export RIG_CACHE=$RIG/cache
BIN=$BUILD/bin/rocedp-perf
ART=$BUILD/test-artifacts
GNAME=${PT_GUEST_NAME:-pt-g} GIP=${PT_GUEST_IP:-198.18.0.33}
RIP=${PT_ROCEDP_IP:-198.18.0.41} VETH=${PT_VETH:-dpdkpt}
BRIP=198.18.0.1   # the bridge's kernel address: perftest's TCP exchange reaches rocedp-perf there
NS=${RIG_NETNS:-rig}
ITERS_BW=20 ITERS_LAT=10 SIZE=65536
mkdir -p "$ART"
WORK=$(mktemp -d /tmp/rocedp-perftest.XXXXXX)
GPID= TPID=
cleanup() {
  [ -n "$TPID" ] && kill "$TPID" 2>/dev/null
  [ -n "$GPID" ] && kill "$GPID" 2>/dev/null && wait "$GPID" 2>/dev/null
  "$RIG/net.sh" del "$VETH" >/dev/null 2>&1
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; FAILED=1; }
FAILED=0

CASES=()
for ex in tcp rdmacm; do
  for op in write read send; do
    for kind in bw lat; do
      for role in server client; do
        c="$ex-${op}_$kind-rocedp_$role"
        echo "$c" | grep -Eq "$FILTER" && CASES+=("$c")
      done
    done
  done
done
[ ${#CASES[@]} -gt 0 ] || { echo "no case matches $FILTER" >&2; exit 2; }

# The guest's side, in case order.
{
  echo 'run() { name=$1; shift; i=0; while :; do "$@" > /tmp/out 2>&1; rc=$?; cat /tmp/out'
  echo '  grep -q "Couldn.t connect\|Unable to perform rdma_client\|Unexpected CM event\|REJECTED\|Unable to init the socket" /tmp/out || break'
  echo '  i=$((i+1)); [ $i -ge 120 ] && break; sleep 0.5; done; echo "PTCASE $name rc=$rc"; }'
  for c in "${CASES[@]}"; do
    IFS=- read -r ex test role <<< "$c"
    op=${test%_*} kind=${test#*_}
    n=$ITERS_BW; [ "$kind" = lat ] && n=$ITERS_LAT
    opts="-d rxe0 -n $n -s $SIZE -F"
    if [ "$ex" = tcp ]; then opts="$opts -x \$GID"; else opts="$opts -R"; fi
    if [ "$role" = rocedp_server ]; then
      host=$BRIP; [ "$ex" = rdmacm ] && host=$RIP
      echo "run $c ib_${op}_$kind $opts $host"
    else
      echo "run $c ib_${op}_$kind $opts"
    fi
  done
  echo 'sleep 1; for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "HWC $(basename $f) $(cat $f)"; done'
} > "$WORK/guest.sh"

"$RIG/up.sh" >/dev/null 2>&1 || { echo "rig up.sh failed" >&2; exit 1; }
"$RIG/net.sh" up && "$RIG/net.sh" veth "$VETH" || exit 1
GLOG=$WORK/guest.log
t0=$(date +%s)
"$RIG/peer.sh" --quiet --timeout 400 --log "$GLOG" --script "$WORK/guest.sh" "$GNAME" "$GIP" > "$WORK/peer.out" 2>&1 &
GPID=$!

EP="--port-devargs net_af_packet0,iface=$VETH --ip $RIP/24 --file-prefix rocedp-pt-$$ --memory-mb 256 --timeout 90"
for c in "${CASES[@]}"; do
  kill -0 "$GPID" 2>/dev/null || { fail "the guest is gone: $(tail -3 "$WORK/peer.out")"; break; }
  IFS=- read -r ex test role <<< "$c"
  op=${test%_*} kind=${test#*_}
  n=$ITERS_BW; [ "$kind" = lat ] && n=$ITERS_LAT
  args="$op $kind -n $n -s $SIZE -F"
  [ "$ex" = rdmacm ] && args="$args -R"
  [ "$role" = rocedp_client ] && args="$GIP $args"
  pcap=$ART/interop-perftest-$c.pcap log=$ART/interop-perftest-$c.log
  rm -f "$pcap"
  ip netns exec "$NS" tcpdump -i br-rig -s 0 -U -n -w "$pcap" "host $GIP" 2> "$WORK/tcpdump.log" &
  TPID=$!
  for i in $(seq 1 40); do grep -q "listening on" "$WORK/tcpdump.log" && break; sleep 0.1; done
  ip netns exec "$NS" "$BIN" --perftest $EP $args > "$log" 2>&1
  rc=$?
  sleep 0.3
  kill "$TPID"; wait "$TPID" 2>/dev/null; TPID=
  row=$(grep -E "^ $SIZE +[0-9]" "$log" | head -1)
  if [ $rc != 0 ]; then fail "$c: rocedp-perf exit $rc ($(tail -1 "$log"))"
  elif [ -z "$row" ] && ! { [ "$test" = read_lat ] && [ "$role" = rocedp_server ]; }; then fail "$c: no result row"
  elif ! /usr/bin/python3 "$CHECK" "$pcap" > "$WORK/check.out" 2>&1; then fail "$c: roce-check: $(tail -3 "$WORK/check.out")"
  else
    pk=$(tshark -r "$pcap" -Y "udp.dstport==4791" 2>/dev/null | wc -l)
    echo "ok   $c ($pk RoCE packets)${row:+: $row}"
  fi
done

# The guest finishes its last case, prints its counters and powers off.
wait "$GPID"; grc=$?; GPID=
t1=$(date +%s)
cp "$GLOG" "$ART/interop-perftest-guest.log" 2>/dev/null
for c in "${CASES[@]}"; do
  grep -aq "PTCASE $c rc=0" "$GLOG" || fail "$c: the Linux side did not succeed ($(grep -a "PTCASE $c" "$GLOG" | tr -d '\r'))"
done
for k in rcvd_seq_err retry_exceeded_err retry_rnr_exceeded_err completer_retry_err; do
  v=$(grep -a "^HWC $k " "$GLOG" | awk '{print $3}' | tr -d '\r')
  [ "$v" = 0 ] || fail "guest hw_counters: $k = ${v:-missing}"
done
echo "guest exit $grc; ${#CASES[@]} cases in $((t1 - t0)) s"
[ $FAILED = 0 ] && echo PASS || echo FAIL
exit $FAILED

#!/usr/bin/env bash
# Interop under loss: 2% of the RoCEv2 frames the rig's bridge forwards are dropped,
# in both directions between the Linux guest and rocedp, during 64 KiB perftest bandwidth runs
# with rocedp on both ends of the retransmission. The drop is an nftables rule on the bridge's
# forward hook (numgen random): these hosts' kernels have no sch_netem, and the rule sees exactly
# the frames between the two ends. The bridge capture sees every frame before the drop.
#   linux-writes   ib_write_bw (Linux client) -> rocedp-perf --perftest write bw server:
#                  Linux retransmits to rocedp
#   rocedp-writes  rocedp-perf --perftest write bw client -> ib_write_bw server: rocedp retransmits
#   rocedp-reads   rocedp-perf --perftest read bw client <- ib_read_bw server: rocedp re-requests
#   linux-atomics  ib_atomic_bw -A FETCH_AND_ADD (Linux client) -> rocedp-perf --perftest atomic bw
#                  server: a request Linux sends again after its answer was lost must be answered
#                  from rocedp's saved result, not added twice
#   rocedp-atomics rocedp-perf --perftest atomic bw -A CMP_AND_SWAP client -> ib_atomic_bw server:
#                  rocedp retransmits its atomics
# `loss.sh chaos` runs the same cases through more than loss (interop_chaos): the bridge drops
# 2%, corrupts 1% (one byte, in the BTH or the payload) and sends 2% twice, both ways; rocedp's
# port reorders 5% of its frames both ways (its fault stage: picked frames wait in a window of 4
# for up to 100 us while the others pass; these kernels have no sch_netem). Besides the checks
# below, rocedp must count frames dropped for a bad ICRC, duplicates and reordered frames, and the
# bridge must have corrupted and duplicated some (rocedp-perf --counters, nft counters). Chaos
# also runs the ops check both ways (ops-lc: tests/interop/ops_check_peer.c as Linux's client
# against rocedp-perf --ops-check -s; ops-ls: the other way round): immediate data, a memory
# window, a solicited SEND, SEND with Invalidate and a refused WRITE, with their connections,
# through harsher impairments (a case is only some 30 frames each way: the bridge drops 10%,
# corrupts 2% and sends 10% twice); each side must hold every check (a refused WRITE whose NAK was
# lost may end in a retry timeout instead: the responder's QP is in error and never resends it).
# Every run must complete on both sides; where the bytes land in rocedp (linux-writes,
# rocedp-reads) the region must equal, byte for byte, the messages Linux put on the wire
# (tests/interop/region_check.py over the bridge capture, which sees frames before netem drops
# them); every atomic in the atomic cases' captures executed exactly once, in PSN order, with the
# answers and (linux-atomics) rocedp's region the replay gives (tests/interop/atomic_check.py); the
# captures must show retransmissions from the side that should retransmit; and Linux must exhaust
# no retry budget.
set -uo pipefail
mode=${1:-loss}
case $mode in
  loss | chaos) ;;
  *) echo "usage: $0 [loss|chaos]" >&2; exit 2 ;;
esac
IOP_PREFIX=$mode-
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
iop_init "$mode"
guest=198.18.0.35 rocedp=198.18.0.45 bridge=198.18.0.1 loss=${IOP_LOSS_PCT:-2}
corrupt=0 dup=0 reorder=0
[ "$mode" = chaos ] && corrupt=${IOP_CORRUPT_PCT:-1} dup=${IOP_DUP_PCT:-2} reorder=${IOP_REORDER_PCT:-5}
iters=40 size=65536 atomics=400
cases=(linux-writes rocedp-writes rocedp-reads linux-atomics rocedp-atomics)

{
  echo 'run() { name=$1; shift; i=0; while :; do "$@" > /tmp/out 2>&1; rc=$?; cat /tmp/out'
  echo '  grep -q "Couldn.t connect\|Unable to init the socket" /tmp/out || break'
  echo '  i=$((i+1)); [ $i -ge 120 ] && break; sleep 0.5; done; echo "LSCASE $name rc=$rc"; }'
  echo "run linux-writes ib_write_bw -d rxe0 -x \$GID -s $size -n $iters -F $bridge"
  echo "run rocedp-writes ib_write_bw -d rxe0 -x \$GID -s $size -n $iters -F"
  echo "run rocedp-reads ib_read_bw -d rxe0 -x \$GID -s $size -n $iters -F"
  echo "run linux-atomics ib_atomic_bw -d rxe0 -x \$GID -A FETCH_AND_ADD -n $atomics -F $bridge"
  echo "run rocedp-atomics ib_atomic_bw -d rxe0 -x \$GID -A CMP_AND_SWAP -n $atomics -F"
  # Read before the ops check, whose refused WRITE may legitimately exhaust Linux's retries.
  echo 'for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "HWC ${f##*/} $(cat $f)"; done'
  if [ "$mode" = chaos ]; then
    echo "run ops-lc /mnt/share/ops_check_peer -c -a $rocedp -l -t 120"
    echo "run ops-ls /mnt/share/ops_check_peer -s -l -t 120"
  fi
} >"$IOP_WORK/guest.sh"
mkdir -p "$IOP_WORK/share"
if [ "$mode" = chaos ]; then
  cp "$IOP_BIN/ops_check_peer" "$IOP_WORK/share/" 2>/dev/null ||
    iop_fail "ops-lc, ops-ls: $IOP_BIN/ops_check_peer is not built (scripts/setup.sh installs libibverbs-dev and librdmacm-dev)"
fi

iop_net 1500 dpdkls
IOP_GUEST_TIMEOUT=400 iop_guest lsg "$guest" 1500 "$IOP_WORK/guest.sh"
gpid=$IOP_LAST_PID
glog=$IOP_WORK/lsg.console
# The guest's tap (rig-lsg) comes with the guest: the duplicates' rule hooks on it.
for _ in $(seq 100); do ip netns exec rig ip link show rig-lsg >/dev/null 2>&1 && break; sleep 0.1; done
iop_bridge_impair "$loss" "$corrupt" "$dup" rig-lsg dpdkls-br || iop_fail "no impairment rules on the bridge"

ep=(--port-devargs "$(iop_devargs 0 dpdkls 1500)" --ip "$rocedp/24" --file-prefix "rdp-iop-ls-$$" --memory-mb 256 --timeout 150)
if [ "$mode" = chaos ]; then
  # The endpoint from a configuration, for its port's fault stage (reordering).
  cat >"$IOP_WORK/rocedp.yaml" <<EOF
eal: {memory_mb: 256, file_prefix: rdp-iop-ls-$$, extra_args: ["--no-pci"]}
ports:
  - name: perf0
    devargs: "$(iop_devargs 0 dpdkls 1500)"
    address: $rocedp/24
    fault: {direction: both, reorder_window: 4, reorder_pct: $reorder, seed: $$}
dataplane: {mbuf_count: 16383}
EOF
  ep=(--config "$IOP_WORK/rocedp.yaml" --counters --timeout 150)
fi
artifact() { echo "$IOP_ARTIFACTS/interop-$IOP_PREFIX$1"; }
for c in "${cases[@]}"; do
  sz=$size
  case $c in
    linux-writes) args=(write bw --dump-recv "$IOP_WORK/$c.bin") ;;
    rocedp-writes) args=("$guest" write bw) ;;
    rocedp-reads) args=("$guest" read bw --dump-recv "$IOP_WORK/$c.bin") ;;
    linux-atomics) args=(atomic bw -A FETCH_AND_ADD --dump-recv "$IOP_WORK/$c.bin") sz=8 ;;
    rocedp-atomics) args=("$guest" atomic bw -A CMP_AND_SWAP) sz=8 ;;
  esac
  n=$iters; [ $sz = 8 ] && n=$atomics
  iop_capture_start "$c" "host $guest and host $rocedp"
  ip netns exec rig "$IOP_BIN/rocedp-perf" --perftest "${ep[@]}" "${args[@]}" -s "$sz" -n "$n" -F \
    >"$(artifact "$c").log" 2>&1
  rc=$?
  iop_capture_stop "$c"
  [ $rc = 0 ] || iop_fail "$c: rocedp-perf exit $rc ($(tail -1 "$(artifact "$c").log"))"
  echo "$c: $(grep -E "^ $sz +[0-9]" "$(artifact "$c").log" | head -1)"
done
ops_cases=()
if [ "$mode" = chaos ]; then
  # The ops check through the same impairments: rocedp's server first (Linux's client tries again
  # until it listens), then rocedp's client (it tries again until Linux's server listens).
  ops_cases=(ops-lc ops-ls)
  before=("$(iop_bridge_count dropped)" "$(iop_bridge_count corrupted)" "$(iop_bridge_count duplicated)")
  iop_bridge_impair "${IOP_OPS_LOSS_PCT:-10}" "${IOP_OPS_CORRUPT_PCT:-2}" "${IOP_OPS_DUP_PCT:-10}" rig-lsg dpdkls-br ||
    iop_fail "no impairment rules on the bridge for the ops check"
  for c in "${ops_cases[@]}"; do
    side=(-s --lossy)
    [ "$c" = ops-ls ] && side=(-c -a "$guest" --lossy)
    iop_capture_start "$c" "host $guest and host $rocedp"
    ip netns exec rig "$IOP_BIN/rocedp-perf" --ops-check "${side[@]}" "${ep[@]}" >"$(artifact "$c").log" 2>&1
    rc=$?
    iop_capture_stop "$c"
    [ $rc = 0 ] || iop_fail "$c: rocedp-perf --ops-check exit $rc ($(grep FAIL "$(artifact "$c").log" | tail -1))"
    grep "every check held" "$(artifact "$c").log" >/dev/null || iop_fail "$c: rocedp did not hold every check"
  done
  echo "ops check: the bridge dropped $(iop_bridge_count dropped) frames, corrupted $(iop_bridge_count corrupted), sent $(iop_bridge_count duplicated) twice"
fi
wait "$gpid"
dropped=$(iop_bridge_count dropped) corrupted=$(iop_bridge_count corrupted) duplicated=$(iop_bridge_count duplicated)
if [ ${#ops_cases[@]} -gt 0 ]; then
  dropped=$((dropped + before[0])) corrupted=$((corrupted + before[1])) duplicated=$((duplicated + before[2]))
fi
iop_bridge_impair off
echo "the bridge dropped $dropped RoCEv2 frames, corrupted $corrupted, sent $duplicated twice"
[ "$dropped" -gt 0 ] || iop_fail "the loss rule dropped nothing"
if [ "$mode" = chaos ]; then
  [ "$corrupted" -gt 0 ] || iop_fail "the bridge corrupted nothing"
  [ "$duplicated" -gt 0 ] || iop_fail "the bridge duplicated nothing"
  # rocedp's side, summed over the cases (its --counters lines): what it refused and why.
  sum() {
    local c t=0 v
    for c in "${cases[@]}"; do
      v=$(sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$(artifact "$c").log" | tail -1)
      t=$((t + ${v:-0}))
    done
    echo $t
  }
  bad_icrc=$(sum bad_icrc) duplicates=$(sum rx_duplicate) reordered=$(sum fault_reordered)
  echo "rocedp dropped $bad_icrc frames for a bad ICRC, saw $duplicates duplicate requests, reordered $reordered frames"
  [ "$bad_icrc" -gt 0 ] || iop_fail "rocedp dropped no frame for a bad ICRC"
  [ "$duplicates" -gt 0 ] || iop_fail "rocedp counted no duplicate request"
  [ "$reordered" -gt 0 ] || iop_fail "rocedp's port reordered nothing"
fi
iop_check_captures

pcap() { echo "$(artifact "$1").pcap"; }
# Packets a side sent more than once (the same opcode and PSN again): requests and READ responses
# (opcodes 0-16), atomic requests (19, 20); not ACKs.
resent() {
  tshark -r "$(pcap "$1")" -d udp.port==4791,infiniband \
    -Y "ip.src == $2 && (infiniband.bth.opcode < 17 || infiniband.bth.opcode == 19 || infiniband.bth.opcode == 20)" \
    -T fields -e infiniband.bth.opcode -e infiniband.bth.psn 2>/dev/null | sort | uniq -d | wc -l
}
for c in "${cases[@]}" "${ops_cases[@]}"; do
  iop_console_has "$glog" "LSCASE $c rc=0" || iop_fail "$c: the Linux side did not succeed"
done
for c in "${ops_cases[@]}"; do
  echo "$c: rocedp resent $(resent "$c" "$rocedp") packets, Linux $(resent "$c" "$guest")"
done
for c in linux-writes linux-atomics; do
  n=$(resent "$c" "$guest")
  [ "$n" -gt 0 ] || iop_fail "$c: Linux retransmitted nothing at $loss% loss"
  echo "$c: Linux resent $n packets"
done
for c in rocedp-writes rocedp-reads rocedp-atomics; do
  n=$(resent "$c" "$rocedp")
  [ "$n" -gt 0 ] || iop_fail "$c: rocedp retransmitted nothing at $loss% loss"
  echo "$c: rocedp resent $n packets"
done
# capture_check CASE WHAT COMMAND...: a check of CASE's capture; its failure fails the test unless
# the kernel dropped frames of that capture (tcpdump says so; QEMU and rocedp keep both CPUs busy):
# then the capture lacks frames the wire carried (an atomic's answer, a WRITE's packet) and the
# replay cannot decide, which is shown, not failed.
capture_check() {
  local c=$1 what=$2
  shift 2
  "$@" && return 0
  if iop_capture_dropped "$c"; then
    echo "note $c: the capture dropped frames ($(grep "dropped by kernel" "$IOP_WORK/tcpdump-$c.log")), so its replay cannot decide: $what"
  else
    iop_fail "$c: $what"
  fi
}
checks=$(dirname "${BASH_SOURCE[0]}")
capture_check linux-writes "rocedp's region differs from what Linux sent" \
  /usr/bin/python3 "$checks/region_check.py" "$(pcap linux-writes)" "$guest" write "$IOP_WORK/linux-writes.bin"
capture_check rocedp-reads "rocedp's buffer differs from what Linux sent" \
  /usr/bin/python3 "$checks/region_check.py" "$(pcap rocedp-reads)" "$guest" read "$IOP_WORK/rocedp-reads.bin"
base=$(iop_local_vaddr "$(artifact linux-atomics).log")
capture_check linux-atomics "the atomics or rocedp's region differ from the replay" \
  /usr/bin/python3 "$checks/atomic_check.py" "$(pcap linux-atomics)" "$guest" "$IOP_WORK/linux-atomics.bin" "$base"
capture_check rocedp-atomics "the atomics differ from the replay" \
  /usr/bin/python3 "$checks/atomic_check.py" "$(pcap rocedp-atomics)" "$rocedp"
for k in retry_exceeded_err retry_rnr_exceeded_err; do
  v=$(tr -d '\r' <"$glog" | awk -v k="$k" '$1 == "HWC" && $2 == k {print $3}')
  [ "$v" = 0 ] || iop_fail "guest hw_counters: $k = ${v:-missing}"
done
tr -d '\r' <"$glog" | awk '$1 == "HWC" && $3 != 0 {print "Linux " $2 " = " $3}'
if [ "$mode" = chaos ]; then
  [ $IOP_FAILED = 0 ] && echo "PASS: interop at $loss% loss, $corrupt% corruption, $dup% duplicates, $reorder% reordered, both ways"
else
  [ $IOP_FAILED = 0 ] && echo "PASS: interop at $loss% loss both ways"
fi

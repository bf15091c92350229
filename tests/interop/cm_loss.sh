#!/usr/bin/env bash
# One CM message lost at a time, against a live Linux Soft-RoCE peer: in each case the rig's bridge
# drops the first CM message of one kind from one side (iop_bridge_drop_first), and the connection
# must come about, carry its data and end anyway, each side's CM sending again what the other
# waits for. One guest boot, MTU 1500.
#   rdma_client in the guest against rocedpd's echo (198.18.0.20):
#     req-from-linux    Linux's REQ: Linux sends it again after its timeout (6.2 s)
#     rep-from-rocedp   rocedpd's REP: Linux's REQ comes again, and rocedpd (REP sent) answers it
#                       with its REP again
#     rep-from-rocedp-twice  rocedpd's REP lost twice: Linux's REQ comes again and is answered
#                       with the REP (lost again); rocedpd's own REP timer sends it a third time
#     rtu-from-linux    Linux's RTU: Linux's first SEND establishes the connection (IBTA: any
#                       packet on the QP stands for the RTU)
#     dreq-from-linux   Linux's DREQ (rdma_client disconnects): Linux sends it again
#     rep-rocedp-and-rtu-linux  two messages of one exchange: rocedpd's REP, then Linux's RTU
#                       after the REP sent again: Linux's REQ again, answered with the REP, and
#                       Linux's first SEND stands for its lost RTU
#   rdma_server in the guest; rocedp-perf (198.18.0.21) --connect ... --peer-echoes:
#     req-from-rocedp   rocedp's REQ: sent again after 4.3 s
#     req-from-rocedp-twice  rocedp's REQ lost twice: sent at 4.3 s and again at 8.6 s
#     rep-from-linux    Linux's REP: rocedp's REQ comes again, Linux sends its REP again
#     rtu-from-rocedp   rocedp's RTU: Linux (no packet stands for the RTU in rdma_rxe) sends its
#                       REP again; rocedp, connected, answers it with the RTU again
#     req-rocedp-and-rep-linux  two messages of one exchange: rocedp's REQ, then Linux's REP to
#                       the REQ sent again: the REQ or Linux's REP comes once more, and rocedp
#                       connects on the REP
#   rping -s in the guest; rocedp-perf --rping -c (one validated ping) disconnects when done:
#     dreq-from-rocedp  rocedp's DREQ: sent again after 4.3 s (rocedp-perf waits up to 10 s for the
#                       DREP before it exits, kDisconnectWait)
#     drep-from-linux   Linux's DREP: rocedp's DREQ comes again (Linux's CM answered it in some
#                       runs and not in others: rocedp-perf then closes after 10 s all the same)
#   the CM check (tests/interop/cm_check_peer.c in the guest, rocedp-perf --cm-check): a REJ is
#   never sent again, but the REQ is, and both CMs forgot the rejected request, so it reaches the
#   listener as a new one and the consumer rejects it again:
#     rej-from-rocedp   rocedp's REJ (reason 28, private data): Linux's REQ comes again after
#                       6.2 s; Linux gets REJECTED, status 28, rocedp's data
#     rej-from-linux    Linux's REJ: rocedp's REQ comes again after 4.3 s; rocedp gets
#                       STATUS_CONNECTION_REFUSED with Linux's data
#     mra-from-rocedp   rocedp's MRA: its server (--answer late) accepts only after 15 s; Linux's
#                       REQ comes again at 6.2 s and rocedp's CM answers with an MRA (more time),
#                       which is lost, so Linux's REQ comes once more at 12.4 s and rocedp sends
#                       its MRA again; the late accept then connects
#   not a CM message, the one loss that nothing makes up for (the ops check, ops_check_peer -c -l
#   against rocedp-perf --ops-check -s --lossy):
#     nak-from-rocedp   rocedp's NAK (remote access error) of the WRITE through the invalidated
#                       window: it ended rocedp's QP, so Linux's WRITE sent again meets silence
#                       and must end in a retry timeout, which both ends accept as the refusal
# Every case: both sides succeed (each checks what its consumer got); the bridge dropped exactly
# one frame (two in a -twice case and where two messages are lost); the capture (on the bridge device, where the dropped frame shows too) holds the
# message that makes up for the lost one: the lost message itself at least twice, rocedp's DREQ
# twice for Linux's DREP, the client's REQ twice for a REJ, Linux's RTU once (its SEND stands for
# it). At the end rocedpd holds no connection and no QP, and Linux exhausted its retries once
# (nak-from-rocedp).
#   cm_loss.sh
set -uo pipefail
IOP_PREFIX="cm-loss-"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
iop_init cm-loss
mtu=1500
linux=198.18.0.51 daemon=198.18.0.20 perf=198.18.0.21

iop_net "$mtu" dpdk-d dpdk-p
dev_d=$(iop_devargs 0 dpdk-d "$mtu") dev_p=$(iop_devargs 1 dpdk-p "$mtu")
iop_rocedpd "$mtu" "$dev_d" "$daemon" "{port: rig0, nd_port: 7471, service: echo}" || { iop_fail "rocedpd did not start"; exit 1; }

# CASE SOURCE ATTRIBUTE SEEN TIMES GUEST-COMMAND, in the order the guest runs them: the bridge
# drops the first message ATTRIBUTE from SOURCE (the first two for a CASE ending in -twice; with
# comma lists SOURCE1,SOURCE2 and ATTRIBUTE1,ATTRIBUTE2 the first of each), and the capture must
# hold the message SEEN (SOURCE:ATTRIBUTE, what proves the lost one was made up for) TIMES or more.
cases=(
  "req-from-linux $linux 0x0010 $linux:0x0010 2 rdma_client -s $daemon -p 7471"
  "rep-from-rocedp $daemon 0x0013 $daemon:0x0013 2 rdma_client -s $daemon -p 7471"
  "rep-from-rocedp-twice $daemon 0x0013 $daemon:0x0013 3 rdma_client -s $daemon -p 7471"
  "rtu-from-linux $linux 0x0014 $linux:0x0014 1 rdma_client -s $daemon -p 7471"
  "dreq-from-linux $linux 0x0015 $linux:0x0015 2 rdma_client -s $daemon -p 7471"
  "rep-rocedp-and-rtu-linux $daemon,$linux 0x0013,0x0014 $daemon:0x0013 2 rdma_client -s $daemon -p 7471"
  "req-from-rocedp $perf 0x0010 $perf:0x0010 2 rdma_server -p 7471"
  "req-from-rocedp-twice $perf 0x0010 $perf:0x0010 3 rdma_server -p 7471"
  "rep-from-linux $linux 0x0013 $linux:0x0013 2 rdma_server -p 7471"
  "rtu-from-rocedp $perf 0x0014 $perf:0x0014 2 rdma_server -p 7471"
  "req-rocedp-and-rep-linux $perf,$linux 0x0010,0x0013 $linux:0x0013 2 rdma_server -p 7471"
  "req-rocedp-and-rep-linux-twice $perf,$linux 0x0010,0x0013 $linux:0x0013 3 rdma_server -p 7471"
  "dreq-from-rocedp $perf 0x0015 $perf:0x0015 2 rping -s -a $linux -S 3000"
  "drep-from-linux $linux 0x0016 $perf:0x0015 2 rping -s -a $linux -S 3000"
  "rej-from-rocedp $perf 0x0012 $linux:0x0010 2 await cm-listening && /mnt/share/cm_check_peer -c -a $perf -p 7476 -e 28 -d rocedp-rejects"
  "rej-from-linux $linux 0x0012 $perf:0x0010 2 /mnt/share/cm_check_peer -s reject -n 2 -p 7476 -d rocedp-asks"
  "mra-from-rocedp $perf 0x0011 $perf:0x0011 2 await cm-late-listening && /mnt/share/cm_check_peer -c -a $perf -p 7478 -k -t 40"
  "nak-from-rocedp $perf nak-access - 0 await ops-listening && /mnt/share/ops_check_peer -c -a $perf -l -t 90"
)
{
  iop_case_lines
  for c in "${cases[@]}"; do
    read -r name _ _ _ _ cmd <<<"$c"
    echo "begin $name; $cmd; end $name \$?"
  done
  echo "hw end"
} >"$IOP_WORK/guest.sh"

# Before each case may start, the bridge's rule drops the first message of its kind from its side
# (the rule of the case before is read and replaced).
declare -A dropped=()
armed=""
# Drops of each lost message (2 in a -twice case), and of the case (two messages in an -and- case).
each() { [[ $1 == *-twice ]] && echo 2 || echo 1; }
losses() { [[ $1 == *-and-* ]] && echo $(($(each "$1") * 2)) || each "$1"; }
arm() {
  [ -z "$armed" ] || dropped[$armed]=$(iop_bridge_drop_first count)
  armed=$1
  iop_bridge_drop_first "$2" "$3" "$(each "$1")" || iop_fail "$1: no drop rule on the bridge"
}
for c in "${cases[@]}"; do
  read -r name src attr _ <<<"$c"
  eval "on_ready_${name//-/_}() { arm $name $src $attr; }"
done

# rocedp-perf's endpoint, every case.
perf_ep=(--port-devargs "$dev_p" --ip "$perf/24" --mac 02:00:00:00:00:15 --mtu "$mtu" --timeout 40)
# The rdma_server cases: once the server prints its start line, rocedp-perf connects, SENDs 16
# bytes and awaits the echo.
declare -A perf_rc=()
servers=0
run_perf() {
  servers=$((servers + 1))
  iop_perf_echo "$linux" "$servers" "$IOP_WORK/perf-$1.log" "${perf_ep[@]}" --file-prefix "rdp-iop-p-$$"
  perf_rc[$1]=$IOP_PERF_RC
}
on_begin_req_from_rocedp() { run_perf req-from-rocedp; }
on_begin_req_from_rocedp_twice() { run_perf req-from-rocedp-twice; }
on_begin_rep_from_linux() { run_perf rep-from-linux; }
on_begin_rtu_from_rocedp() { run_perf rtu-from-rocedp; }
on_begin_req_rocedp_and_rep_linux() { run_perf req-rocedp-and-rep-linux; }
on_begin_req_rocedp_and_rep_linux_twice() { run_perf req-rocedp-and-rep-linux-twice; }
# The rping cases: rocedp-perf --rping -c (one validated ping) disconnects when done, so the DREQ is
# rocedp's. It tries again while the guest's server does not listen yet.
run_rping() {
  ip netns exec rig "$IOP_BIN/rocedp-perf" --rping -c -a "$linux" -C 1 -V -S 3000 "${perf_ep[@]}" \
    --file-prefix "rdp-iop-r-$$" >"$IOP_WORK/perf-$1.log" 2>&1
  perf_rc[$1]=$?
}
on_begin_dreq_from_rocedp() { run_rping dreq-from-rocedp; }
on_begin_drep_from_linux() { run_rping drep-from-linux; }
# The REJ cases (the CM check, rocedp-perf --cm-check against tests/interop/cm_check_peer.c): a
# rejected request is forgotten by both CMs, so the REQ sent again is a new request, and the
# consumer, asked again, rejects it again (--requests 2, -n 2).
cm_srv="" ops_srv=""
on_begin_rej_from_rocedp() {
  iop_serve_guest perf-rej-from-rocedp cm-listening --cm-check -s --answer reject --requests 2 \
    --peer-data linux-asks "${perf_ep[@]}" --file-prefix "rdp-iop-ms-$$"
  cm_srv=$IOP_LAST_PID
}
on_begin_rej_from_linux() {
  if [ -n "$cm_srv" ]; then
    wait "$cm_srv"
    perf_rc[rej-from-rocedp]=$?
  fi
  iop_wait "$IOP_WORK/linux.console" "cm_check_peer: server: listening on port 7476 \(reject\)" 60 ||
    iop_fail "rej-from-linux: the guest's cm_check_peer did not listen"
  ip netns exec rig "$IOP_BIN/rocedp-perf" --cm-check -c -a "$linux" -p 7476 --expect refused \
    --peer-data linux-rejects "${perf_ep[@]}" --file-prefix "rdp-iop-mc-$$" >"$IOP_WORK/perf-rej-from-linux.log" 2>&1
  perf_rc[rej-from-linux]=$?
}
# The lost MRA: the server accepts late (tests/interop/cm_check_peer.c -c -k against rocedp-perf
# --cm-check -s --answer late), past two of Linux's REQ timeouts.
late_srv=""
on_begin_mra_from_rocedp() {
  iop_serve_guest perf-mra-from-rocedp cm-late-listening --cm-check -s --answer late \
    --wait-ms 15000 -p 7478 "${perf_ep[@]}" --file-prefix "rdp-iop-ml-$$"
  late_srv=$IOP_LAST_PID
}
# Not a CM message: the NAK of the ops check's refused WRITE (tests/interop/ops_check_peer.c -c
# against rocedp-perf --ops-check -s). The NAK ends rocedp's QP (IBTA: a remote access error is
# fatal), so nothing answers Linux's WRITE sent again: it must end in a retry timeout, which both
# ends accept with -l and --lossy (as interop_chaos does when its loss takes that NAK).
on_begin_nak_from_rocedp() {
  if [ -n "$late_srv" ]; then
    wait "$late_srv"
    perf_rc[mra-from-rocedp]=$?
  fi
  iop_serve_guest perf-nak-from-rocedp ops-listening --ops-check -s --lossy "${perf_ep[@]}" \
    --timeout 90 --file-prefix "rdp-iop-os-$$"
  ops_srv=$IOP_LAST_PID
}
iop_share_check_peers

iop_guest linux "$linux" "$mtu" "$IOP_WORK/guest.sh"
iop_follow "$IOP_WORK/linux.console" "host $daemon or host $perf" 240 || iop_fail "the guest did not finish"
[ -z "$armed" ] || dropped[$armed]=$(iop_bridge_drop_first count)
iop_bridge_drop_first off
if [ -n "$ops_srv" ]; then
  wait "$ops_srv"
  perf_rc[nak-from-rocedp]=$?
fi

held=$(iop_daemon_holds "rdp-iop-d-$$")
[ "$held" = "0 0 " ] || iop_fail "rocedpd still holds connections and QPs (count of each: $held) after the guest's clients ended"
echo "rocedpd after the guest's clients: $held(connections, QPs)"
iop_check_captures

for c in "${cases[@]}"; do
  read -r name src attr seen times cmd <<<"$c"
  var="IOP_RC_${name//-/_}"
  prog=${cmd#await * && }
  prog=${prog%% *}
  [ "${!var:-x}" = 0 ] || iop_fail "$name: Linux's ${prog##*/} ended with rc=${!var:-none}"
  if [[ $cmd != rdma_client* ]]; then
    [ "${perf_rc[$name]:-x}" = 0 ] ||
      iop_fail "$name: rocedp-perf ended with rc=${perf_rc[$name]:-none} ($(tail -1 "$IOP_WORK/perf-$name.log" 2>/dev/null))"
    cp "$IOP_WORK/perf-$name.log" "$IOP_ARTIFACTS/interop-cm-loss-$name.log" 2>/dev/null
  fi
  [ "${dropped[$name]:-0}" = "$(losses "$name")" ] ||
    iop_fail "$name: the bridge dropped ${dropped[$name]:-0} frames, expected $(losses "$name") $attr from $src"
  # The case's CM messages, one tshark run: "SOURCE:ATTRIBUTE" a line.
  cm=$(tshark -r "$IOP_ARTIFACTS/interop-$IOP_PREFIX$name.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.mad.mgmtclass == 0x07" -T fields -E separator=: -e ip.src -e infiniband.mad.attributeid 2>/dev/null)
  if [ "$seen" != - ]; then
    sent=$(grep -c "^$seen\$" <<<"$cm")
    [ "$sent" -ge "$times" ] || iop_fail "$name: the capture holds $sent ${seen#*:} from ${seen%:*}, expected $times or more"
  fi
  echo "$name: the bridge dropped ${dropped[$name]:-0}; CM messages (count source:attribute): $(sort <<<"$cm" | uniq -c | tr -s ' ' | tr '\n' ';')"
done

# nak-from-rocedp: Linux's WRITE through the invalidated window, sent again, ended in a retry
# timeout (once: nothing else may exhaust Linux's retries), and both ends held every other check.
iop_console_has "$IOP_WORK/linux.console" "^ops_check_peer: RDMA WRITE through the invalidated window: transport retry counter exceeded" ||
  iop_fail "nak-from-rocedp: Linux's refused WRITE did not end in a retry timeout"
retry_exc=$(iop_hw "$IOP_WORK/linux.console" end retry_exceeded_err)
[ "${retry_exc:-0}" = 1 ] || iop_fail "Linux exhausted its retries ${retry_exc:-0} times, expected once (nak-from-rocedp)"
[ $IOP_FAILED = 0 ] && echo "PASS: ${#cases[@]} cases, a message lost once each (twice in the -twice cases, two messages in the -and- cases): every connection came about, carried its data and ended, every refusal reached its client"
exit $IOP_FAILED

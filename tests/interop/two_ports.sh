#!/usr/bin/env bash
# rocedpd with two ports on the rig's bridge, rig0 (198.18.0.48) and rig1 (198.18.0.49), each on a
# veth of its own and with an NDK adapter of its own (its QPs, its CM, its listeners), against the
# Linux Soft-RoCE guest (198.18.0.37). Listeners: echo on 7471 on both ports, the memory service
# on 7474 on rig1 only. Cases, in one guest boot:
#   echo-rig0     librdmacm's rdma_client -s 198.18.0.48 -p 7471: connect, SEND, the echo back,
#                 disconnect
#   echo-rig1     the same against 198.18.0.49
#   mem-rig1      ops_check_peer -M -a 198.18.0.49 -p 7474 (tests/interop/ops_check_peer.c): the
#                 region from the REP's private data, WRITE and READ at its start and end, a
#                 WRITE past the end refused
#   refused-rig0  cm_check_peer -c -a 198.18.0.48 -p 7474 -e 8: rig0 has no listener on 7474
#                 (rig1's does not serve rig0's address): REJECTED, status 8
# Every case must succeed on the Linux side; in each capture every RoCEv2 frame from a port's
# address leaves from that port's MAC (02:00:00:00:00:14 for rig0, :16 for rig1), the other
# port's address sends nothing, and the CM's REP or REJ comes from the address Linux asked. The
# guest's neighbour table must hold the two addresses with the two MACs. roce-check on every
# capture; Linux's rxe counters: no sequence error, no exhausted retry.
#   two_ports.sh
set -uo pipefail
IOP_PREFIX=two-ports-
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
iop_init two-ports
linux=198.18.0.37 rig0=198.18.0.48 rig1=198.18.0.49
mac0=02:00:00:00:00:14 mac1=02:00:00:00:00:16
cases=(echo-rig0 echo-rig1 mem-rig1 refused-rig0)

iop_net 1500 dpdk2a dpdk2b
iop_share_check_peers
IOP_ROCEDPD_PORT2="$(iop_devargs 1 dpdk2b 1500) $rig1" iop_rocedpd 1500 "$(iop_devargs 0 dpdk2a 1500)" "$rig0" \
  "{port: rig0, nd_port: 7471, service: echo}" "{port: rig1, nd_port: 7471, service: echo}" \
  "{port: rig1, nd_port: 7474, service: memory, memory_bytes: 65536}" || { iop_fail "rocedpd did not start"; exit 1; }
[ "$(grep -c "event=adapter_opened" "$IOP_WORK/rocedpd.log")" = 2 ] || iop_fail "rocedpd did not open an adapter per port"

{
  iop_case_lines
  cat <<GUEST
begin echo-rig0; rdma_client -s $rig0 -p 7471; end echo-rig0 \$?
begin echo-rig1; rdma_client -s $rig1 -p 7471; end echo-rig1 \$?
begin mem-rig1; /mnt/share/ops_check_peer -M -a $rig1 -p 7474; end mem-rig1 \$?
begin refused-rig0; /mnt/share/cm_check_peer -c -a $rig0 -p 7474 -e 8; end refused-rig0 \$?
ip neigh show dev eth0
hw end
GUEST
} >"$IOP_WORK/guest.sh"

IOP_GUEST_TIMEOUT=200 iop_guest_cases linux "$linux" 1500 "${cases[@]}"
con=$IOP_WORK/linux.console
iop_check_captures
cp "$con" "$IOP_ARTIFACTS/interop-two-ports-guest.log" 2>/dev/null

# The source MACs of the RoCEv2 frames from ADDR in CASE's capture, and the IPs that sent CM MADs
# of attribute ATTR (0x0013 REP, 0x0012 REJ).
macs_from() {
  tshark -r "$IOP_ARTIFACTS/interop-two-ports-$1.pcap" -Y "ip.src == $2 && udp.dstport == 4791" \
    -T fields -e eth.src 2>/dev/null | sort -u | tr '\n' ' '
}
cm_from() {
  tshark -r "$IOP_ARTIFACTS/interop-two-ports-$1.pcap" -d udp.port==4791,infiniband \
    -Y "infiniband.mad.attributeid == $2" -T fields -e ip.src 2>/dev/null | sort -u | tr '\n' ' '
}
for c in "${cases[@]}"; do
  iop_console_has "$con" "END $c rc=0" || iop_fail "$c: the Linux side failed ($(tr -d '\r' <"$con" | grep "END $c"))"
  if [[ $c == *rig0 ]]; then addr=$rig0 mac=$mac0 other=$rig1; else addr=$rig1 mac=$mac1 other=$rig0; fi
  got=$(macs_from "$c" "$addr") stray=$(macs_from "$c" "$other")
  [ "$got" = "$mac " ] || iop_fail "$c: RoCEv2 frames from $addr left from '$got', expected $mac"
  [ -z "$stray" ] || iop_fail "$c: $other sent RoCEv2 frames ($stray)"
  attr=0x0013
  [[ $c == refused-* ]] && attr=0x0012
  [ "$(cm_from "$c" "$attr")" = "$addr " ] || iop_fail "$c: CM $attr from '$(cm_from "$c" "$attr")', expected $addr"
  echo "ok   $c: frames from $addr all from $mac; CM $attr from $addr"
done
iop_console_has "$con" "^ops_check_peer: memory: every check held" || iop_fail "mem-rig1: Linux's memory client did not hold every check"
for a in "$rig0 .*$mac0" "$rig1 .*$mac1"; do
  iop_console_has "$con" "^$a" || iop_fail "the guest's neighbour table lacks '$a'"
done
iop_clean_link "$con"
echo "guest exit $IOP_GUEST_RC; ${#cases[@]} cases in $IOP_GUEST_SECS s"
[ $IOP_FAILED = 0 ] && echo "PASS: two ports, an adapter each, against Linux"

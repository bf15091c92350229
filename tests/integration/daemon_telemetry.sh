#!/usr/bin/env bash
# rocedpd on a net_pcap port replaying the Soft-RoCE rping capture: the telemetry socket answers
# /rocedp/ports, /rocedp/cores, /rocedp/drops, /rocedp/neighbours, /rocedp/control and the
# counters move with the traffic. Then the same capture on a port with a VLAN, a priority and a
# DSCP: every (untagged) frame is dropped and counted, and the daemon's own frames leave tagged.
source "$(dirname "$0")/lib.sh"
need_root

write_pcap_config "$work/pcap.yaml"
start_daemon "$work/pcap.yaml"

# The capture holds 127 frames; all of them reach the port and the core.
wait_for /rocedp/ports "d['rx_packets'] == [127]"
wait_for /rocedp/cores "d['rx_packets'] == [127]"
[ "$(tel_get /rocedp/ports "d['name'] == ['p0'] and d['mac'] == ['02:52:17:00:00:0b'] and d['ip'] == ['198.18.0.11'] and d['queues'] == [1] and d['started'] == [1]")" = True ] \
  || fail "/rocedp/ports: $(python3 "$tel" "$prefix" /rocedp/ports)"
[ "$(tel_get /rocedp/ports,p0 "d['rx_packets']")" = 127 ] || fail "/rocedp/ports,p0"

# What the capture contains, seen from 198.18.0.11: 62 RoCEv2 frames for the client (not for us),
# 60 data frames for QPN 0x11 (core 0; no QP yet: unknown_qpn), 3 CM MADs on QP1 to control,
# the client's ARP request answered (1 ARP reply out, plus our gratuitous ARP), our own ARP reply
# seen again (looped_back).
wait_for /rocedp/drops "d['not_for_us'] == 62 and d['unknown_qpn'] == 60 and d['looped_back'] == 1"
[ "$(tel_get /rocedp/drops "d['bad_icrc'] == 0 and d['handoff_ring_full'] == 0")" = True ] || fail "/rocedp/drops"
wait_for /rocedp/cores "d['to_control'] == [3] and d['arp_replies'] == [1] and d['tx_packets'] == [2] and d['drops'] == [123]"
wait_for /rocedp/control "d['cm_frames'] == 3 and d['frames'] == 3"
wait_for /rocedp/ports "d['tx_packets'] == [2]"

# Cycles keep moving: the core loop runs (idle now) and the snapshots keep coming.
c1=$(tel_get /rocedp/cores "d['busy_cycles'][0] + d['idle_cycles'][0]")
s1=$(tel_get /rocedp/control "d['snapshot_sequence']")
wait_for /rocedp/cores "d['busy_cycles'][0] + d['idle_cycles'][0] > $c1 and d['busy_cycles'][0] > 0"
wait_for /rocedp/control "d['snapshot_sequence'] > $s1"
# The idle control thread naps, and each stats round's answers from the core end a nap.
n1=$(tel_get /rocedp/control "d['naps']")
w1=$(tel_get /rocedp/control "d['naps_woken']")
wait_for /rocedp/control "d['naps'] > $n1 and d['naps_woken'] > $w1"
[ "$(tel_get /rocedp/cores,0 "d['lcore'] == 1 and 'unknown_qpn' in d['drop_reasons']")" = True ] || fail "/rocedp/cores,0"
# The client's ARP request taught us its address (RFC 826: the target adds the sender).
wait_for /rocedp/neighbours "d['ip'] == ['198.18.0.12'] and d['mac'] == ['02:52:17:00:00:0c'] and d['state'] == ['reachable']"
# dpdk-telemetry.py (the tool operators use) talks to the same socket.
if [ -x /usr/bin/dpdk-telemetry.py ]; then
  echo /rocedp/drops | python3 /usr/bin/dpdk-telemetry.py -f "$prefix" 2>/dev/null | grep -q '"unknown_qpn": 60' \
    || fail "dpdk-telemetry.py did not show the drops"
fi

# rocedpctl metrics: the same counters as Prometheus metrics, read by prometheus_client's parser
# (metrics_check.py); then served over HTTP (--listen on a free port) and scraped twice: with the
# daemon up, and after it stopped (rocedp_up 0 and nothing else).
ctl=$bin_dir/rocedpctl
metrics_check=$here/metrics_check.py
expected=('rocedp_up == 1' 'rocedp_ports == 1' 'rocedp_ports_link_up == 1'
  'rocedp_port_rx_packets_total{port="p0"} == 127' 'rocedp_port_link_up{port="p0"} == 1'
  'rocedp_core_rx_packets_total{core="0",lcore="1"} == 127'
  'rocedp_core_to_control_total{core="0",lcore="1"} == 3'
  'rocedp_drops_total{reason="unknown_qpn"} == 60' 'rocedp_drops_total{reason="not_for_us"} == 62'
  'rocedp_drops_total{reason="bad_icrc"} == 0')
"$ctl" metrics --prefix "$prefix" >"$work/metrics.txt" || fail "rocedpctl metrics: exit status $?"
"$metrics_check" "${expected[@]}" <"$work/metrics.txt" || fail "rocedpctl metrics"
metrics_pid=
stop_metrics() {
  exit_status=${exit_status:-$?}
  stop_pid "$metrics_pid"
  return 0
}
trap 'stop_metrics; cleanup' EXIT
"$ctl" metrics --prefix "$prefix" --listen 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
metrics_pid=$!
url=
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*' "$work/serve.out" || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || fail "rocedpctl metrics --listen printed no address: $(cat "$work/serve.out" "$work/serve.err")"
scrape() {
  /usr/bin/python3 -c 'import sys, urllib.request
r = urllib.request.urlopen(sys.argv[1], timeout=10)
assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
sys.stdout.write(r.read().decode())' "$url"
}
scrape >"$work/scrape.txt" || fail "scraping $url"
"$metrics_check" "${expected[@]}" <"$work/scrape.txt" || fail "the scrape of $url"

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"
scrape >"$work/scrape-down.txt" || fail "scraping $url with the daemon gone"
"$metrics_check" 'rocedp_up == 0' <"$work/scrape-down.txt" || fail "the scrape without a daemon"
[ "$(grep -vc '^#' "$work/scrape-down.txt")" = 1 ] || fail "more than rocedp_up without a daemon: $(cat "$work/scrape-down.txt")"
"$ctl" metrics --prefix "$prefix" >/dev/null 2>&1 && fail "rocedpctl metrics without a daemon exits 0"
kill -TERM "$metrics_pid"
metrics_status=0
wait "$metrics_pid" || metrics_status=$?
metrics_pid=
[ "$metrics_status" -eq 0 ] || fail "rocedpctl metrics --listen: exit status $metrics_status after SIGTERM"

# The same capture on a port with VLAN 7, priority 5, DSCP 26 and ECN (CNPs at DSCP 40, every
# 50 µs at most; these and the other DCQCN parameters shown in /rocedp/ports): its frames are untagged, so the port drops all 127 (rx_vlan_dropped)
# and the core sees none; what the daemon sends (its gratuitous ARP) leaves tagged with VLAN 7
# and priority 5.
sed 's|^    address: 198.18.0.11/24$|&\n    vlan: 7\n    vlan_priority: 5\n    dscp: 26\n    ecn: true\n    cnp_dscp: 40\n    dcqcn: {cnp_interval_us: 50}|' "$work/pcap.yaml" >"$work/vlan.yaml"
rm -f "$work/tx.pcap"
start_daemon "$work/vlan.yaml"
wait_for /rocedp/ports "d['rx_packets'] == [127] and d['rx_vlan_dropped'] == [127]"
[ "$(tel_get /rocedp/ports "d['vlan'] == [7] and d['vlan_priority'] == [5] and d['dscp'] == [26] and d['ecn'] == [1] and d['cnp_dscp'] == [40] and d['dcqcn_cnp_interval_us'] == [50] and d['dcqcn_time_reset_us'] == [300] and d['tx_vlan_dropped'] == [0]")" = True ] \
  || fail "/rocedp/ports with a VLAN: $(python3 "$tel" "$prefix" /rocedp/ports)"
[ "$(tel_get /rocedp/cores "d['rx_packets'] == [0]")" = True ] || fail "/rocedp/cores: the core saw frames of no VLAN"
stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM (VLAN)"
tags=$(tshark -r "$work/tx.pcap" -T fields -e vlan.id -e vlan.priority -e vlan.etype 2>/dev/null | sort | uniq -c | tr -s ' ')
[ -n "$tags" ] && ! grep -qv " 7	5	0x0806$" <<<"$tags" || fail "the daemon's frames on VLAN 7: $tags"
echo PASS

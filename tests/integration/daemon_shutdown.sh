#!/usr/bin/env bash
# SIGTERM and SIGINT: rocedpd stops the polling cores (channel), then the ports, frees the mempool,
# cleans up EAL, logs every step in that order and exits 0.
source "$(dirname "$0")/lib.sh"
need_root

steps=(signal_received shutdown_begin cores_stopped port_stopped core_joined port_closed mempool_freed
       eal_cleaned_up exit)

for sig in TERM INT; do
  write_pcap_config "$work/pcap.yaml"
  start_daemon "$work/pcap.yaml"
  wait_for /rocedp/cores "d['attached_queues'] == [1]"
  stop_daemon "$sig"
  [ "$daemon_status" -eq 0 ] || fail "SIG$sig: exit status $daemon_status"
  grep -q "event=signal_received signal=SIG$sig" "$work/daemon.log" || fail "SIG$sig: no signal_received line"
  # Each step logged, in order.
  last=0
  for step in "${steps[@]}"; do
    line=$(grep -n "event=$step\b" "$work/daemon.log" | head -1 | cut -d: -f1)
    [ -n "$line" ] || fail "SIG$sig: no log line for $step"
    [ "$line" -gt "$last" ] || fail "SIG$sig: $step logged out of order"
    last=$line
  done
  grep -q "event=mempool_freed mbufs=4095 were_free=4095" "$work/daemon.log" || fail "SIG$sig: mbufs not all back before the pool was freed"
  grep -q "event=exit status=0" "$work/daemon.log" || fail "SIG$sig: no exit line"
  [ ! -e "/var/run/dpdk/$prefix/dpdk_telemetry.v2" ] || fail "SIG$sig: telemetry socket left behind"
  rm -f "$work/daemon.log"
done
echo PASS

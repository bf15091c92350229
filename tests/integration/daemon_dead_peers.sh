#!/usr/bin/env bash
# Peers that go away without a DREQ must not hold a service's connections for ever. rocedpd (memif
# server) with an echo listener (idle_timeout_ms: 2000) and a memory listener (keepalive_ms: 100),
# and svc_client (memif client) holding one connection to each:
#   - alive and idle: the service disconnects the echo connection after its idle timeout (logged
#     why=idle_timeout, counted closed, not failed); the memory connection outlives 30 keepalives
#     (zero-length RDMA WRITEs the client's QP answers) and its QP shows them acknowledged;
#   - then svc_client is killed (SIGKILL: no DREQ, its memif end gone): the next keepalive's
#     retries run out and the service ends the memory connection (logged with
#     STATUS_IO_TIMEOUT, counted failed). Nothing stays open.
#   daemon_dead_peers.sh PATH/TO/svc_client
source "$(dirname "$0")/lib.sh"
need_root
client=${1:?usage: daemon_dead_peers.sh SVC_CLIENT}
client_pid=
client_prefix=rdp-it-dead-client-$$

on_exit() {
  local rc=$?
  if [ -n "$client_pid" ] && kill -0 "$client_pid" 2>/dev/null; then
    kill -KILL "$client_pid" 2>/dev/null || true
    wait "$client_pid" 2>/dev/null || true
  fi
  rm -rf "/var/run/dpdk/$client_prefix"
  if [ $rc -ne 0 ] && [ -f "$work/client.log" ]; then
    echo "---- client log ----" >&2
    tail -n 20 "$work/client.log" >&2
  fi
  exit_status=$rc
  cleanup
}
trap on_exit EXIT INT TERM

write_svc_configs 2 "$client_prefix" <<YAML
listeners:
  - {port: memif0, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 16, idle_timeout_ms: 2000}
  - {port: memif0, nd_port: 7001, service: memory, memory_bytes: 1048576, keepalive_ms: 100}
YAML

start_daemon "$work/server.yaml"
"$client" --config "$work/client.yaml" --server 198.18.2.1 --echo-port 7000 --memory-port 7001 \
  --hold "$work/never" > "$work/client.log" 2>&1 &
client_pid=$!
svc_client_ready "$client_pid" "$work/client.log"

# Alive and idle: the echo connection is disconnected after its idle timeout (the client's echoes
# came before READY), the memory connection stays.
wait_for /rocedp/connections "d['count'] == 1 and d['service'] == ['memory'] and d['state'] == ['established']"
grep -q "event=service_disconnecting service=echo .*why=idle_timeout" "$work/daemon.log" ||
  fail "the echo connection's idle disconnect was not logged"
memory_qpn=$(tel_get /rocedp/connections "d['qpn'][0]")
# 30 keepalives later (3 s), the memory connection is still there, its QP in RTS, its send PSN
# moved on by one per keepalive, and the client acknowledged them: no retry spent, nothing
# failed. (The idle client's core naps, so some ACKs come after the adaptive timer's early probe:
# those expiries spend no retry.)
psn0=$(tel_get /rocedp/qps "d['next_psn'][0]")
sleep 3
kill -0 "$client_pid" 2>/dev/null || fail "svc_client exited while holding"
wait_for /rocedp/connections "d['count'] == 1 and d['qpn'] == [$memory_qpn] and d['state'] == ['established']"
wait_for /rocedp/qps "d['count'] == 1 and d['state'] == ['RTS'] and d['retries_used'] == [0]"
wait_for /rocedp/listeners "d['failed'] == [0, 0] and d['closed'] == [1, 0] and d['accepted'] == [1, 1]"
sent=$(( ($(tel_get /rocedp/qps "d['next_psn'][0]") - psn0) & 0xFFFFFF ))
[ "$sent" -ge 20 ] || fail "the memory QP sent $sent keepalives in 3 s, at one per 100 ms"
wait_for /rocedp/qps "d['unacked_psn'] == d['next_psn'] or (d['next_psn'][0] - d['unacked_psn'][0]) % (1 << 24) == 1"
! grep -q "event=service_connection_failed" "$work/daemon.log" || fail "a live peer's connection was failed"

# Dead: no DREQ, no ACK. The next keepalive exhausts its retries (the client's local ACK timeout,
# 67 ms, times 8) and the service ends the connection.
kill -KILL "$client_pid"
wait "$client_pid" 2>/dev/null || true
client_pid=
wait_for /rocedp/connections "d['count'] == 0"
wait_for /rocedp/qps "d['count'] == 0"
wait_for /rocedp/listeners "d['failed'] == [0, 1] and d['closed'] == [1, 1] and d['connections'] == [0, 0]"
# The log names the peer and why its QP ended: the keepalive's retries ran out.
grep -Eq "event=service_connection_failed service=memory peer=198\.18\.2\.2:[0-9]+ qpn=$memory_qpn status=STATUS_IO_TIMEOUT qp_error=retry_exceeded" "$work/daemon.log" ||
  fail "the dead peer's memory connection was not failed with STATUS_IO_TIMEOUT: $(grep service_connection_failed "$work/daemon.log")"

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"
echo PASS

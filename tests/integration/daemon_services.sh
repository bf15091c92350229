#!/usr/bin/env bash
# rocedpd with an echo and a memory listener (memif server) and svc_client (memif client, its own
# EAL and runtime) in a second process: the client connects through the IB CM to both services
# and checks the bytes (echo byte-exact; WRITE then READ back through the memory region; a WRITE
# with immediate on the echo connection gets no echo, and the SEND after it its own); while
# it holds both connections the daemon's telemetry shows them (/rocedp/connections, /rocedp/qps);
# after the client disconnected and exited 0, /rocedp/listeners counts what happened to each
# connection: accepted and closed, then rejected (over max_connections) and failed (no QP left:
# limits.max_qps) for two rocedp-perf clients. SIGTERM ends the daemon with status 0.
#   daemon_services.sh PATH/TO/svc_client
source "$(dirname "$0")/lib.sh"
need_root
client=${1:?usage: daemon_services.sh SVC_CLIENT}
client_pid=
client_prefix=rdp-it-svc-client-$$

stop_client() {
  stop_pid "$client_pid" 30
  client_pid=
  rm -rf "/var/run/dpdk/$client_prefix"
}
on_exit() {
  local rc=$?
  stop_client
  if [ $rc -ne 0 ] && [ -f "$work/client.log" ]; then
    echo "---- client log ----" >&2
    tail -n 40 "$work/client.log" >&2
  fi
  # cleanup's status; (exit $rc) here would end the trap under set -e with the daemon running.
  exit_status=$rc
  cleanup
}
trap on_exit EXIT INT TERM

write_svc_configs 1 "$client_prefix" <<YAML
limits: {max_qps: 2}
listeners:
  - {port: memif0, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 16, max_connections: 1}
  - {port: memif0, nd_port: 7001, service: memory, memory_bytes: 1048576}
YAML

start_daemon "$work/server.yaml"
grep -q "event=service_listening.*nd_port=7000" "$work/daemon.log" || fail "echo listener not logged"
wait_for /rocedp/connections "d['count'] == 0"

"$client" --config "$work/client.yaml" --server 198.18.1.1 --echo-port 7000 --memory-port 7001 \
  --hold "$work/release" > "$work/client.log" 2>&1 &
client_pid=$!
svc_client_ready "$client_pid" "$work/client.log"
grep -q "echo 4096 bytes: ok" "$work/client.log" || fail "echo checks"
grep -q "memory write+read 65536 bytes: ok" "$work/client.log" || fail "memory checks"
grep -q "write with immediate on the echo connection: nothing echoed for it, ok" "$work/client.log" ||
  fail "write with immediate on the echo connection"

# Both connections, as the daemon's telemetry shows them: passive, established, one per service,
# from the client's address, each on an RTS QP whose peer is the client's QP.
wait_for /rocedp/connections "d['count'] == 2 and d['state'] == ['established'] * 2"
[ "$(tel_get /rocedp/connections "sorted(d['service']) == ['echo', 'memory'] and d['remote_ip'] == ['198.18.1.2'] * 2 and sorted(d['local_port']) == [7000, 7001] and d['role'] == ['passive'] * 2 and all(p >= 49152 for p in d['remote_port'])")" = True ] \
  || fail "/rocedp/connections: $(python3 "$tel" "$prefix" /rocedp/connections)"
wait_for /rocedp/qps "d['count'] == 2 and d['state'] == ['RTS'] * 2"
[ "$(python3 - "$tel" "$prefix" <<'PY'
import json, subprocess, sys
q = lambda c: json.loads(subprocess.check_output([sys.executable, sys.argv[1], sys.argv[2], c]))
conns, qps = q("/rocedp/connections"), q("/rocedp/qps")
# The same QPs in both views; the echo QP keeps its 16 receives posted.
ok = sorted(conns["qpn"]) == qps["qpn"] and sorted(conns["peer_qpn"]) == sorted(qps["peer_qpn"])
echo = conns["qpn"][conns["service"].index("echo")]
ok = ok and qps["rq_in_use"][qps["qpn"].index(echo)] == 16 and qps["rq_depth"][qps["qpn"].index(echo)] == 16
# Loss-recovery counters per QP are there (values depend on the run).
for k in ("retransmits", "timeouts", "naks_sent", "naks_received", "duplicates", "rnr_waits", "timeout_wait_us",
          "srtt_ns", "rto_us", "path_srtt_ns"):
    ok = ok and len(qps.get(k, [])) == 2
# A QP's RTT samples feed the estimate of the path to its peer.
ok = ok and all(p > 0 for s, p in zip(qps["srtt_ns"], qps["path_srtt_ns"]) if s > 0)
print(ok)
PY
)" = True ] || fail "/rocedp/qps: $(python3 "$tel" "$prefix" /rocedp/qps)"

# Let the client disconnect and finish; the daemon's services close their side.
touch "$work/release"
client_status=0
wait "$client_pid" || client_status=$?
client_pid=
rm -rf "/var/run/dpdk/$client_prefix"  # its runtime directory: EAL leaves it behind
[ "$client_status" -eq 0 ] || fail "svc_client exit status $client_status"
grep -q "^PASS" "$work/client.log" || fail "svc_client did not pass"
wait_for /rocedp/connections "d['count'] == 0"
wait_for /rocedp/qps "d['count'] == 0"
wait_for /rocedp/listeners "d['accepted'] == [1, 1] and d['closed'] == [1, 1] and d['rejected'] == [0, 0] and d['failed'] == [0, 0] and d['echo_messages'][0] >= 1 and d['echo_bytes'][0] >= 4096 and d['echo_messages'][1] == 0"
# The same, and the RC engine's traffic, as `rocedpctl metrics` shows them to Prometheus.
echoes=$(tel_get /rocedp/listeners "d['echo_messages'][0]")
echo_labels='port="memif0",nd_port="7000",service="echo"'
memory_labels='port="memif0",nd_port="7001",service="memory"'
"$bin_dir/rocedpctl" metrics --prefix "$prefix" | "$here/metrics_check.py" \
  "rocedp_listener_accepted_total{$echo_labels} == 1" "rocedp_listener_closed_total{$memory_labels} == 1" \
  "rocedp_listener_echo_messages_total{$echo_labels} == $echoes" \
  "rocedp_listener_connections{$echo_labels} == 0" "rocedp_listener_max_connections{$echo_labels} == 1" \
  'rocedp_rdma_rx_packets_total{port="memif0",core="0"} >= 1' \
  'rocedp_rdma_acks_sent_total{port="memif0",core="0"} >= 1' 'rocedp_qps == 0' \
  || fail "rocedpctl metrics after the clients"

# Connections the services cannot take, as /rocedp/listeners counts them: a second echo
# connection is over the listener's max_connections (1), so rejected; a third memory connection
# finds no QP left (limits.max_qps: 2), so its set-up fails (logged with its step) and the client
# gets a REJ. Each rocedp-perf client exits 1 (it connects its QPs together and closes the others
# when one is refused, so their accepts may fail too); nothing stays open.
perf=$bin_dir/rocedp-perf
sed -e "s/file_prefix: $client_prefix/file_prefix: $client_prefix-p/" "$work/client.yaml" > "$work/perf.yaml"
client_prefix=$client_prefix-p  # stop_client removes its runtime directory
for t in "7000 send bw -s 64 -n 10 -q 2" "7001 write bw -s 4096 -n 10 -q 3"; do
  # shellcheck disable=SC2086
  set -- $t
  port=$1
  shift
  st=0
  "$perf" --config "$work/perf.yaml" --connect "198.18.1.1:$port" --timeout 30 "$@" > "$work/perf-$port.log" 2>&1 || st=$?
  [ "$st" -eq 1 ] || { cat "$work/perf-$port.log" >&2; fail "rocedp-perf -> :$port $*: exit $st, expected 1"; }
  rm -rf "/var/run/dpdk/$client_prefix"
done
wait_for /rocedp/connections "d['count'] == 0"
wait_for /rocedp/listeners "d['connections'] == [0, 0] and d['rejected'][0] >= 1 and d['rejected'][1] == 0 and d['failed'][1] >= 1 and all(c >= a >= 1 for c, a in zip(d['closed'], d['accepted']))"
grep -q "event=service_setup_failed service=memory nd_port=7001 step=qp status=STATUS_INSUFFICIENT_RESOURCES" "$work/daemon.log" ||
  fail "the memory connection's failed set-up was not logged with its step"

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"
grep -q "event=connection_manager_detached" "$work/daemon.log" || fail "connection manager not detached at shutdown"
echo PASS

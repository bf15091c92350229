#!/usr/bin/env bash
# rocedpd's perftest service (memif server) against rocedp-perf --perftest -R clients in a second
# process (memif client), perftest's rdma_cm exchange and every test the service serves: WRITE,
# READ and atomic bandwidth (the client's report reaches the daemon's log), SEND bandwidth into
# the sink (its messages counted), READ and atomic latency, SEND latency against the listener
# with `sends: echo`, and WRITE latency against the one with `writes: echo` (the daemon writes
# first and answers every WRITE); with one QP and with several. Then a client that breaks perftest's
# exchange is refused and its session ends, and a client killed (SIGKILL) in the middle of its run
# is found by the control connection's keepalive, which ends its data connections with it.
# /rocedp/listeners counts the sessions, the reports, the SENDs taken, and every connection
# closed. SIGTERM ends the daemon with status 0.
# (The live test against Linux's perftest is tests/interop/perftest.sh's `daemon` case.)
source "$(dirname "$0")/lib.sh"
need_root
client_prefix=rdp-it-perftest-client-$$
perf=$bin_dir/rocedp-perf
perf_pid=

on_exit() {
  local rc=$?
  if [ -n "$perf_pid" ] && kill -0 "$perf_pid" 2>/dev/null; then
    kill -TERM "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
  fi
  rm -rf "/var/run/dpdk/$client_prefix"
  exit_status=$rc
  cleanup
}
trap on_exit EXIT INT TERM

write_svc_configs 1 "$client_prefix" <<YAML
listeners:
  - {port: memif0, nd_port: 7002, service: perftest, memory_bytes: 1048576, message_bytes: 65536, queue_depth: 64, keepalive_ms: 200, tcp_exchange: 127.0.0.1}
  - {port: memif0, nd_port: 7003, service: perftest, sends: echo, message_bytes: 4096, queue_depth: 16, tcp_exchange: 127.0.0.1}
  - {port: memif0, nd_port: 7004, service: perftest, writes: echo, message_bytes: 4096, queue_depth: 4, tcp_exchange: 127.0.0.1}
YAML

start_daemon "$work/server.yaml"
grep -q "event=service_listening.*service=perftest nd_port=7002" "$work/daemon.log" || fail "perftest listener not logged"
grep -q "event=service_listening_tcp .*tcp_exchange=127.0.0.1:7002" "$work/daemon.log" || fail "perftest's TCP exchange not logged"

# run_client NAME PERFTEST_ARGS...: one rocedp-perf --perftest -R client; must exit 0.
run_client() {
  local name=$1 st=0
  shift
  "$perf" --perftest 198.18.1.1 --config "$work/client.yaml" --timeout 60 -R "$@" > "$work/$name.log" 2>&1 &
  perf_pid=$!
  wait "$perf_pid" || st=$?
  perf_pid=
  rm -rf "/var/run/dpdk/$client_prefix"
  [ "$st" -eq 0 ] || { cat "$work/$name.log" >&2; fail "$name: rocedp-perf exit $st"; }
}
# kill_during_run NAME HOST WAIT_PATH WAIT_EXPR PERFTEST_ARGS...: a WRITE bandwidth client of 30 s,
# killed (SIGKILL) a second after WAIT_PATH's telemetry shows WAIT_EXPR (its run is under way).
kill_during_run() {
  local name=$1 host=$2 path=$3 expr=$4
  shift 4
  "$perf" --perftest "$host" --config "$work/client.yaml" --timeout 60 "$@" write bw -s 4096 -D 30 -q 2 > "$work/$name.log" 2>&1 &
  perf_pid=$!
  wait_for "$path" "$expr"
  sleep 1
  kill -KILL "$perf_pid"
  wait "$perf_pid" 2>/dev/null || true
  perf_pid=
  rm -rf "/var/run/dpdk/$client_prefix"
}
# row_count NAME: the rows of results a client printed (perftest's table: lines of numbers).
row_count() { grep -cE '^ +[0-9]+ +[0-9]+ +[0-9.]+' "$work/$1.log" || true; }

run_client write_bw -p 7002 write bw -s 4096 -n 2000
run_client write_bw_q4 -p 7002 write bw -s 65536 -n 200 -q 4
run_client read_bw -p 7002 read bw -s 8192 -n 1000 -q 2
run_client atomic_bw -p 7002 atomic bw -n 1000
run_client send_bw -p 7002 send bw -s 1024 -n 3000 -q 2
run_client read_lat -p 7002 read lat -s 64 -n 500
run_client atomic_lat -p 7002 atomic lat -n 500
run_client send_lat -p 7003 send lat -s 256 -n 500
# WRITE latency: 64 bytes 500 times, then 4096 bytes (the daemon's first WRITE's length) 300 times.
run_client write_lat -p 7004 write lat -s 64 -n 500
run_client write_lat_4k -p 7004 write lat -s 4096 -n 300
for t in write_bw write_bw_q4 read_bw atomic_bw send_bw read_lat atomic_lat send_lat write_lat write_lat_4k; do
  [ "$(row_count "$t")" -ge 1 ] || { cat "$work/$t.log" >&2; fail "$t: no result row"; }
done

# The WRITE/READ/atomic bandwidth clients' reports, as the daemon logged them.
[ "$(grep -c "event=perftest_report" "$work/daemon.log")" -eq 4 ] || fail "perftest reports: $(grep perftest_report "$work/daemon.log")"
grep -q "event=perftest_report .*size=4096 iterations=2000" "$work/daemon.log" || fail "the 4096-byte WRITE report"
# Every session and connection closed; SEND bandwidth: 3000 x 2 QPs of 1024 bytes taken.
wait_for /rocedp/connections "d['count'] == 0"
# WRITE latency: every WRITE of the client's landed (received) and was answered (echo).
wait_for /rocedp/listeners "d['service'] == ['perftest'] * 3 and d['sessions'] == [7, 1, 2] and d['reports'] == [4, 0, 0] and d['received_messages'] == [6000, 0, 800] and d['received_bytes'] == [6144000, 0, 500 * 64 + 300 * 4096] and d['echo_messages'] == [0, 500, 800] and d['echo_bytes'] == [0, 500 * 256, 500 * 64 + 300 * 4096] and d['failed'] == [0, 0, 0] and d['connections'] == [0, 0, 0] and all(a == c for a, c in zip(d['accepted'], d['closed']))"
# 7 sessions on 7002: 1 + 4 + 2 + 1 + 2 + 1 + 1 data connections and a control each.
[ "$(tel_get /rocedp/listeners "d['accepted']")" = "[19, 2, 4]" ] || fail "accepted: $(tel_get /rocedp/listeners "d['accepted']")"

# A client that skips perftest's exchange (rocedp-perf's own WRITE test through the CM: its first
# message to a perftest control connection is not one of perftest's) is refused: the session ends
# and the client fails.
st=0
"$perf" --config "$work/client.yaml" --connect 198.18.1.1:7003 --timeout 20 send bw -s 40 -n 10 > "$work/other.log" 2>&1 || st=$?
rm -rf "/var/run/dpdk/$client_prefix"
[ "$st" -ne 0 ] || fail "a client outside perftest's exchange succeeded"
grep -q 'event=perftest_refused .*why="a message of 40 bytes"' "$work/daemon.log" || fail "the refusal was not logged"
wait_for /rocedp/connections "d['count'] == 0"
wait_for /rocedp/listeners "d['connections'] == [0, 0, 0] and d['sessions'][1] == 2"

# A client killed during its run (WRITE bandwidth for 30 s, 2 QPs): nothing tells the service but
# its control connection's keepalive (every 200 ms), whose retries run out; the session's two data
# connections end with it. Counted: the control connection failed, the data connections closed.
kill_during_run killed 198.18.1.1 /rocedp/connections "d['count'] == 3 and d['state'] == ['established'] * 3" -R -p 7002
for _ in $(seq 300); do  # the keepalive's retries: a few seconds
  [ "$(tel_get /rocedp/connections "d['count']")" = 0 ] && break
  sleep 0.1
done
wait_for /rocedp/connections "d['count'] == 0"
wait_for /rocedp/qps "d['count'] == 0"
wait_for /rocedp/listeners "d['connections'] == [0, 0, 0] and d['sessions'][0] == 8 and d['failed'][0] == 1 and d['accepted'][0] == 22 and d['closed'][0] == 22"
grep -q "event=service_connection_failed service=perftest .*status=STATUS_IO_TIMEOUT" "$work/daemon.log" ||
  fail "the killed client's control connection did not fail on its keepalive"

# Clients without -R: perftest's exchange over TCP (127.0.0.1, the listeners' tcp_exchange), the
# data QPs connected out of band to the keys' GIDs; no control connection, the exchange's end
# ends the session. Counted from here on (each listener's totals so far: before).
before=$(tel_get /rocedp/listeners "[d['sessions'], d['accepted'], d['received_messages'], d['echo_messages'], d['reports']]")
run_tcp_client() {
  local name=$1 st=0
  shift
  "$perf" --perftest 127.0.0.1 --config "$work/client.yaml" --timeout 60 "$@" > "$work/$name.log" 2>&1 &
  perf_pid=$!
  wait "$perf_pid" || st=$?
  perf_pid=
  rm -rf "/var/run/dpdk/$client_prefix"
  [ "$st" -eq 0 ] || { cat "$work/$name.log" >&2; tail -20 "$work/daemon.log" >&2; fail "$name: rocedp-perf exit $st"; }
  [ "$(row_count "$name")" -ge 1 ] || { cat "$work/$name.log" >&2; fail "$name: no result row"; }
}
run_tcp_client tcp_write_bw -p 7002 write bw -s 4096 -n 2000
run_tcp_client tcp_read_bw -p 7002 read bw -s 8192 -n 1000 -q 2
run_tcp_client tcp_send_bw -p 7002 send bw -s 1024 -n 3000 -q 2
run_tcp_client tcp_atomic_lat -p 7002 atomic lat -n 200
run_tcp_client tcp_send_lat -p 7003 send lat -s 256 -n 500
run_tcp_client tcp_write_lat -p 7004 write lat -s 64 -n 500
grep -q "event=perftest_report .*size=8192 iterations=1000" "$work/daemon.log" || fail "the TCP READ client's report"
wait_for /rocedp/connections "d['count'] == 0"
wait_for /rocedp/qps "d['count'] == 0"
# 4 sessions on 7002 (1 + 2 + 2 + 1 data QPs), one each on 7003 and 7004; the SEND sink took
# 2 x 3000, the echo answered 500, the WRITE echo took and answered 500; two reports (WRITE, READ).
after=$(tel_get /rocedp/listeners "[d['sessions'], d['accepted'], d['received_messages'], d['echo_messages'], d['reports']]")
python3 - "$before" "$after" <<'PY' || fail "TCP sessions: before $before, after $after"
import ast, sys
b, a = (ast.literal_eval(x) for x in sys.argv[1:3])
delta = [[y - x for x, y in zip(rb, ra)] for rb, ra in zip(b, a)]
want = [[4, 1, 1], [6, 1, 1], [6000, 0, 500], [0, 500, 500], [2, 0, 0]]
assert delta == want, (delta, want)
PY
wait_for /rocedp/listeners "d['connections'] == [0, 0, 0] and d['failed'] == [1, 1, 0]"
# A TCP client that is not perftest (version 1.00) is refused: no answer, the exchange closes.
python3 - <<'PY' || fail "the TCP exchange answered a client below perftest 5.70"
import socket
s = socket.create_connection(("127.0.0.1", 7002), timeout=10)
s.sendall(b"1.00".ljust(16, b"\0"))
assert s.recv(64) == b"", "a reply"
PY
grep -q 'event=perftest_refused peer=127.0.0.1 why="perftest version 1.00 (older than 5.70)"' "$work/daemon.log" ||
  fail "the TCP client's refusal was not logged"
# A TCP client that connects and stays silent: its set-up must finish within 10 s, or the daemon
# closes the exchange.
python3 - <<'PY' || fail "a silent TCP client was not let go"
import socket, time
s = socket.create_connection(("127.0.0.1", 7003), timeout=30)
t0 = time.monotonic()
assert s.recv(64) == b"", "a reply"
assert 9 <= time.monotonic() - t0 <= 20, time.monotonic() - t0
PY
grep -q 'event=perftest_refused peer=127.0.0.1 why="no set-up within 10 s"' "$work/daemon.log" ||
  fail "the silent TCP client's end was not logged"
# A TCP client killed during its run (WRITE bandwidth for 30 s, 2 QPs): its socket closes with it,
# which ends the session and both data connections (closed, not failed), at once.
kill_during_run tcp_killed 127.0.0.1 /rocedp/qps "d['count'] == 2" -p 7002
wait_for /rocedp/listeners "d['connections'] == [0, 0, 0] and d['failed'] == [1, 1, 0]"
wait_for /rocedp/qps "d['count'] == 0"

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"
echo PASS

#!/usr/bin/env bash
# rocedpd's listeners change with a reload (SIGHUP) while it serves: rocedp-perf clients (memif
# client, their own EAL) through the IB CM, every echo compared byte for byte.
#  1. Listeners echo 7000 and memory 7001. A SEND ping-pong on 7000 runs 6 s; 1 s into it a
#     reload drops 7001 and adds echo 7002. The run ends with exit 0 (its connection is kept and
#     echoes on; --verify needs a message count, so the echoes' bytes are checked by the next
#     client of 7000), 7002 serves, 7001 refuses (CONNECTION_REFUSED), /rocedp/listeners shows 7000 and
#     7002 and the log counts one listener started and one stopped.
#  2. A reload that changes 7000's entry (its queue depth) while a client runs on it: the daemon
#     ends that connection (the client: exit 1, the peer disconnected) and the
#     new listener on 7000 serves the next client.
#  3. A reload of an invalid file changes nothing: logged reload_failed, both listeners serve.
#  4. A daemon started without listeners (no adapter, no connection manager: a client's REQ goes
#     unanswered until its time limit) opens both at the reload that lists its first listener,
#     which then serves.
# SIGTERM ends the daemon with status 0.
source "$(dirname "$0")/lib.sh"
need_root
perf=$bin_dir/rocedp-perf
client_prefix=rdp-it-reload-client-$$
client_pid=
on_exit() {
  local rc=$?
  stop_pid "$client_pid" 30
  rm -rf "/var/run/dpdk/$client_prefix"
  exit_status=$rc
  cleanup
}
trap on_exit EXIT INT TERM

write_svc_configs 3 "$client_prefix" <<YAML
listeners:
  - {port: memif0, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 16}
  - {port: memif0, nd_port: 7001, service: memory, memory_bytes: 1048576}
YAML
start_daemon "$work/server.yaml"

n=0
# client EXPECT PORT ARGS...: a rocedp-perf client run in the foreground (log $work/cN.log).
client() {
  local expect=$1 port=$2 rc=0
  shift 2
  n=$((n + 1))
  "$perf" --config "$work/client.yaml" --connect "198.18.3.1:$port" --timeout 30 "$@" > "$work/c$n.log" 2>&1 || rc=$?
  rm -rf "/var/run/dpdk/$client_prefix"
  echo "client $n: :$port $* -> $rc"
  [ "$rc" -eq "$expect" ] || { cat "$work/c$n.log" >&2; fail "client $n (:$port $*): exit $rc, expected $expect"; }
}
# background PORT ARGS...: the same client in the background, once connected (PID in client_pid).
background() {
  local port=$1
  shift
  n=$((n + 1))
  bg_log=$work/c$n.log
  local before
  before=$(grep -c "event=service_connected" "$work/daemon.log" || true)
  "$perf" --config "$work/client.yaml" --connect "198.18.3.1:$port" --timeout 30 "$@" > "$bg_log" 2>&1 &
  client_pid=$!
  # The daemon logs each connection it accepted.
  for _ in $(seq 300); do
    [ "$(grep -c "event=service_connected" "$work/daemon.log" || true)" -gt "$before" ] && return 0
    kill -0 "$client_pid" 2>/dev/null || { cat "$bg_log" >&2; fail "the background client ended before it connected"; }
    sleep 0.1
  done
  fail "the background client did not connect"
}
# reap_background EXPECT: waits for it; fails unless it exits EXPECT.
reap_background() {
  local rc=0
  wait "$client_pid" || rc=$?
  client_pid=
  rm -rf "/var/run/dpdk/$client_prefix"
  echo "client $n (background) -> $rc"
  [ "$rc" -eq "$1" ] || { cat "$bg_log" >&2; fail "background client: exit $rc, expected $1"; }
}
# reload FILE_CONTENT: writes the daemon's configuration and sends SIGHUP; waits for the reload's
# end (its reload_done or reload_failed line, the Nth of them).
reloads=0
reload() {
  printf '%s\n' "$1" > "$work/server.yaml"
  reloads=$((reloads + 1))
  kill -HUP "$daemon_pid"
  for _ in $(seq 100); do
    [ "$(grep -c "event=reload_done\|event=reload_failed" "$work/daemon.log")" -ge "$reloads" ] && return 0
    sleep 0.1
  done
  fail "reload $reloads did not finish"
}
original=$(cat "$work/server.yaml")
echo7000='  - {port: memif0, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 16}'
memory7001='  - {port: memif0, nd_port: 7001, service: memory, memory_bytes: 1048576}'
echo7002='  - {port: memif0, nd_port: 7002, service: echo, message_bytes: 4096, queue_depth: 16}'

# 1. A listener leaves and one comes while a client runs on a third.
background 7000 send lat -s 1000 -D 6
sleep 1
reload "${original/"$memory7001"/"$echo7002"}"
kill -0 "$client_pid" 2>/dev/null || fail "the client on the kept listener ended before the reload did"
grep -q "event=listeners_reloaded started=1 stopped=1 listeners=2" "$work/daemon.log" ||
  fail "the reload did not start one listener and stop one"
grep -q "event=reload_done restart_needed=false" "$work/daemon.log" || fail "reload 1 asked for a restart"
wait_for /rocedp/listeners "d['nd_port'] == [7000, 7002] and d['service'] == ['echo', 'echo']"
reap_background 0
client 0 7000 send lat -s 1000 -n 200 --verify
client 0 7002 send lat -s 300 -n 200 --verify
client 1 7001 write bw -n 10
grep -q "connect 0: STATUS_CONNECTION_REFUSED" "$work/c$n.log" || fail "the dropped listener did not refuse"

# 2. A changed entry is another listener: its connection ends, the new one serves.
background 7000 send lat -s 200 -D 20
changed="${original/"$memory7001"/"$echo7002"}"
reload "${changed/"queue_depth: 16}"/"queue_depth: 32}"}"
grep -q "event=listeners_reloaded started=1 stopped=1 listeners=2" <(grep "event=listeners_reloaded" "$work/daemon.log" | tail -n 1) ||
  fail "the changed listener was not stopped and started again"
reap_background 1
grep -q "the peer disconnected" "$bg_log" || fail "the client did not see the changed listener end its connection"
client 0 7000 send bw -s 4096 -n 200 -t 32 --verify

# 3. An invalid file changes nothing.
reload "${changed}
  - {port: memif0, nd_port: 7003, service: nonsense}"
grep -q "event=reload_failed" "$work/daemon.log" || fail "the invalid file was not reported"
wait_for /rocedp/listeners "d['nd_port'] == [7000, 7002]"
client 0 7002 send lat -s 64 -n 100 --verify

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"

# 4. A daemon started without listeners (a plain data plane: no adapter, no connection manager)
# opens them at the reload that brings its first listener.
# A socket of its own: nothing of the first daemon's link can meet it.
original=${original//memif.sock/memif2.sock}
printf '%s\n' "${original%%listeners:*}" > "$work/server.yaml"
sed -i -e 's/memif.sock/memif2.sock/' "$work/client.yaml"
start_daemon "$work/server.yaml"
reloads=0
# Nothing answers its REQ: the client gives up at its time limit (exit 3) and closes its connector
# while the Connect is still pending (the Connect's completion once wrote into freed memory then).
rc=0
"$perf" --config "$work/client.yaml" --connect 198.18.3.1:7000 --timeout 3 send lat -n 10 > "$work/none.log" 2>&1 || rc=$?
rm -rf "/var/run/dpdk/$client_prefix"
[ "$rc" -eq 3 ] || { cat "$work/none.log" >&2; fail "a client of the daemon without listeners: exit $rc, expected 3"; }
grep -q "connect 0: STATUS_IO_TIMEOUT" "$work/none.log" || fail "the unanswered connect was not reported"
reload "${original/"$memory7001"/}"
grep -q "event=adapters_opened_for_listeners ports=1" "$work/daemon.log" || fail "no adapter opened at the reload"
grep -q "event=listeners_reloaded started=1 stopped=0 listeners=1" "$work/daemon.log" ||
  fail "the first listener did not start"
client 0 7000 send lat -s 500 -n 200 --verify
stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM (second daemon)"
grep -q "event=connection_manager_detached" "$work/daemon.log" || fail "the late connection manager was not detached at shutdown"
echo PASS

#!/usr/bin/env bash
# rocedp-perf through the IB CM over net_memif, no out-of-band exchange:
#   daemon: rocedpd (memif server) serves echo (ND port 7000) and memory (7001); rocedp-perf
#           --connect (memif client) runs WRITE/READ bw+lat against the memory region and SEND
#           bw+lat against the echo, each with --verify (WRITE is read back, READ reads a pattern
#           written first, echoes are compared byte for byte), then the wrong-service errors.
#   listen: rocedp-perf --listen (memif server) and rocedp-perf --connect (memif client): every
#           test with --verify, -q connections, and a deliberate pattern mismatch that the
#           listener must report.
#   ops:    rocedp-perf --ops-check -s and -c (immediate data, a memory window, a solicited SEND,
#           SEND with Invalidate, a WRITE through the invalidated window that the server must
#           refuse), again with a fast-registered region for the window, then a client with no
#           server to reach, which must fail.
# Every process is stopped by PID and every file removed on any exit. Exit 77 = skipped.
#   cm:     rocedp-perf --cm-check -s and -c: connections that do not come about. A consumer's
#           reject with private data both ways, an accept abandoned before the RTU
#           (CompleteConnectEx: STATUS_CONNECTION_ABORTED), a client that gives up on a silent
#           server, an accept late enough for the client's REQ to come again (the server's MRA),
#           no listener on the port; and a wrong expected REJ data, which must fail.
#   perf_cm.sh daemon|listen|ops|cm
set -euo pipefail
group=${1:?group}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../scripts/lib/stop_pid.sh"
bin_dir=${ROCEDP_BIN_DIR:-$here/../../build/bin}
perf=$bin_dir/rocedp-perf
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (EAL runtime directory)"; exit 77; }
[ -x "$perf" ] || { echo "FAIL: $perf not built" >&2; exit 1; }

work=$(mktemp -d /tmp/rocedp-perf-cm.XXXXXX)
prefix=rdp-pcm-$$
pids=()
n=0
cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do stop_pid "$pid" 30; done
  if [ $rc -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "---- $f"; tail -n 30 "$f"; } >&2; done
  fi
  rm -rf "$work" /var/run/dpdk/$prefix-*
  exit $rc
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

bw_header=' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]'
lat_header=' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]'
# expect_row LOG SIZE ITERS: the table has the row.
expect_row() { grep -Eq "^ $2 +$3 " "$1" || { cat "$1" >&2; fail "no row '$2 $3' in $1"; }; }

# memif_pair MODE 'SERVER_ARGS' 'CLIENT_ARGS': rocedp-perf MODE -s (the memif server, 198.18.9.1)
# in the background and MODE -c -a 198.18.9.1 (the memif client) to its end, both with a 30 s time
# limit that ARGS may override; exit statuses in SRC and CRC, logs in s.log and c.log.
memif_pair() {
  local mode=$1 sargs=$2 cargs=$3 sock=$work/memif$n.sock
  # shellcheck disable=SC2086
  "$perf" $mode -s --timeout 30 $sargs --port-devargs "net_memif0,role=server,socket=$sock,socket-abstract=no" \
    --ip 198.18.9.1/24 --mac 02:00:00:00:09:01 --lcore 0 --file-prefix $prefix-s --memory-mb 256 > "$work/s.log" 2>&1 &
  local sp=$!
  pids=("$sp")
  CRC=0 SRC=0
  # The server listens once the memif link is up, so the client starts at once: it waits for the
  # socket, and tries again while the server does not listen yet.
  # shellcheck disable=SC2086
  "$perf" $mode -c -a 198.18.9.1 --timeout 30 $cargs --port-devargs "net_memif0,role=client,socket=$sock,socket-abstract=no" \
    --ip 198.18.9.2/24 --mac 02:00:00:00:09:02 --lcore 1 --file-prefix $prefix-c --memory-mb 256 > "$work/c.log" 2>&1 || CRC=$?
  wait "$sp" || SRC=$?
  pids=()
  n=$((n + 1))
}

case $group in
daemon)
  sock=$work/memif.sock
  cat > "$work/daemon.yaml" <<YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $prefix-d, extra_args: ["--no-pci"]}
ports:
  - name: memif0
    devargs: net_memif0,role=server,socket=$sock,socket-abstract=no
    mac: "02:00:00:00:01:01"
    address: 198.18.1.1/24
    neighbours: [{ip: 198.18.1.2, mac: "02:00:00:00:01:02"}]
dataplane: {lcores: [1], mbuf_count: 8191}
telemetry: {enabled: false}
listeners:
  - {port: memif0, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 64}
  - {port: memif0, nd_port: 7001, service: memory, memory_bytes: 1048576}
  - {port: memif0, nd_port: 7004, service: echo, message_bytes: 4096, queue_depth: 16, receive_delay_ms: 300}
  - {port: memif0, nd_port: 7005, service: echo, message_bytes: 256, queue_depth: 8, disconnect_after: 50}
YAML
  # The client's polling runs inline on lcore 0; the daemon polls on lcore 1.
  cat > "$work/client.yaml" <<YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $prefix-c, extra_args: ["--no-pci"]}
ports:
  - name: memif0
    devargs: net_memif0,role=client,socket=$sock,socket-abstract=no
    mac: "02:00:00:00:01:02"
    address: 198.18.1.2/24
    neighbours: [{ip: 198.18.1.1, mac: "02:00:00:00:01:01"}]
dataplane: {lcores: [1], mbuf_count: 8191}
YAML
  "$bin_dir/rocedpd" --config "$work/daemon.yaml" > "$work/daemon.log" 2>&1 &
  daemon=$!
  pids+=("$daemon")
  for _ in $(seq 300); do
    grep -q "event=running" "$work/daemon.log" 2>/dev/null && break
    kill -0 "$daemon" 2>/dev/null || fail "rocedpd exited during start-up"
    sleep 0.1
  done
  grep -q "event=running" "$work/daemon.log" || fail "rocedpd did not come up"
  # run EXPECT PORT ARGS...: one client run against the daemon; its output in $work/c$n.log.
  run() {
    local expect=$1 port=$2; shift 2
    n=$((n + 1))
    local rc=0
    "$perf" --config "$work/client.yaml" --connect 198.18.1.1:"$port" --timeout 40 "$@" > "$work/c$n.log" 2>&1 || rc=$?
    echo "case $n: --connect :$port $* -> $rc"
    [ "$rc" -eq "$expect" ] || { cat "$work/c$n.log" >&2; fail "exit $rc, expected $expect: $*"; }
  }
  run 0 7001 write bw -s 4096 -n 64 -q 2 --verify
  grep -qxF "$bw_header" "$work/c$n.log" || fail "bw header"
  grep -q "Connections     : 2 through the IB CM to 198.18.1.1:7001 (rocedpd memory service)" "$work/c$n.log" || fail "target line"
  expect_row "$work/c$n.log" 4096 128
  grep -q "verify: 128 messages of 4096 bytes checked byte for byte" "$work/c$n.log" || fail "write verify"
  run 0 7001 read bw -s 3000 -n 100 -q 3 --verify
  expect_row "$work/c$n.log" 3000 300
  run 0 7001 write lat -s 64 -n 200 --verify
  grep -qxF "$lat_header" "$work/c$n.log" || fail "lat header"
  grep -q "WRITE latency   : completion of each WRITE" "$work/c$n.log" || fail "passive write latency not said"
  expect_row "$work/c$n.log" 64 200
  run 0 7001 read lat -s 1025 -n 200 --verify
  expect_row "$work/c$n.log" 1025 200
  run 0 7000 send bw -s 1500 -n 500 -q 2 --verify
  grep -q "(rocedpd echo service)" "$work/c$n.log" || fail "echo target line"
  expect_row "$work/c$n.log" 1500 1000
  grep -q "verify: 1000 messages of 1500 bytes" "$work/c$n.log" || fail "echo verify"
  run 0 7000 send lat -s 100 -n 300 --verify
  expect_row "$work/c$n.log" 100 300
  # The echo runs on the daemon's polling core (CQ notification): many echoes over 4 connections
  # with the window at the service's queue depth, every byte compared, and 1-byte messages.
  run 0 7000 send bw -s 4096 -n 500 -q 4 -t 64 --verify
  expect_row "$work/c$n.log" 4096 2000
  grep -q "verify: 2000 messages of 4096 bytes" "$work/c$n.log" || fail "echo verify (4 connections)"
  run 0 7000 send lat -s 1 -n 300 --verify
  expect_row "$work/c$n.log" 1 300
  # Receives posted 300 ms after the connection (the control thread posts, then hands the queues
  # to the core): the first SEND meets RNR NAKs and still comes back byte-exact.
  run 0 7004 send lat -s 4096 -n 200 --verify
  expect_row "$work/c$n.log" 4096 200
  # disconnect_after 50: the core counts the echoes, the control thread sends the DREQ after the
  # 50th. The client asks for far more, so the service (not the client) always ends the
  # connection: the client's run stops with an error, never with a byte mismatch.
  run 1 7005 send lat -s 200 -n 100000 --verify
  grep -q "completion error\|disconnected\|DISCONNECTED" "$work/c$n.log" || fail "disconnect_after: the client did not see the service end the connection"
  if grep -qi "differ\|mismatch" "$work/c$n.log"; then fail "disconnect_after: bytes differ"; fi
  # The wrong service for the operation, and a port nobody listens on.
  run 1 7000 write bw -n 10
  grep -q "an echo service (no memory region): use send" "$work/c$n.log" || fail "write to echo not refused"
  run 1 7001 send bw -n 10
  grep -q "a memory service (no receives): use write or read" "$work/c$n.log" || fail "send to memory not refused"
  run 1 7002 send lat -n 10
  grep -q "connect 0: STATUS_CONNECTION_REFUSED" "$work/c$n.log" || fail "no listener not reported"
  # Every connection was closed again; SIGTERM ends the daemon with status 0.
  kill -TERM "$daemon"
  status=0
  wait "$daemon" || status=$?
  pids=()
  [ "$status" -eq 0 ] || fail "rocedpd exit status $status"
  accepted=$(grep -c "event=service_connected" "$work/daemon.log" || true)
  closed=$(grep -c "event=service_disconnected" "$work/daemon.log" || true)
  [ "$accepted" -eq 19 ] || fail "rocedpd accepted $accepted connections, expected 19"
  echoes_dreq=$(grep -c "event=service_disconnected by=service" "$work/daemon.log" || true)
  [ "$echoes_dreq" -eq 1 ] || fail "disconnect_after: rocedpd sent $echoes_dreq DREQs, expected 1"
  # (disconnect_after's connection may log twice: the service's DREQ and the DisconnectEvent)
  [ "$closed" -ge "$accepted" ] || fail "$accepted connections accepted, $closed disconnected"
  ;;
listen)
  # pair EXPECT_CLIENT EXPECT_LISTENER CLIENT_ARGS...: a listener (memif server) and a client.
  pair() {
    local ec=$1 es=$2; shift 2
    n=$((n + 1))
    local sock=$work/memif$n.sock common="--timeout 40 --memory-mb 256"
    # shellcheck disable=SC2086
    "$perf" --listen 9000 --port-devargs "net_memif0,role=server,socket=$sock,socket-abstract=no" --ip 198.18.9.1/24 \
      --mac 02:00:00:00:09:01 --lcore 0 --file-prefix $prefix-s$n $common > "$work/s$n.log" 2>&1 &
    local sp=$!
    pids=("$sp")
    for _ in $(seq 300); do
      grep -q "listening on" "$work/s$n.log" 2>/dev/null && break
      kill -0 "$sp" 2>/dev/null || fail "listener exited during start-up"
      sleep 0.1
    done
    local crc=0 src=0
    # shellcheck disable=SC2086
    "$perf" --connect 198.18.9.1:9000 --port-devargs "net_memif0,role=client,socket=$sock,socket-abstract=no" \
      --ip 198.18.9.2/24 --mac 02:00:00:00:09:02 --lcore 1 --file-prefix $prefix-c$n $common "$@" > "$work/c$n.log" 2>&1 || crc=$?
    wait "$sp" || src=$?
    pids=()
    echo "case $n: $* -> client $crc, listener $src"
    [ "$crc" -eq "$ec" ] || fail "client exit $crc, expected $ec: $*"
    [ "$src" -eq "$es" ] || fail "listener exit $src, expected $es: $*"
  }
  pair 0 0 write bw -s 3000 -n 300 -q 4 --verify
  grep -q "(rocedp-perf --listen)" "$work/c$n.log" || fail "target line"
  grep -q "4 connection(s) accepted: write bw, passive region" "$work/s$n.log" || fail "listener accept line"
  expect_row "$work/c$n.log" 3000 1200
  pair 0 0 read bw -s 3000 -n 300 -q 2 --verify
  expect_row "$work/c$n.log" 3000 600
  pair 0 0 write lat -s 1025 -n 300 --verify
  grep -q "300 written back, verify: every byte as sent" "$work/s$n.log" || fail "write ping-pong"
  expect_row "$work/c$n.log" 1025 300
  pair 0 0 read lat -s 2048 -n 300 --verify
  expect_row "$work/c$n.log" 2048 300
  pair 0 0 send bw -s 1500 -n 400 -q 3 --verify
  grep -q "1200 messages received, 0 echoed, 0 written back, verify: every byte as sent" "$work/s$n.log" || fail "sink"
  expect_row "$work/c$n.log" 1500 1200
  pair 0 0 send lat -s 100 -n 300 --verify
  grep -q "300 messages received, 300 echoed" "$work/s$n.log" || fail "echo"
  expect_row "$work/c$n.log" 100 300
  # The check must be able to fail: the client fills its messages with another pattern.
  pair 0 1 send bw -s 1000 -n 50 --verify-seed 7
  grep -q "verify: 50000 bytes differ" "$work/s$n.log" || fail "mismatch not reported"
  ;;
ops)
  # ops_pair [SERVER_ARGS...]: a server and a client; both must hold every check.
  ops_pair() {
    memif_pair --ops-check "$*" ""
    [ "$CRC" -eq 0 ] && [ "$SRC" -eq 0 ] || fail "ops-check $*: client exit $CRC, server exit $SRC"
    grep -q "server: every check held" "$work/s.log" || fail "ops-check $*: the server's line"
    grep -q "RDMA WRITE through the invalidated window: STATUS_ACCESS_VIOLATION" "$work/c.log" || fail "ops-check $*: the refused WRITE"
    grep -q "client: every check held" "$work/c.log" || fail "ops-check $*: the client's line"
  }
  ops_pair
  ops_pair --fast-register
  grep -q "fast-register the window: STATUS_SUCCESS" "$work/s.log" || fail "ops-check --fast-register: no FastRegister"
  # No server: the memif link never comes up, so the client must fail within its time limit
  # (exit 3), not hang.
  crc=0
  # shellcheck disable=SC2086
  "$perf" --ops-check -c -a 198.18.9.1 --port-devargs "net_memif0,role=server,socket=$work/none.sock,socket-abstract=no" \
    --ip 198.18.9.2/24 --mac 02:00:00:00:09:02 --lcore 1 --file-prefix $prefix-c2 --timeout 5 --memory-mb 256 > "$work/c2.log" 2>&1 || crc=$?
  n=$((n + 1))
  [ "$crc" -eq 3 ] || fail "ops-check without a server: exit $crc, expected 3 (time limit)"
  grep -q "every check held" "$work/c2.log" && fail "ops-check without a server claims its checks"
  ;;
cm)
  # cm_pair NAME 'SERVER_ARGS' 'CLIENT_ARGS' SERVER_LINE CLIENT_LINE: both ends hold every check
  # and print their line (a pattern of grep -E).
  cm_pair() {
    local name=$1 sline=$4 cline=$5 t0=$SECONDS
    memif_pair --cm-check "$2" "$3"
    echo "cm-check $name: $((SECONDS - t0)) s"  # its CM timers' margins are seconds
    [ "$CRC" -eq 0 ] && [ "$SRC" -eq 0 ] || fail "cm-check $name: client exit $CRC, server exit $SRC"
    grep -Eq "$sline" "$work/s.log" || fail "cm-check $name: the server's line '$sline'"
    grep -Eq "$cline" "$work/c.log" || fail "cm-check $name: the client's line '$cline'"
    grep -q "server: every check held" "$work/s.log" || fail "cm-check $name: the server's checks"
    grep -q "client: every check held" "$work/c.log" || fail "cm-check $name: the client's checks"
  }
  # The consumer's reject, with private data both ways (the REQ's after rdma_cm's header).
  cm_pair reject "--answer reject --peer-data rocedp-asks" "--expect refused --peer-data rocedp-rejects" \
    "a connection request, private data 'rocedp-asks'" "STATUS_CONNECTION_REFUSED, the REJ's private data 'rocedp-rejects'"
  # The server accepts and abandons before the RTU: CompleteConnectEx fails (seed 000).
  cm_pair abandon "--answer abandon" "--expect aborted" \
    "closed the connector before the RTU: accept STATUS_CANCELLED" "complete_connect_ex after 2000 ms: STATUS_CONNECTION_ABORTED"
  # The client gives up on a server that does not answer: its REJ ends the server's request.
  cm_pair give-up "--answer silent --wait-ms 3000" "--expect cancelled --wait-ms 1000" \
    "then accept: STATUS_CONNECTION_ABORTED" "no answer in 1000 ms; closed: STATUS_CANCELLED"
  # A late accept: the client's REQ times out (4.3 s) and comes again, the server's MRA buys time.
  cm_pair late "--answer late --wait-ms 6000" "--expect connected" \
    "accept after 6000 ms: STATUS_SUCCESS" "the server disconnected"
  # No sooner than the accept; a busy host may take longer (a lower bound only).
  late_s=$(grep -o "STATUS_SUCCESS after [0-9.]* s" "$work/c.log" | awk '{print $3}')
  awk -v s="${late_s:-0}" 'BEGIN {exit !(s >= 6.0)}' ||
    fail "cm-check late: connected after ${late_s:-?} s, sooner than the late accept (6 s)"
  # No listener on the port: refused without private data. The server listens on another port
  # and, left without a request, runs out of time (exit 3).
  memif_pair --cm-check "--answer reject -p 7000 --timeout 8" "--expect refused"
  [ "$CRC" -eq 0 ] || fail "cm-check no-listener: client exit $CRC"
  grep -q "STATUS_CONNECTION_REFUSED, the REJ's private data ''" "$work/c.log" || fail "cm-check no-listener: the client's line"
  [ "$SRC" -eq 3 ] || fail "cm-check no-listener: the server without a request exited $SRC, expected 3"
  # The check can fail: a reject's data other than the client expects.
  memif_pair --cm-check "--answer reject" "--expect refused --peer-data linux-rejects"
  [ "$CRC" -eq 1 ] || fail "cm-check with the wrong expected data: client exit $CRC, expected 1"
  grep -q "FAIL: the REJ's private data is 'rocedp-rejects', expected it to begin with 'linux-rejects'" "$work/c.log" ||
    fail "cm-check with the wrong expected data: no FAIL line"
  grep -q "every check held" "$work/c.log" && fail "cm-check with the wrong expected data claims its checks"
  ;;
*) fail "unknown group $group" ;;
esac
echo "perf_cm_$group: $n cases passed"

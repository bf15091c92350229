#!/usr/bin/env bash
# Two rocedp-perf processes (server and client) over a net_memif link with their own socket file,
# EAL file prefixes and out-of-band TCP port (the raw group also puts rocedp-perf --raw
# --reflector against dpdk-testpmd). Runs the cases of one group and checks each pair's
# exit status and output. Both processes are stopped by PID and every file removed on any exit.
#   perf_memif.sh write|read|send|raw|pingpong
set -euo pipefail
group=${1:?group}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../scripts/lib/stop_pid.sh"
bin=${ROCEDP_BIN_DIR:-$here/../../build/bin}/rocedp-perf
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (EAL runtime directory)"; exit 77; }
[ -x "$bin" ] || { echo "FAIL: $bin not built" >&2; exit 1; }

work=$(mktemp -d /tmp/rocedp-perf-it.XXXXXX)
server_pid= client_pid=
n=0
cleanup() {
  local rc=$?
  for pid in $client_pid $server_pid; do stop_pid "$pid" 30; done
  if [ $rc -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "---- $f"; tail -n 30 "$f"; } >&2; done
  fi
  for i in $(seq 0 "$n"); do rm -rf "/var/run/dpdk/rdp-perf-$$-s$i" "/var/run/dpdk/rdp-perf-$$-c$i"; done
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

# pair EXPECT SERVER_EXTRA CLIENT_ARGS...: runs one server/client pair; EXPECT is the client's
# expected exit status (0 or 1). Output of the client in $work/client$n.log.
pair() {
  local expect=$1 sextra=$2; shift 2
  n=$((n + 1))
  local sock=$work/memif$n.sock oob=$(( 20000 + ($$ * 7 + n) % 30000 ))
  local common="--timeout 40 --memory-mb 256"
  # shellcheck disable=SC2086
  "$bin" --server --port-devargs "net_memif0,role=server,socket=$sock,socket-abstract=no" --ip 198.18.9.1/24 \
    --mac 02:00:00:00:09:01 --lcore 0 --oob-port $oob --file-prefix rdp-perf-$$-s$n $common $sextra \
    > "$work/server$n.log" 2>&1 &
  server_pid=$!
  # shellcheck disable=SC2086
  "$bin" --client 127.0.0.1 --port-devargs "net_memif0,role=client,socket=$sock,socket-abstract=no" \
    --ip 198.18.9.2/24 --mac 02:00:00:00:09:02 --lcore 1 --oob-port $oob --file-prefix rdp-perf-$$-c$n $common "$@" \
    > "$work/client$n.log" 2>&1 &
  client_pid=$!
  local crc=0 src=0
  wait "$client_pid" || crc=$?
  client_pid=
  wait "$server_pid" || src=$?
  server_pid=
  echo "case $n: $* -> client $crc, server $src"
  if [ "$expect" = nonzero ]; then
    [ "$crc" -ne 0 ] || fail "client exit 0, expected a failure: $*"
    return 0
  fi
  [ "$crc" -eq "$expect" ] || fail "client exit $crc, expected $expect: $*"
  if [ "$expect" -eq 0 ]; then
    [ "$src" -eq 0 ] || fail "server exit $src: $*"
  fi
}

# pingpong_pair SERVER_ARGS CLIENT_ARGS: rocedp-perf --rc-pingpong on both ends (ibv_rc_pingpong's
# TCP exchange on loopback, the SENDs over memif); sets crc and src to the two exit statuses.
pingpong_pair() {
  local sargs=$1 cargs=$2
  n=$((n + 1))
  local sock=$work/memif$n.sock port=$(( 20000 + ($$ * 7 + n) % 30000 ))
  local common="--timeout 40 --memory-mb 256 -p $port"
  # shellcheck disable=SC2086
  "$bin" --rc-pingpong --port-devargs "net_memif0,role=server,socket=$sock,socket-abstract=no" \
    --ip 198.18.9.1/24 --mac 02:00:00:00:09:01 --lcore 0 --file-prefix rdp-perf-$$-s$n $common $sargs \
    > "$work/server$n.log" 2>&1 &
  server_pid=$!
  # shellcheck disable=SC2086
  "$bin" --rc-pingpong 127.0.0.1 --port-devargs "net_memif0,role=client,socket=$sock,socket-abstract=no" \
    --ip 198.18.9.2/24 --mac 02:00:00:00:09:02 --lcore 1 --file-prefix rdp-perf-$$-c$n $common $cargs \
    > "$work/client$n.log" 2>&1 &
  client_pid=$!
  crc=0 src=0
  wait "$client_pid" || crc=$?
  client_pid=
  wait "$server_pid" || src=$?
  server_pid=
  echo "case $n: --rc-pingpong server $sargs -> $src, client $cargs -> $crc"
}

# reflector_pair MODE EXPECT ARGS...: rocedp-perf --raw --reflector (memif server) against
# dpdk-testpmd --forward-mode=MODE (memif client) as the far end: macswap returns every frame,
# rxonly none. EXPECT is rocedp-perf's exit status. testpmd (which with --stats-period runs until
# a signal instead of waiting for Enter) is stopped by PID afterwards.
reflector_pair() {
  local mode=$1 expect=$2; shift 2
  n=$((n + 1))
  local sock=$work/memif$n.sock mac=02:00:00:00:09:01
  "$bin" --raw --reflector $mac --port-devargs "net_memif0,role=server,socket=$sock,socket-abstract=no" \
    --ip 198.18.9.2/24 --mac 02:00:00:00:09:02 --lcore 1 --file-prefix rdp-perf-$$-c$n --memory-mb 256 "$@" \
    > "$work/client$n.log" 2>&1 &
  client_pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  dpdk-testpmd --lcores 0@0,1@0 --no-huge -m 256 --file-prefix rdp-perf-$$-s$n --no-pci --no-telemetry \
    --vdev "net_memif0,role=client,socket=$sock,socket-abstract=no,mac=$mac" -- --forward-mode="$mode" \
    --port-topology=loop --nb-cores=1 --total-num-mbufs=8192 --stats-period 1 < /dev/null > "$work/server$n.log" 2>&1 &
  server_pid=$!
  local crc=0
  wait "$client_pid" || crc=$?
  client_pid=
  kill -INT "$server_pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
  echo "case $n: --reflector against testpmd $mode: $* -> $crc"
  [ "$crc" = "$expect" ] || fail "rocedp-perf --raw --reflector exit $crc, expected $expect: $*"
}

# The row of the client's table: size and iteration count as asked.
expect_row() {
  grep -Eq "^ $1 +$2 " "$work/client$n.log" || { cat "$work/client$n.log" >&2; fail "no row '$1 $2' in case $n"; }
}

# One engine counter from a side's --json rc_counters line (client or server) of the last case.
counter() { grep -o '"rc_counters".*' "$work/$1$n.log" | grep -o "\"$2\":[0-9]*" | cut -d: -f2; }
# The client's average bandwidth (MB/s) in its --json row of the last case.
bw_avg() { grep -o '"bw_avg_MBps":[0-9.]*' "$work/client$n.log" | head -1 | cut -d: -f2; }

# ECN runs (DCQCN) of one second each, NP the side whose port marks what it receives, RP the
# data's sender. ecn_unmarked NP RP: the unmarked run made no CNP and no cut; its bandwidth is
# $free_bw. ecn_marked NP RP WHAT: the NP counted the marked frames and sent CNPs, the RP got them
# (no more than were sent) and cut its rate, and the bandwidth ($marked_bw) fell below a quarter
# of $free_bw.
ecn_unmarked() {
  free_bw=$(bw_avg)
  [ "$(counter "$2" rate_cuts)" = 0 ] && [ "$(counter "$1" tx_cnp)" = 0 ] || fail "CNPs or cuts without CE marks"
}
ecn_marked() {
  local np=$1 rp=$2 what=$3 cnps got cuts
  marked_bw=$(bw_avg)  # kept for the floor's check
  [ "$(counter "$np" rx_ce)" -ge 400 ] || fail "$np rx_ce $(counter "$np" rx_ce): the $what did not arrive marked"
  cnps=$(counter "$np" tx_cnp) got=$(counter "$rp" rx_cnp) cuts=$(counter "$rp" rate_cuts)
  [ "$cnps" -ge 1 ] && [ "$got" -ge 1 ] && [ "$got" -le "$cnps" ] && [ "$cuts" -ge 1 ] && [ "$cuts" -le "$got" ] ||
    fail "CNPs sent $cnps, received $got, rate cuts $cuts"
  awk "BEGIN { exit !($marked_bw * 4 < $free_bw) }" ||
    fail "marked: $marked_bw MB/s, not below a quarter of the unmarked $free_bw MB/s"
  echo "ecn: $what unmarked $free_bw MB/s, every one marked $marked_bw MB/s ($cnps CNPs, $cuts rate cuts)"
}

bw_header=' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]'
lat_header=' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]'

case $group in
  write)
    # Sizes around the path MTU (1024): one packet, exactly one MTU, and segmented with a tail.
    pair 0 "" write bw -s 3000 -n 300 -q 4 --verify
    grep -qxF "$bw_header" "$work/client$n.log" || fail "bw header"
    expect_row 3000 1200
    grep -q "verify: 1200 messages of 3000 bytes" "$work/client$n.log" || fail "verify line"
    pair 0 "" write bw -s 1024 -n 500 --verify
    expect_row 1024 500
    # Completions: one per request (--cq-mod 1); and with 3 QPs 8 deep under the default
    # --cq-mod 100, only from the last request of each run of posts (the rest are silent).
    pair 0 "" write bw -s 64 -n 1000 --cq-mod 1 --verify
    expect_row 64 1000
    pair 0 "" write bw -s 64 -n 1000 -q 3 -t 8 --verify
    expect_row 64 3000
    pair 0 "" write lat -s 1025 -n 300 --verify
    grep -qxF "$lat_header" "$work/client$n.log" || fail "lat header"
    expect_row 1025 300
    # The polling core on its own EAL worker lcore (launched, as rocedpd runs it) on both sides,
    # the adapter driven from the control thread's poll hook.
    pair 0 "--lcore-mode 1" write bw -s 64 -n 2000 -q 2 --verify --lcore-mode 0
    expect_row 64 4000
    # Launched cores report their engine counters too (read by the core at the control thread's
    # request): the client sent the 2,000 WRITEs, the server received and acknowledged them.
    pair 0 "--lcore-mode 1 --json" write bw -s 64 -n 2000 --lcore-mode 0 --json
    [ "$(counter client tx_packets)" -ge 2000 ] || fail "client rc_counters (launched core): tx_packets"
    [ "$(counter server rx_packets)" -ge 2000 ] || fail "server rc_counters (launched core): rx_packets"
    [ "$(counter server acks_sent)" -ge 1 ] || fail "server rc_counters (launched core): acks_sent"
    # Byte-exact through loss in both directions (each endpoint drops 2% of what it
    # receives), and a run stopped by its time limit says so instead of blaming the bytes it never
    # sent (exit 3).
    pair 0 "--fault-drop 2" write bw -s 4096 -n 500 -q 4 --verify --fault-drop 2
    expect_row 4096 2000
    # (The time limit may strike while the peers still set up on a loaded machine; whichever step
    # it stops, the message must name it. 5% loss each way, not 10%: at 10% on a machine loaded
    # by other work, one QP once ran out of its 7 retries (IO_TIMEOUT) before the limit. The server outlives the client's limit: a server gone
    # first would end the client with IO_TIMEOUT, its peer having stopped answering.)
    pair nonzero "--fault-drop 5 --timeout 20" write bw -s 64 -n 3000000 -q 4 --verify --fault-drop 5 --timeout 5
    grep -q "time limit reached" "$work/client$n.log" || fail "time limit not reported"
    if grep -q "differ" "$work/client$n.log"; then fail "a time limit reported as a byte mismatch"; fi
    # ECN (DCQCN): one second of WRITEs from an ECN-capable QP (--ecn: ECT(0)), first unmarked,
    # then with the server's port marking CE on every ECN-capable frame it receives (--fault-ce
    # 100, a congested switch): the server answers with CNPs, the client's QP cuts its rate, and its
    # bandwidth falls to a fraction of the unmarked run's. Then a verified run under the same marks:
    # every byte still arrives.
    pair 0 "--json" write bw -s 4096 -D 1 --ecn --json
    ecn_unmarked server client
    pair 0 "--fault-ce 100 --json" write bw -s 4096 -D 1 --ecn --json
    ecn_marked server client WRITEs
    # The port's DCQCN parameters reach its QPs: with a floor of 2,000 Mbit/s (--dcqcn
    # min_rate_mbps=2000, ports[].dcqcn) the same marks leave the client at about 250 MB/s: above
    # the floor's own 250 MB/s never (400 allows for the clock's bursts), and far above the marked
    # run without it (at least 4 times: on an idle machine 20 to 40 times; a machine loaded by
    # other work has given 63 MB/s, the processes short of CPU, against 9.5 without the floor).
    pair 0 "--fault-ce 100 --json" write bw -s 4096 -D 1 --ecn --dcqcn min_rate_mbps=2000 --json
    floor_bw=$(bw_avg)
    [ "$(counter client rate_cuts)" -ge 1 ] || fail "no rate cut with a floor"
    awk "BEGIN { exit !($floor_bw > 4 * $marked_bw && $floor_bw < 400) }" ||
      fail "with a 2,000 Mbit/s floor: $floor_bw MB/s, not 4 times the $marked_bw MB/s without it, or not below 400"
    echo "ecn: every frame marked, a 2,000 Mbit/s floor: $floor_bw MB/s"
    pair 0 "--fault-ce 100" write bw -s 4096 -n 400 --verify --ecn
    expect_row 4096 400
    ;;
  read)
    pair 0 "" read bw -s 3000 -n 300 -q 2 --verify
    expect_row 3000 600
    pair 0 "" read lat -s 2048 -n 300 --verify
    expect_row 2048 300
    # ECN (DCQCN) for READs: the server's QP sends the data (--ecn: its responses are ECT(0)); the
    # client's port marks CE on every ECN-capable frame it receives (--fault-ce 100). The client
    # answers with CNPs, the server cuts its rate and paces its READ responses, and the client's
    # bandwidth falls to a fraction of the unmarked run's. Then a verified run under the marks.
    pair 0 "--ecn --json" read bw -s 4096 -D 1 --json
    ecn_unmarked client server
    pair 0 "--ecn --json" read bw -s 4096 -D 1 --fault-ce 100 --json
    ecn_marked client server "READ responses"
    pair 0 "--ecn" read bw -s 4096 -n 400 --verify --fault-ce 100
    expect_row 4096 400
    ;;
  send)
    pair 0 "" send bw -s 1500 -n 400 -q 3 --verify
    expect_row 1500 1200
    pair 0 "" send lat -s 100 -n 300 --verify
    expect_row 100 300
    pair 0 "--json" send bw -s 64 -n 1000 --json
    grep -q '"test":"send_bw","mode":"rdma","size":64,"iterations":1000' "$work/client$n.log" || fail "json row"
    # Each side's engine counters: the client sent the 1,000 SENDs, the server received them.
    [ "$(counter client tx_packets)" -ge 1000 ] || fail "client rc_counters: tx_packets"
    [ "$(counter server rx_packets)" -ge 1000 ] || fail "server rc_counters: rx_packets"
    [ "$(counter server acks_sent)" -ge 1 ] || fail "server rc_counters: acks_sent"
    ;;
  raw)
    pair 0 "" write bw -s 4096 -n 2000 --raw --json
    grep -q '"mode":"raw","size":4096,"iterations":2000.*"frames_per_msg":4' "$work/client$n.log" || fail "raw json row"
    pair 0 "" write lat -s 64 -n 300 --raw
    expect_row 64 300
    # An independent far end: testpmd's macswap bounces the frames (a 4 KiB WRITE: 4 frames each
    # way per round trip); a testpmd that returns nothing (rxonly) ends in the time limit (3).
    command -v dpdk-testpmd > /dev/null || fail "dpdk-testpmd is not installed (scripts/setup.sh)"
    reflector_pair macswap 0 write lat -s 4096 -n 300 --timeout 40
    expect_row 4096 300
    grep -q "Peer *: a frame reflector at 02:00:00:00:09:01" "$work/client$n.log" || fail "no reflector line"
    reflector_pair rxonly 3 write lat -s 64 -n 300 --timeout 6
    grep -q "nothing came back from the reflector" "$work/client$n.log" || fail "no message for a silent reflector"
    # The check must be able to fail: the client fills its messages with another pattern.
    pair 1 "" write bw -s 1000 -n 50 --verify-seed 7
    grep -q "bytes differ on the server" "$work/client$n.log" || fail "mismatch not reported"
    ;;
  pingpong)
    # ibv_rc_pingpong's exchange and loop on both ends: multi-packet and one-packet messages.
    for size in 4096 64; do
      pingpong_pair "-n 300 -s $size --verify" "-n 300 -s $size --verify"
      [ "$src" = 0 ] && [ "$crc" = 0 ] || fail "rc-pingpong -s $size: server $src, client $crc"
      for side in server client; do
        grep -q "^300 iters in " "$work/$side$n.log" || fail "no result line ($side, -s $size)"
        grep -q "verify: 300 messages of $size bytes checked byte for byte" "$work/$side$n.log" ||
          fail "not every message verified ($side, -s $size)"
      done
    done
    # Messages of the wrong size are a failure that names the message.
    pingpong_pair "-n 10 -s 8192 --verify" "-n 10 -s 4096 --timeout 6"  # the client waits in vain
    [ "$src" = 1 ] || fail "the server verified 4096-byte messages as 8192: exit $src"
    grep -q "message 1 of 4096 bytes, wanted 8192 bytes of 0x7b" "$work/server$n.log" ||
      fail "the mismatch was not reported"
    ;;
  *) fail "unknown group $group" ;;
esac
echo "perf_memif_$group: $n pairs passed"

#!/usr/bin/env bash
# Packet-generator load against a live rocedpd while a real connection serves traffic.
#
#   scripts/loadtest.sh [--short] [--build DIR]      (root; dpdk-testpmd, python3-scapy)
#
# Set-up (all in a network namespace of its own, removed on exit): a Linux bridge with four
# veth ports; rocedpd (net_af_packet, 198.18.20.1, one polling core on CPU 1, echo listener on
# 7000), the live client rocedp-perf (net_af_packet, 198.18.20.2, CPU 0), the generator (198.18.20.3,
# CPU 0: the daemon keeps CPU 1 to itself) and a second client for the pressure load (198.18.20.4).
# For every load the live client opens a fresh connection through the IB CM and runs
# `send lat -s 64 --verify` against the echo service (every echo checked byte for byte) while
# the generator sends a scapy-crafted capture (scripts/loadtest_frames.py): dpdk-testpmd replays
# the floods in a loop at its full rate (net_pcap with infinite_rx=1 forwarded by its io engine
# onto the bridge); scapy's sendp sends the storm once.
#   none       no load: the reference latency
#   flood      valid RoCEv2 frames (ICRC right) to unknown QPNs and to the live QP with PSNs
#              far outside its window
#   malformed  every truncation, bad lengths, every opcode, hostile RETHs, bad ICRCs, an
#              ACK/NAK storm at the live QP, CM MADs with every attribute and broken sizes at QP1
#   storm      thousands of CM REQs from many source ports that never send the RTU, and DREQs
#              for unknown connections (sent once); then the listener must still accept
#   pressure   the flood again plus a second client whose receives are never posted in time
#              (the echo's SENDs back to it meet RNR NAKs for the whole run)
#   ringfull   CM DREQs for unknown connections (mads.pcap) in a loop, and a control thread that
#              falls behind: once the flood is on, the script puts it on SCHED_IDLE for a second
#              (both CPUs spin, so it barely runs), and the ring from the polling core to it
#              (dataplane.control_ring_size, 1024) fills; the pool (4095) is 4 times the ring.
#              (Left alone, the control thread drains that ring faster than net_af_packet fills it.)
#   nombuf     the daemon restarts with mbuf_count 1023 and control_ring_size 1024, a pool
#              smaller than that ring, and the same MAD flood and control thread falling behind:
#              the frames waiting for it hold every mbuf, the port can neither receive nor send
# Pass: the daemon stays up; the live client exits 0 (connection up, every echo byte-exact);
# the daemon's mbufs return to their count before the load; every frame the core received is in
# exactly one counter (rx = ARP/ICMP answered + handed on (control, other cores) + handed to the
# RDMA engine + dropped by a named reason); storm connections time out and free their state.
# ringfull: frames met the full ring (handoff_ring_full > 0, in the identity) and the pool never
# ran dry. nombuf: the core saw the pool empty (/rocedp/cores rx_pool_empty > 0: net_af_packet
# counts no rx_nombuf); the live connection may end with a transport error when the pool stays
# dry longer than its retry budget (7 retries x 67 ms), never with wrong bytes; after the flood a
# fresh connection must be served byte-exact, and the daemon must stop cleanly (exit 0) before
# the restart and at the end. LOADTEST_LOADS="ringfull nombuf" runs a subset.
# Prints a table (markdown) with the live connection's p50/p99 round trip per load.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
short=0
while [ $# -gt 0 ]; do
  case $1 in
    --short) short=1 ;;
    --build) build=$2; shift ;;
    *) echo "usage: $0 [--short] [--build DIR]" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }
command -v dpdk-testpmd > /dev/null || { echo "SKIP: dpdk-testpmd not installed"; exit 77; }
/usr/bin/python3 -c "import scapy.contrib.roce" 2> /dev/null || { echo "SKIP: python3-scapy missing"; exit 77; }
secs=$([ $short = 1 ] && echo 3 || echo 10)
storm_reqs=$([ $short = 1 ] && echo 1000 || echo 4000)

rocedpd=$build/bin/rocedpd
perf=$build/bin/rocedp-perf
tel=$here/tests/integration/telemetry_query.py
frames=$here/scripts/loadtest_frames.py
ns=rdpl$$
work=$(mktemp -d /tmp/rocedp-load.XXXXXX)
dprefix=rdpl-d-$$
cprefix=rdpl-c-$$
gprefix=rdpl-g-$$
rprefix=rdpl-r-$$
daemon_pid=
gen_pid=
rnr_pid=
client_pid=
D_MAC=02:00:00:00:14:01 C_MAC=02:00:00:00:14:02 G_MAC=02:00:00:00:14:03 R_MAC=02:00:00:00:14:04

source "$here/scripts/lib/stop_pid.sh"
cleanup() {
  local rc=$?
  stop_pid "$client_pid"; stop_pid "$rnr_pid"; stop_pid "$gen_pid"; stop_pid "$daemon_pid"
  if [ $rc -ne 0 ] && [ -f "$work/daemon.log" ]; then
    echo "---- daemon log (tail) ----" >&2
    grep -v "level=debug" "$work/daemon.log" | tail -n 30 >&2
  fi
  ip netns del "$ns" 2> /dev/null || true
  [ -n "${LOADTEST_KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
  rm -rf /var/run/dpdk/{$dprefix,$cprefix,$gprefix,$rprefix}
  exit $rc
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
tel_get() { /usr/bin/python3 "$tel" "$dprefix" "$1" "$2"; }
# Background processes are started with `ip netns exec` itself (not through a shell function), so
# $! is the program's PID (ip execs it) and stop_pid reaches it.
in_ns() { ip netns exec "$ns" "$@"; }

# ---- the network: a bridge and three veth pairs, all inside $ns ----
ip netns add "$ns"
in_ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
in_ns ip link add br0 type bridge
in_ns ip link set br0 up
for p in d c g r; do
  in_ns ip link add "${p}0" type veth peer name "${p}b"
  in_ns ip link set "${p}b" master br0
  in_ns ip link set "${p}0" up
  in_ns ip link set "${p}b" up
done

# The daemon's configuration; $1 is the dataplane section (the nombuf load runs a daemon with a
# pool smaller than its ring to the control thread).
write_daemon_yaml() {
  cat > "$work/daemon.yaml" << YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $dprefix, extra_args: ["--no-pci"]}
ports:
  - name: p0
    devargs: net_af_packet0,iface=d0,framecnt=8192
    mac: "$D_MAC"
    address: 198.18.20.1/24
    neighbours: [{ip: 198.18.20.2, mac: "$C_MAC"}, {ip: 198.18.20.3, mac: "$G_MAC"}, {ip: 198.18.20.4, mac: "$R_MAC"}]
dataplane: $1
telemetry: {stats_interval_ms: 20}
listeners:
  - {port: p0, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 16, max_connections: 64}
YAML
}
# The clients know the daemon's MAC (no ARP to lose under a flood). rocedp-perf polls inline on
# its file's eal.main_lcore (CPU 0 here, away from the daemon's polling core on CPU 1) and ignores
# the file's dataplane.lcores, which only satisfy the file's checks.
for who in c:198.18.20.2:$C_MAC:$cprefix:0 r:198.18.20.4:$R_MAC:$rprefix:0; do
  IFS=: read -r dev ip m1 m2 m3 m4 m5 m6 pfx lc <<< "$who"
  cat > "$work/client-$dev.yaml" << YAML
eal: {lcores: [0, 1], main_lcore: $lc, memory_mb: 256, file_prefix: $pfx, extra_args: ["--no-pci"]}
ports:
  - name: p0
    devargs: net_af_packet0,iface=${dev}0
    mac: "$m1:$m2:$m3:$m4:$m5:$m6"
    address: $ip/24
    neighbours: [{ip: 198.18.20.1, mac: "$D_MAC"}]
dataplane: {lcores: [$((1 - lc))]}
YAML
done
start_daemon() {  # start_daemon DATAPLANE_SECTION
  write_daemon_yaml "$1"
  : > "$work/daemon.log"
  ip netns exec "$ns" "$rocedpd" --config "$work/daemon.yaml" >> "$work/daemon.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 600); do
    grep -q "event=running" "$work/daemon.log" 2> /dev/null && break
    kill -0 "$daemon_pid" 2> /dev/null || fail "rocedpd exited during start-up"
    sleep 0.1
  done
  grep -q "event=running" "$work/daemon.log" || fail "rocedpd did not start"
  for _ in $(seq 100); do tel_get /rocedp/control "d['snapshots']" > /dev/null 2>&1 && break; sleep 0.05; done
}
stop_daemon() {  # SIGTERM: the daemon must shut down cleanly (exit 0)
  kill -TERM "$daemon_pid"
  local st=0
  wait "$daemon_pid" || st=$?
  daemon_pid=
  [ $st -eq 0 ] || fail "rocedpd exited $st after SIGTERM"
}
start_daemon "{lcores: [1], mbuf_count: 4095}"

echo "crafting frames (scapy) ..." >&2
/usr/bin/python3 "$frames" "$work" --dmac $D_MAC --smac $G_MAC --dip 198.18.20.1 --sip 198.18.20.3 \
  --client-ip 198.18.20.2 --listener-port 7000 --storm-reqs "$storm_reqs" >&2

# Counters of the one polling core and of the daemon, as one line of numbers.
snapshot() {
  /usr/bin/python3 - "$tel" "$dprefix" << 'PY'
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("tq", sys.argv[1]); tq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tq)
time.sleep(0.1)
c = tq.query(sys.argv[2], "/rocedp/cores"); d = tq.query(sys.argv[2], "/rocedp/drops")
ctl = tq.query(sys.argv[2], "/rocedp/control"); con = tq.query(sys.argv[2], "/rocedp/connections")
tx_side = ("no_tx_room", "no_tx_queue", "stop_flush", "no_mbuf", "handoff_ring_full")
rx_drops = sum(v for k, v in d.items() if k not in tx_side)
s = lambda k: sum(c[k])
print(s("rx_packets") + s("handoff_in"), s("arp_replies") + s("echo_replies"), s("handoff_out"),
      s("roce_to_engine"), rx_drops, d.get("handoff_ring_full", 0), ctl["mbufs_available"],
      con.get("count", 0) if isinstance(con, dict) else 0, ctl["cm_frames"], s("rx_pool_empty"))
PY
}
# Every drop reason with its count: the cores' (/rocedp/drops) and the RC engines' (/rocedp/rdma:
# frames that reached an engine for a QP it does not have, in the wrong state, from the wrong
# peer), as one JSON object.
drops_json() {
  /usr/bin/python3 - "$tel" "$dprefix" << 'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("tq", sys.argv[1]); tq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tq)
d = tq.query(sys.argv[2], "/rocedp/drops")
e = tq.query(sys.argv[2], "/rocedp/rdma")
d.update({k: sum(v) for k, v in e.items() if k.startswith("rx_drop_")})
print(json.dumps(d))
PY
}
# The reasons that grew since $1 (drops_json's output), largest first.
top_drops() {
  /usr/bin/python3 - "$1" "$2" << 'PY'
import json, sys
before, now = (json.loads(a) if a else {} for a in sys.argv[1:3])
delta = sorted(((v - before.get(k, 0), k) for k, v in now.items() if v - before.get(k, 0) > 0), reverse=True)
print(", ".join(f"{k} {v}" for v, k in delta[:4]) or "-")
PY
}

# The live client: a fresh connection to the echo service, 64 B SEND ping-pong, every echo
# checked; --json for the percentiles.
# The client runs a fixed count (--verify needs one); the unloaded run sets it so that every loaded
# run (slower, never faster) lasts at least $secs seconds after the generator started (its EAL
# start-up takes 1-6 s).
iters=$((secs * 200))
start_client() {
  ip netns exec "$ns" "$perf" --connect 198.18.20.1:7000 --config "$work/client-c.yaml" send lat -s 64 -n $iters --verify --json --timeout $((secs + 60)) \
    > "$work/client.out" 2> "$work/client.err" &
  client_pid=$!
}
# The QP the live connection got and the PSNs it expects and sends next: the daemon logs the
# connection at once (the log is polled every 20 ms, so the load starts early in the client's
# run); the PSNs come from telemetry a moment later. The crafted PSNs are 2^22 away from them,
# so the few thousand round trips the client makes meanwhile do not matter.
live_qp() {  # live_qp CONNECTIONS_BEFORE
  local q=
  for _ in $(seq 1500); do
    kill -0 "$client_pid" 2> /dev/null || return 1
    [ "$(grep -c "event=service_connected" "$work/daemon.log")" -gt "$1" ] && {
      q=$(grep "event=service_connected" "$work/daemon.log" | tail -n 1 | sed -n 's/.* qpn=\([0-9]*\).*/\1/p')
      break
    }
    sleep 0.02
  done
  [ -n "$q" ] || return 1
  for _ in $(seq 100); do
    local r
    r=$(tel_get "/rocedp/qps,$q" "f\"{d['expected_psn']} {d['next_psn']}\" if d.get('state') == 'RTS' else ''" 2> /dev/null || true)
    if [ -n "$r" ]; then echo "$q $r"; return 0; fi
    kill -0 "$client_pid" 2> /dev/null || return 1
    sleep 0.05
  done
  return 1
}
# A looped capture is a flood: testpmd replays it at its full rate until stopped. A capture played
# once (the storm) goes out through scapy's sendp, which ends when every frame is sent (testpmd
# would start forwarding only after its own EAL start-up, seconds on a busy host, and is stopped
# with the live client).
start_generator() {  # start_generator PCAP LOOP(1|0)
  if [ "$2" = 0 ]; then
    ip netns exec "$ns" /usr/bin/python3 -c "import sys; from scapy.all import rdpcap, sendp
f = rdpcap(sys.argv[1]); sendp(f, iface='g0', verbose=False); print(f'sent {len(f)}')" "$1" > "$work/gen.out" 2>&1 &
    gen_pid=$!
    return
  fi
  # --no-flush-rx: testpmd would drain the replay's first burst before it forwards.
  ip netns exec "$ns" dpdk-testpmd --lcores 0@0,1@0 --no-huge -m 128 --no-pci --file-prefix $gprefix \
    --vdev "net_pcap0,rx_pcap=$1,tx_pcap=/dev/null,infinite_rx=$2" --vdev "net_af_packet0,iface=g0" \
    -- --forward-mode=io --auto-start --no-flush-rx --stats-period 1000 --total-num-mbufs=8192 < <(sleep $((secs + 40))) \
    > "$work/gen.out" 2>&1 &
  gen_pid=$!
}
generator_sent() {  # frames the generator put on the bridge (port 1 TX), from testpmd's summary
  sed -n 's/^sent \([0-9]*\)$/\1/p' "$work/gen.out" 2> /dev/null
  awk '/Forward statistics for port 1/{f=1} f && /TX-packets/{for (i = 1; i < NF; i++) if ($i == "TX-packets:") {print $(i + 1); exit}}' "$work/gen.out" 2> /dev/null || true
}

# The control thread falls behind: once the flood reaches the daemon's veth, the thread runs as
# SCHED_IDLE for a second (every CPU has a spinning thread, so it barely runs), then as before.
starve_control() {  # starve_control LOAD
  local t tid= rx0 rx
  for t in /proc/"$daemon_pid"/task/*; do
    [ "$(cat "$t/comm" 2> /dev/null)" = rocedp-control ] && tid=${t##*/}
  done
  [ -n "$tid" ] || fail "$1: rocedpd has no rocedp-control thread"
  rx0=$(in_ns cat /sys/class/net/d0/statistics/rx_packets)
  for _ in $(seq 300); do
    rx=$(in_ns cat /sys/class/net/d0/statistics/rx_packets)
    [ $((rx - rx0)) -ge 10000 ] && break
    sleep 0.1
  done
  chrt --idle -p 0 "$tid"
  sleep 1
  chrt --other -p 0 "$tid"
}

rows=()
run_load() {  # run_load NAME PCAP LOOP
  local name=$1 pcap=$2 loop=$3
  local before drops_before after live qpn psn p50 p99 sent t_gen=0
  before=$(snapshot)
  drops_before=$(drops_json)
  local conns_before
  conns_before=$(grep -c "event=service_connected" "$work/daemon.log" || true)
  start_client
  if [ -n "$pcap" ]; then
    live=$(live_qp "$conns_before") || fail "$name: the live client never connected ($(tail -2 "$work/client.err"))"
    read -r qpn psn sq_psn <<< "$live"
    /usr/bin/python3 "$frames" --retarget "$work/$pcap.pcap" "$work/$pcap-live.pcap" --live-qpn "$qpn" \
      --live-psn "$psn" --live-sq-psn "$sq_psn" > /dev/null
    start_generator "$work/$pcap-live.pcap" "$loop"
    t_gen=$SECONDS
    case $name in ringfull | nombuf) starve_control "$name" ;; esac
  fi
  if [ "$name" = pressure ]; then
    ip netns exec "$ns" "$perf" --connect 198.18.20.1:7000 --config "$work/client-r.yaml" send lat -s 64 -n 2 --recv-delay-ms $((secs * 1000)) \
      --timeout $((secs + 20)) > "$work/rnr.out" 2>&1 &
    rnr_pid=$!
  fi
  local status=0
  wait "$client_pid" || status=$?
  client_pid=
  # With the pool dry the live connection may end early (below); the flood still lasts its time.
  if [ "$name" = nombuf ]; then
    while [ $((SECONDS - t_gen)) -lt "$secs" ]; do sleep 0.2; done
  fi
  if [ "$loop" = 0 ] && [ -n "$gen_pid" ]; then
    wait "$gen_pid" || fail "$name: the replay failed: $(tail -n 2 "$work/gen.out")"
  else
    stop_pid "$gen_pid"
  fi
  gen_pid=
  sent=$(generator_sent); sent=${sent:-0}
  # A flood that never got going (generator start-up longer than the client's run) proves nothing.
  if [ "$loop" = 1 ] && [ "$sent" -lt 20000 ]; then
    fail "$name: the generator sent only $sent frames during the live run (host too busy?)"
  fi
  stop_pid "$rnr_pid"; rnr_pid=
  kill -0 "$daemon_pid" 2> /dev/null || fail "$name: rocedpd died"
  local exact=yes
  if [ $status -ne 0 ]; then
    # A dry pool stops the port (nothing received, nothing sent): a connection whose retry budget
    # runs out meanwhile ends with a transport error, never with wrong bytes. Anywhere else, and
    # for any other error, the load failed.
    local why
    why=$(grep -v "^{" "$work/client.err" "$work/client.out" 2> /dev/null | grep -i -m1 -E "error|fail|timeout|status" || true)
    if [ "$name" != nombuf ] || grep -q -i "verify" "$work/client.err" "$work/client.out"; then
      fail "$name: live client exit $status: $(tail -n 3 "$work/client.err" "$work/client.out")"
    fi
    exact="ended (${why##*: })"
    p50=- p99=-
  else
    p50=$(/usr/bin/python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{') and 'rtt_p50_usec' in l]; print('%.1f %.1f' % (r[-1]['rtt_p50_usec'], r[-1]['rtt_p99_usec']))" "$work/client.out")
    read -r p50 p99 <<< "$p50"
  fi
  if [ "$name" = none ]; then
    iters=$(/usr/bin/python3 -c "import sys; print(max(int(sys.argv[1]), min(2000000, int(float(sys.argv[2]) * 1e6 / max(float(sys.argv[3]), 1.0)))))" "$iters" "$((secs + 6))" "$p50")
    echo "live client: $iters round trips per loaded run (unloaded p50 $p50 µs)" >&2
  fi
  # Let queued frames and connection state settle, then compare with the counters before.
  local ok_mbuf=no ok_id=no conns=? settle=0
  for settle in $(seq 150); do
    after=$(snapshot)
    read -r rx0 ans0 out0 eng0 drop0 full0 mbuf0 conn0 cm0 dry0 <<< "$before"
    read -r rx ans out eng drop full mbuf conn cm dry <<< "$after"
    local d_rx=$((rx - rx0)) d_acc=$(((ans - ans0) + (out - out0) + (eng - eng0) + (drop - drop0) + (full - full0)))
    [ "$mbuf" -ge $((mbuf0 - 64)) ] && ok_mbuf=yes || ok_mbuf=no
    [ $d_rx -eq $d_acc ] && ok_id=yes || ok_id="no ($d_rx vs $d_acc)"
    conns=$conn
    [ $ok_mbuf = yes ] && [ "$ok_id" = yes ] && [ "$conn" -le "$conn0" ] && break
    sleep 0.2
  done
  echo "$name: settled after $settle checks (mbufs $ok_mbuf, identity $ok_id, connections $conns)" >&2
  if [ "$name" = nombuf ]; then
    # The pool is back: a fresh connection must be served at once, every echo byte-exact.
    ip netns exec "$ns" "$perf" --connect 198.18.20.1:7000 --config "$work/client-c.yaml" send lat -s 64 -n 2000 --verify --json \
      --timeout 60 > "$work/recover.out" 2> "$work/recover.err" || fail "nombuf: no byte-exact connection after the flood: $(tail -n 3 "$work/recover.err")"
    local r50
    r50=$(/usr/bin/python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{') and 'rtt_p50_usec' in l]; print('%.1f' % r[-1]['rtt_p50_usec'])" "$work/recover.out")
    exact="$exact; a fresh connection after: yes (p50 $r50 µs)"
  fi
  local drops drops_after
  drops_after=$(drops_json)
  drops=$(top_drops "$drops_before" "$drops_after")
  rows+=("| $name | $sent | $d_rx | $drops | $((dry - dry0)) | $p50 | $p99 | $exact | $ok_mbuf ($mbuf0 → $mbuf) | $ok_id |")
  [ $ok_mbuf = yes ] || fail "$name: mbufs did not return ($mbuf0 before, $mbuf after)"
  [ "$ok_id" = yes ] || fail "$name: frames in no counter or in two: rx $d_rx, accounted $d_acc"
  if [ "$name" = storm ]; then
    [ $((cm - cm0)) -ge $((storm_reqs / 4)) ] || fail "storm: the control thread saw $((cm - cm0)) CM frames; the storm did not arrive"
    [ "$conns" -le "$conn0" ] || fail "storm: $conns connections still held after the storm (before: $conn0)"
  fi
  if [ "$name" = ringfull ]; then
    # The ring to the control thread overflowed, and every frame it refused is counted; the ring
    # holds a quarter of the pool, so the pool never ran dry.
    [ $((full - full0)) -gt 0 ] || fail "ringfull: no frame met a full ring to the control thread"
    [ "$dry" -eq "$dry0" ] || fail "ringfull: the pool ran dry ($((dry - dry0)) polls): the ring should have overflowed first"
  fi
  if [ "$name" = flood ]; then
    # Half the flood is addressed to QPNs nobody was given: the engine drops them by that reason.
    local no_qp
    no_qp=$(/usr/bin/python3 -c 'import json, sys; a, b = (json.loads(x) for x in sys.argv[1:3]); print(b.get("rx_drop_no_qp", 0) - a.get("rx_drop_no_qp", 0))' "$drops_before" "$drops_after")
    [ "$no_qp" -gt 0 ] && [ "$no_qp" -le "$d_rx" ] || fail "flood: rx_drop_no_qp grew by $no_qp for $d_rx frames received"
  fi
  if [ "$name" = nombuf ]; then
    [ $((dry - dry0)) -gt 0 ] || fail "nombuf: the pool never ran dry (rx_pool_empty did not move)"
    [ "$conns" -le "$conn0" ] || fail "nombuf: $conns connections still held after the flood (before: $conn0)"
  fi
}

# LOADTEST_LOADS="none ringfull" runs a subset (none always runs first: it sizes the live runs).
loads=${LOADTEST_LOADS:-flood malformed storm pressure ringfull nombuf}
run_load none "" 0
for l in $loads; do
  case $l in
    none) ;;
    flood | pressure) run_load "$l" flood 1 ;;
    malformed) run_load malformed malformed 1 ;;
    storm) run_load storm storm 0 ;;
    ringfull) run_load ringfull mads 1 ;;
    nombuf)
      # A pool smaller than the ring to the control thread: the MADs the control thread has not
      # read yet hold every mbuf, and the port can neither receive nor send.
      stop_daemon
      start_daemon "{lcores: [1], mbuf_count: 1023, control_ring_size: 1024}"
      run_load nombuf mads 1
      ;;
    *) fail "unknown load $l" ;;
  esac
done

echo
echo "| load | generator frames | daemon rx frames | top drop reasons | polls with the pool dry | live p50 µs | live p99 µs | byte-exact | mbufs back (before → after) | rx = accounted |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
stop_daemon
echo "PASS: rocedpd served a byte-exact live connection through every load"

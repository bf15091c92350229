#!/usr/bin/env bash
# rocedpd with two ports (memif servers on two sockets, one subnet each) and an echo and a memory
# listener on each, the same ND ports on both: every port has its own adapter. Two svc_client
# processes, one on each link, connect through the IB CM to the services of their link's port at
# the same time and check the bytes (echo byte-exact; WRITE then READ back through the region).
# While both hold their connections the daemon's telemetry shows four connections and four RTS
# QPs, two on each port, and one RC engine row per port that counted its port's traffic alone.
# rocedpctl picks one QP or engine row by port. After both clients disconnected and exited 0,
# SIGTERM ends the daemon with status 0. First, the same daemon with a right port whose adapter
# cannot open (more listeners than it may hold) must fail to start, naming the port, and close all
# it opened. Last, rocedp-perf with a file of both links runs on the one --config-port names.
#   daemon_two_ports.sh PATH/TO/svc_client
source "$(dirname "$0")/lib.sh"
need_root
client=${1:?usage: daemon_two_ports.sh SVC_CLIENT}
pids=()
names=()

stop_clients() {
  local i p
  for i in "${!pids[@]}"; do
    stop_pid "${pids[$i]}" 30
  done
  pids=()
}
on_exit() {
  local rc=$? n
  stop_clients
  # The clients' EAL runtime directories, also after a run that passed (pids is empty then).
  for n in "${names[@]}"; do rm -rf "/var/run/dpdk/$prefix-$n"; done
  rm -rf "/var/run/dpdk/rdp-2p-perf-$$"  # rocedp-perf's (its prefix: 32 characters at most)
  if [ $rc -ne 0 ]; then
    for n in a b; do
      [ -f "$work/client-$n.log" ] || continue
      echo "---- client $n log ----" >&2
      tail -n 30 "$work/client-$n.log" >&2
    done
  fi
  # cleanup's status; (exit $rc) here would end the trap under set -e with the daemon running.
  exit_status=$rc
  cleanup
}
trap on_exit EXIT INT TERM

cat > "$work/server.yaml" <<YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $prefix, extra_args: ["--no-pci"]}
ports:
  - name: left
    devargs: net_memif0,role=server,socket=$work/a.sock,socket-abstract=no
    mac: "02:00:00:00:0a:01"
    address: 198.18.10.1/24
    neighbours: [{ip: 198.18.10.2, mac: "02:00:00:00:0a:02"}]
  - name: right
    devargs: net_memif1,role=server,socket=$work/b.sock,socket-abstract=no
    mac: "02:00:00:00:0b:01"
    address: 198.18.11.1/24
    neighbours: [{ip: 198.18.11.2, mac: "02:00:00:00:0b:02"}]
dataplane: {lcores: [1], mbuf_count: 8191}
telemetry: {stats_interval_ms: 20}
listeners:
  - {port: left, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 16}
  - {port: left, nd_port: 7001, service: memory, memory_bytes: 1048576}
  - {port: right, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 8}
  - {port: right, nd_port: 7001, service: memory, memory_bytes: 1048576}
YAML
# client_port NAME DEVICE SOCKET OCTET: a memif client port at 198.18.OCTET.2 (OCTET 10: the left
# link, 11: the right one).
client_port() {
  local mac=0a
  [ "$4" = 11 ] && mac=0b
  cat <<YAML
  - name: $1
    devargs: $2,role=client,socket=$3,socket-abstract=no
    mac: "02:00:00:00:$mac:02"
    address: 198.18.$4.2/24
    neighbours: [{ip: 198.18.$4.1, mac: "02:00:00:00:$mac:01"}]
YAML
}
# client_config NAME SOCKET OCTET: svc_client's configuration, polling on lcore 0.
client_config() {
  {
    echo "eal: {lcores: [0, 1], main_lcore: 1, memory_mb: 256, file_prefix: $prefix-$1, extra_args: [\"--no-pci\"]}"
    echo "ports:"
    client_port memif0 net_memif0 "$2" "$3"
    echo "dataplane: {lcores: [0], mbuf_count: 8191, idle_sleep_us: 20}"
    echo "telemetry: {enabled: false}"
  } > "$work/client-$1.yaml"
}
client_config a "$work/a.sock" 10
client_config b "$work/b.sock" 11

# A later port that cannot open: the right port's adapter takes one listener (limits.max_listeners)
# and is given two. rocedpd must refuse to start (exit 1) with an error that names the port and
# the listener, after opening the left port's adapter and its listener, and close everything it
# opened on the way out: both adapters, both ports, every mbuf back in the pool, the memif socket
# files removed.
sed -e 's/^telemetry: .*/limits: {max_listeners: 1}/' \
    -e '/port: left, nd_port: 7001/d' "$work/server.yaml" > "$work/bad.yaml"
bad_status=0
"$rocedpd" --config "$work/bad.yaml" > "$work/bad.log" 2>&1 || bad_status=$?
rm -rf "/var/run/dpdk/$prefix"
[ "$bad_status" -eq 1 ] || { cat "$work/bad.log" >&2; fail "rocedpd with a port that cannot open: exit $bad_status, expected 1"; }
grep -q 'event=adapter_opened port=left' "$work/bad.log" || fail "the left port's adapter was not opened first"
grep -q 'event=adapter_opened port=right' "$work/bad.log" && fail "the right port's adapter claims it opened"
grep -q 'event=start_failed error="port right: memory listener on nd_port 7001: STATUS_INSUFFICIENT_RESOURCES"' "$work/bad.log" ||
  { tail -n 5 "$work/bad.log" >&2; fail "the start-up error does not name the port and its listener"; }
grep -q 'event=adapter_closed adapters=2' "$work/bad.log" || fail "not both adapters closed"
for p in left right; do grep -q "event=port_closed port=$p" "$work/bad.log" || fail "port $p not closed"; done
grep -qE 'event=mempool_freed mbufs=([0-9]+) were_free=\1( |$)' "$work/bad.log" || fail "mbufs missing from the pool at exit"
for f in a.sock b.sock; do [ ! -e "$work/$f" ] || fail "memif socket $f left behind"; done

start_daemon "$work/server.yaml"
for p in left right; do
  for n in 7000 7001; do
    grep -q "event=service_listening port=$p service=[a-z]* nd_port=$n" "$work/daemon.log" ||
      fail "listener $p:$n not logged"
  done
done
[ "$(grep -c "event=adapter_opened" "$work/daemon.log")" -eq 2 ] || fail "not one adapter per port"

# run_client NAME OCTET: svc_client on its link, holding its connections until $work/release.
run_client() {
  "$client" --config "$work/client-$1.yaml" --server "198.18.$2.1" --echo-port 7000 --memory-port 7001 \
    --hold "$work/release" > "$work/client-$1.log" 2>&1 &
  pids+=($!)
  names+=("$1")
}
run_client a 10
run_client b 11
for i in 0 1; do
  n=${names[$i]}
  svc_client_ready "${pids[$i]}" "$work/client-$n.log"
  grep -q "echo 4096 bytes: ok" "$work/client-$n.log" || fail "client $n: echo checks"
  grep -q "memory write+read 65536 bytes: ok" "$work/client-$n.log" || fail "client $n: memory checks"
done

# Four connections, two per port, each from that port's client; four RTS QPs, two per port; the
# connections' QPs are the QPs of their own port (QPNs may repeat across ports: each adapter
# numbers its own). The echo QP of each port keeps its own queue depth (16 left, 8 right).
wait_for /rocedp/connections "d['count'] == 4 and d['state'] == ['established'] * 4"
wait_for /rocedp/qps "d['count'] == 4 and d['state'] == ['RTS'] * 4"
[ "$(python3 - "$tel" "$prefix" <<'PY'
import json, subprocess, sys
q = lambda c: json.loads(subprocess.check_output([sys.executable, sys.argv[1], sys.argv[2], c]))
conns, qps, rdma = q("/rocedp/connections"), q("/rocedp/qps"), q("/rocedp/rdma")
ok = True
for port, peer, local in (("left", "198.18.10.2", "198.18.10.1"), ("right", "198.18.11.2", "198.18.11.1")):
    rows = [i for i, p in enumerate(conns["port"]) if p == port]
    ok = ok and len(rows) == 2
    ok = ok and all(conns["remote_ip"][i] == peer and conns["local_ip"][i] == local for i in rows)
    ok = ok and sorted(conns["service"][i] for i in rows) == ["echo", "memory"]
    ok = ok and sorted(conns["local_port"][i] for i in rows) == [7000, 7001]
    ok = ok and all(conns["qp_state"][i] == "RTS" for i in rows)
    qrows = [i for i, p in enumerate(qps["port"]) if p == port]
    ok = ok and sorted(qps["qpn"][i] for i in qrows) == sorted(conns["qpn"][i] for i in rows)
    echo = [i for i in rows if conns["service"][i] == "echo"][0]
    eq = [i for i in qrows if qps["qpn"][i] == conns["qpn"][echo]][0]
    ok = ok and qps["rq_depth"][eq] == (16 if port == "left" else 8)
    # One engine row per port on the one core, each with its own port's traffic.
    e = [i for i, p in enumerate(rdma["port"]) if p == port]
    ok = ok and len(e) == 1 and rdma["rx_packets"][e[0]] > 0 and rdma["tx_packets"][e[0]] > 0
print(ok)
PY
)" = True ] || fail "telemetry: $(python3 "$tel" "$prefix" /rocedp/connections) $(python3 "$tel" "$prefix" /rocedp/qps)"
[ "$(tel_get /rocedp/listeners "d['count'] == 4 and d['connections'] == [1, 1, 1, 1]")" = True ] ||
  fail "/rocedp/listeners: $(python3 "$tel" "$prefix" /rocedp/listeners)"

# One QP or engine row by port (QPNs and core indexes repeat across ports): rocedpctl qps --qpn
# and rdma --core with --port, by name and by port id, return that port's row; a port with no such
# QP, or no such port, is an error; --port alone is a usage error.
ctl=$bin_dir/rocedpctl
field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
for p in left right; do
  id=0
  [ "$p" = right ] && id=1
  for q in $(python3 "$tel" "$prefix" /rocedp/qps |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(*[q for q, p in zip(d["qpn"], d["port"]) if p == sys.argv[1]])' "$p"); do
    for sel in "$p" "$id"; do
      [ "$("$ctl" qps --qpn "$q" --port "$sel" --json --prefix "$prefix" | field port)" = "$p" ] ||
        fail "rocedpctl qps --qpn $q --port $sel: not port $p"
    done
  done
  [ "$("$ctl" rdma --core 0 --port "$p" --json --prefix "$prefix" | field port)" = "$p" ] ||
    fail "rocedpctl rdma --core 0 --port $p: not port $p"
done
if "$ctl" qps --qpn 99999 --port right --prefix "$prefix" > /dev/null 2>&1; then fail "qps: QPN 99999 found"; fi
if "$ctl" rdma --core 0 --port nosuch --prefix "$prefix" > /dev/null 2>&1; then fail "rdma: port nosuch found"; fi
st=0
"$ctl" qps --port right --prefix "$prefix" > /dev/null 2>&1 || st=$?
[ "$st" -eq 2 ] || fail "rocedpctl qps --port without --qpn: exit $st, expected 2 (usage)"

# Both clients disconnect and finish; the services close their side on both ports.
touch "$work/release"
for i in 0 1; do
  st=0
  wait "${pids[$i]}" || st=$?
  [ "$st" -eq 0 ] || fail "svc_client ${names[$i]} exit status $st"
  grep -q "^PASS" "$work/client-${names[$i]}.log" || fail "svc_client ${names[$i]} did not pass"
done
pids=()
wait_for /rocedp/connections "d['count'] == 0"
wait_for /rocedp/qps "d['count'] == 0"

# rocedp-perf with one file for both links: --config-port picks the right one (the other port stays
# closed); a name the file does not have is a usage error that lists the file's ports.
{
  echo "eal: {lcores: [0, 1], main_lcore: 1, memory_mb: 256, file_prefix: rdp-2p-perf-$$, extra_args: [\"--no-pci\"]}"
  echo "ports:"
  client_port a net_memif0 "$work/a.sock" 10
  client_port b net_memif1 "$work/b.sock" 11
  echo "dataplane: {lcores: [0], mbuf_count: 8191}"
} > "$work/both.yaml"
perf=$bin_dir/rocedp-perf
st=0
"$perf" --config "$work/both.yaml" --config-port b --connect 198.18.11.1:7001 --timeout 40 \
  write bw -s 4096 -n 64 --verify > "$work/perf.log" 2>&1 || st=$?
[ "$st" -eq 0 ] || { cat "$work/perf.log" >&2; fail "rocedp-perf --config-port b: exit $st"; }
grep -q "Connections     : 1 through the IB CM to 198.18.11.1:7001 (rocedpd memory service)" "$work/perf.log" ||
  fail "rocedp-perf --config-port b: not through the right port's memory service"
grep -q "verify: 64 messages of 4096 bytes checked byte for byte" "$work/perf.log" || fail "rocedp-perf --config-port b: verify"
# Each port it opens warns once that its MAC is set in software (memif has none of its own).
grep -q "event=port_mac_in_software port=b " "$work/perf.log" || fail "rocedp-perf --config-port b: port b not opened"
grep -q "event=port_mac_in_software port=a " "$work/perf.log" && fail "rocedp-perf --config-port b opened port a too"
st=0
"$perf" --config "$work/both.yaml" --config-port c --connect 198.18.11.1:7001 write bw > "$work/perf-bad.log" 2>&1 || st=$?
[ "$st" -eq 2 ] || fail "rocedp-perf --config-port c: exit $st, expected 2"
grep -q "no port named 'c' (its ports: a, b)" "$work/perf-bad.log" || fail "rocedp-perf --config-port c: $(cat "$work/perf-bad.log")"
wait_for /rocedp/connections "d['count'] == 0"

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"
[ "$(grep -c "event=connection_manager_detached" "$work/daemon.log")" -eq 2 ] ||
  fail "the two connection managers were not detached at shutdown"
echo PASS

#!/usr/bin/env bash
# /rocedp/qps while connections are up: rocedpd (memif server, memory service) and
# rocedp-perf --connect (memif client) running WRITE bw over 4 connections, three times.
#  - rocedpctl connections / qps (--json), while the load runs: 4 established connections, each
#    with qp_state RTS, and each QPN listed by qps with the connection's core and state RTS;
#  - qps_watch.py: every telemetry snapshot taken meanwhile lists each established connection's QP
#    with its owning core and state RTS. The daemon's core naps when idle (idle_sleep_us), which
#    stretches the snapshot rounds while connections come and go;
#  - 600 connections at once: more rows than one telemetry reply holds (DPDK 22.11: 512 values an
#    array, 16 KiB a reply, the rest left out silently), so /rocedp/qps and /rocedp/connections
#    answer in pages (first, returned, of count; `from=N` for the next) and rocedpctl joins them:
#    600 rows with every column;
#  - afterwards every other rocedpctl view answers in text and JSON (cores: every column).
# The load runs 5 s: on a busy host the CM exchange and each rocedpctl call take longer, and the
# checks need a window in which all 4 connections are up.
source "$(dirname "$0")/lib.sh"
need_root
perf=$bin_dir/rocedp-perf
ctl=$bin_dir/rocedpctl
[ -x "$perf" ] || fail "$perf not built"
trap 'stop_perf; cleanup' EXIT INT TERM

write_memif_pair_configs 1 7001 5000 10
sed -i 's/service: memory, memory_bytes: 1048576}/service: memory, memory_bytes: 1048576, max_connections: 1000}/' "$work/daemon.yaml"
grep -q "max_connections: 1000" "$work/daemon.yaml" || fail "the listener line changed: $(cat "$work/daemon.yaml")"
start_daemon "$work/daemon.yaml"
wait_for /rocedp/qps "d['count'] == 0"

for round in 1 2 3; do
  python3 "$here/qps_watch.py" "$prefix" 9 4 > "$work/watch.log" 2>&1 &
  watch=$!
  "$perf" --config "$work/client.yaml" --connect 198.18.1.1:7001 --timeout 40 write bw -s 4096 -q 4 -D 5 \
    > "$work/perf.log" 2>&1 &
  perf_pid=$!
  # What an operator sees with rocedpctl while the connections are up: each established connection
  # with its QP's state (one snapshot), and /rocedp/qps listing those QPs with core and state.
  seen=0
  for _ in $(seq 100); do
    kill -0 "$perf_pid" 2>/dev/null || break
    "$ctl" connections --prefix "$prefix" --json > "$work/conns.json" 2>/dev/null || true
    "$ctl" qps --prefix "$prefix" --json > "$work/qps.json" 2>/dev/null || true
    if python3 - "$work/conns.json" "$work/qps.json" <<'PY'
import json, sys
c, q = (json.load(open(f)) for f in sys.argv[1:3])
est = [r for r in c["connections"] if r["state"] == "established"]
qps = {r["qpn"]: r for r in q["qps"]}
sys.exit(0 if len(est) == 4 and all(r["qp_state"] == "RTS" for r in est)
         and all(r["qpn"] in qps and qps[r["qpn"]]["core"] == r["core"] and qps[r["qpn"]]["state"] == "RTS" for r in est)
         else 1)
PY
    then seen=1; break; fi
    sleep 0.05
  done
  [ "$seen" -eq 1 ] || { cat "$work/perf.log" >&2; fail "round $round: rocedpctl never showed 4 established connections with their QPs in RTS: $(cat "$work/conns.json" "$work/qps.json")"; }
  perf_status=0
  wait "$perf_pid" || perf_status=$?
  perf_pid=
  watch_status=0
  wait "$watch" || watch_status=$?
  cat "$work/watch.log"
  [ "$perf_status" -eq 0 ] || { cat "$work/perf.log" >&2; fail "round $round: rocedp-perf exit $perf_status"; }
  [ "$watch_status" -eq 0 ] || fail "round $round: /rocedp/qps did not match /rocedp/connections"
  # Between rounds: every QP is gone again.
  wait_for /rocedp/qps "d['count'] == 0"
  wait_for /rocedp/connections "d['count'] == 0"
done

# 600 connections: the tables come in pages, and rocedpctl shows every row with every column.
"$perf" --config "$work/client.yaml" --connect 198.18.1.1:7001 --timeout 60 write bw -s 64 -q 600 -D 8 \
  > "$work/perf600.log" 2>&1 &
perf_pid=$!
wait_for /rocedp/connections "d['count'] == 600"
wait_for /rocedp/qps "d['count'] == 600 and d['first'] == 0 and 0 < d['returned'] < 512 and len(d['qpn']) == d['returned'] and len(d['error_reason']) == d['returned']"
[ "$(tel_get /rocedp/qps,from=599 "(d['count'], d['first'], d['returned'], len(d['next_psn']))")" = "(600, 599, 1, 1)" ] ||
  fail "/rocedp/qps,from=599: $(tel_get /rocedp/qps,from=599 d)"
[ "$(tel_get /rocedp/qps,from=600 "(d['count'], d['returned'], d['qpn'])")" = "(600, 0, [])" ] ||
  fail "/rocedp/qps,from=600: $(tel_get /rocedp/qps,from=600 d)"
if tel_get /rocedp/qps,from=x d > /dev/null 2>&1; then fail "/rocedp/qps,from=x was not refused"; fi
"$ctl" qps --prefix "$prefix" --json > "$work/qps600.json" || fail "rocedpctl qps --json exited $?"
"$ctl" connections --prefix "$prefix" --json > "$work/conns600.json" || fail "rocedpctl connections --json exited $?"
"$ctl" qps --prefix "$prefix" > "$work/qps600.txt" || fail "rocedpctl qps exited $?"
python3 - "$work/qps600.json" "$work/conns600.json" "$work/qps600.txt" <<'PY' || fail "rocedpctl at 600 connections: $(head -c 600 "$work/qps600.json")"
import json, sys
q, c = (json.load(open(f)) for f in sys.argv[1:3])
text = open(sys.argv[3]).read().splitlines()
qcols = ["qpn", "core", "port", "state", "error_reason", "peer_qpn", "next_psn", "retransmits", "rate_cuts"]
ccols = ["local_ip", "remote_port", "state", "qpn", "service", "qp_state"]
qpns = [r["qpn"] for r in q["qps"]]
ok = (q["count"] == 600 and len(q["qps"]) == 600 and len(set(qpns)) == 600
      and all(all(k in r for k in qcols) and r["state"] == "RTS" for r in q["qps"])
      and c["count"] == 600 and len(c["connections"]) == 600
      and all(all(k in r for k in ccols) and r["qp_state"] == "RTS" for r in c["connections"])
      and len(text) == 601 and "-" not in text[600].split())
print("rocedpctl at 600 connections:", q["count"], "QPs,", c["count"], "connections,", len(text) - 1, "table rows")
sys.exit(0 if ok else 1)
PY
perf_status=0
wait "$perf_pid" || perf_status=$?
perf_pid=
[ "$perf_status" -eq 0 ] || { cat "$work/perf600.log" >&2; fail "600 connections: rocedp-perf exit $perf_status"; }
wait_for /rocedp/connections "d['count'] == 0"

# The operator's other views answer, as text and as JSON: the cores view has one row per polling
# core with every column the table prints (rx_pool_empty included), after traffic.
for view in status ports cores drops neighbours listeners rdma; do
  "$ctl" "$view" --prefix "$prefix" > "$work/$view.txt" || fail "rocedpctl $view exited $?"
  [ -s "$work/$view.txt" ] || fail "rocedpctl $view printed nothing"
  "$ctl" "$view" --prefix "$prefix" --json > "$work/$view.json" || fail "rocedpctl $view --json exited $?"
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/$view.json" ||
    fail "rocedpctl $view --json is not JSON: $(cat "$work/$view.json")"
done
python3 - "$work/cores.json" <<'PY' || fail "rocedpctl cores --json: $(cat "$work/cores.json")"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["cores"]
cols = ["core", "lcore", "busy_cycles", "idle_cycles", "polls", "rx_packets", "tx_packets",
        "handoff_in", "handoff_out", "to_control", "requests", "rx_pool_empty", "drops"]
sys.exit(0 if d["count"] == 1 and len(rows) == 1 and all(c in rows[0] for c in cols)
         and rows[0]["rx_packets"] > 0 else 1)
PY
grep -q "rx_pool_empty" "$work/cores.txt" || fail "rocedpctl cores has no rx_pool_empty column"
# The daemon's RC engine answered the three rounds of WRITEs: it received them and acknowledged
# them, and nothing reached it for a QP it does not have.
python3 - "$work/rdma.json" <<'PY' || fail "rocedpctl rdma --json: $(cat "$work/rdma.json")"
import json, sys
d = json.load(open(sys.argv[1]))
e = d["engines"]
sys.exit(0 if d["count"] == 1 and e[0]["core"] == 0 and e[0]["rx_packets"] > 0 and e[0]["acks_sent"] > 0
         and e[0]["tx_packets"] >= e[0]["acks_sent"] and e[0]["rx_drop_no_qp"] == 0
         and "spurious_timeouts" in e[0] and "tx_no_room" in e[0] else 1)
PY
"$ctl" rdma --core 0 --prefix "$prefix" > "$work/rdma0.txt" || fail "rocedpctl rdma --core 0 exited $?"
grep -Eq "^rx_packets: +[1-9]" "$work/rdma0.txt" || fail "rocedpctl rdma --core 0: $(cat "$work/rdma0.txt")"
if "$ctl" rdma --core 9 --prefix "$prefix" > /dev/null 2>&1; then fail "rocedpctl rdma --core 9 (no such core) exited 0"; fi

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"
echo PASS

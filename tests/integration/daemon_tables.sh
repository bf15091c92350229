#!/usr/bin/env bash
# Telemetry tables larger than one reply: rocedpd with 600 echo listeners. DPDK 22.11 holds at
# most 512 values an array and 16 KiB of JSON a reply and leaves out silently what does not fit,
# so /rocedp/listeners (like /rocedp/qps, /rocedp/connections, /rocedp/neighbours, /rocedp/cores
# and /rocedp/rdma) answers in pages: count, first, returned, then the columns; `,from=N` for the
# page from row N. rocedpctl listeners and rocedpctl metrics join the pages: every listener with
# every column, every listener's series. (600 QPs and connections: integration_daemon_qps.)
source "$(dirname "$0")/lib.sh"
need_root
ctl=$bin_dir/rocedpctl
n=600

write_svc_configs 1 "$prefix-c" < <(
  echo "listeners:"
  for i in $(seq 0 $((n - 1))); do echo "  - {port: memif0, nd_port: $((7000 + i)), service: echo}"; done
)
start_daemon "$work/server.yaml"

# The first page: all 16 columns, fewer than all rows; the pages from 0 cover the table once.
[ "$(tel_get /rocedp/listeners "(d['count'], d['first'], 0 < d['returned'] < $n, len(d['nd_port']) == d['returned'], len(d['data_moved']) == d['returned'])")" = "($n, 0, True, True, True)" ] ||
  fail "/rocedp/listeners: $(tel_get /rocedp/listeners "{k: v for k, v in d.items() if not isinstance(v, list)}")"
first=$(tel_get /rocedp/listeners "d['returned']")
[ "$(tel_get "/rocedp/listeners,from=$first" "(d['first'], d['nd_port'][0])")" = "($first, $((7000 + first)))" ] ||
  fail "/rocedp/listeners,from=$first: $(tel_get "/rocedp/listeners,from=$first" "d['nd_port'][:3]")"
[ "$(tel_get /rocedp/listeners,from=$n "(d['count'], d['returned'], d['port'])")" = "($n, 0, [])" ] || fail "/rocedp/listeners,from=$n"
if tel_get /rocedp/listeners,from=-1 d > /dev/null 2>&1; then fail "/rocedp/listeners,from=-1 was not refused"; fi
# The small tables come in one page.
[ "$(tel_get /rocedp/cores "(d['count'], d['first'], d['returned'], d['core'])")" = "(1, 0, 1, [0])" ] || fail "/rocedp/cores"
[ "$(tel_get /rocedp/rdma,from=1 "(d['count'], d['returned'])")" = "(1, 0)" ] || fail "/rocedp/rdma,from=1"

"$ctl" listeners --prefix "$prefix" --json > "$work/listeners.json" || fail "rocedpctl listeners --json exited $?"
"$ctl" listeners --prefix "$prefix" > "$work/listeners.txt" || fail "rocedpctl listeners exited $?"
"$ctl" metrics --prefix "$prefix" > "$work/metrics.txt" || fail "rocedpctl metrics exited $?"
python3 - "$work/listeners.json" "$work/listeners.txt" "$work/metrics.txt" "$n" <<'PY' || fail "rocedpctl: $(head -c 400 "$work/listeners.json")"
import json, re, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().splitlines()
metrics = open(sys.argv[3]).read()
n = int(sys.argv[4])
cols = ["port", "nd_port", "service", "max_connections", "connections", "accepted", "rejected", "failed",
        "closed", "echo_messages", "echo_bytes", "received_messages", "received_bytes", "sessions",
        "reports", "data_moved"]
rows = d["listeners"]
ports = sorted(int(m) for m in re.findall(r'^rocedp_listener_accepted_total\{[^}]*nd_port="(\d+)"', metrics, re.M))
ok = (d["count"] == n and len(rows) == n and [r["nd_port"] for r in rows] == list(range(7000, 7000 + n))
      and all(all(c in r for c in cols) and r["service"] == "echo" for r in rows)
      and len(text) == n + 1 and ports == list(range(7000, 7000 + n)))
print(f"rocedpctl: {d['count']} listeners, {len(text) - 1} table rows, {len(ports)} listeners in the metrics")
sys.exit(0 if ok else 1)
PY

stop_daemon TERM
[ "$daemon_status" -eq 0 ] || fail "exit status $daemon_status after SIGTERM"
echo PASS

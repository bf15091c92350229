#!/usr/bin/env bash
# tcp-perf (the kernel TCP baseline of scripts/bench_tcp.py) on loopback: bandwidth with one and
# several connections, a fixed-count run that must move exactly that many messages, latency in both
# socket modes, and the failure paths (no server, no client). Checks exit statuses and that the
# JSON rows carry sane fields. It guards the tool, not the numbers: no timed assertion.
# Every server is stopped by PID and the work folder removed on any exit. No root needed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${ROCEDP_BIN_DIR:-$here/../../build/bin}/tcp-perf
[ -x "$bin" ] || { echo "FAIL: $bin not built" >&2; exit 1; }

work=$(mktemp -d /tmp/tcp-perf-it.XXXXXX)
server_pid=
n=0
cleanup() {
  local rc=$?
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ $rc -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "---- $f"; tail -n 20 "$f"; } >&2; done
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# pair CHECK CLIENT_ARGS...: one server/client pair on 127.0.0.1; both must exit 0, then CHECK (a
# Python expression over the client's JSON row `r`) must hold.
pair() {
  local check=$1; shift
  n=$((n + 1))
  local port; port=$(free_port)
  "$bin" --server --port "$port" --timeout 15 > "$work/server$n.log" 2>&1 &
  server_pid=$!
  local crc=0 src=0
  "$bin" --client 127.0.0.1 --port "$port" --timeout 15 --json "$@" > "$work/client$n.json" 2> "$work/client$n.log" || crc=$?
  wait "$server_pid" || src=$?
  server_pid=
  echo "case $n: $* -> client $crc, server $src"
  [ "$crc" -eq 0 ] || fail "client exit $crc: $*"
  [ "$src" -eq 0 ] || fail "server exit $src: $*"
  python3 - "$work/client$n.json" "$check" <<'EOF' || fail "JSON check '$check' failed: $*"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert len(rows) == 1, f"{len(rows)} JSON rows"
r = rows[0]
print("  ", json.dumps(r))
ok = eval("(" + sys.argv[2] + ")", {}, {"r": r})  # the check may span lines
sys.exit(0 if ok else 1)
EOF
}

bw_sane='r["test"] == "send_bw" and r["iterations"] > 0 and r["elapsed_s"] > 0 and r["msg_rate_Mpps"] > 0
  and r["bw_avg_Gbps"] > 0 and r["bw_peak_MBps"] >= r["bw_avg_MBps"] > 0 and r["frames_per_msg"] > 0'
lat_sane='r["test"] == "send_lat" and r["iterations"] > 0 and 0 < r["t_min_usec"] <= r["t_typical_usec"]
  <= r["p99_usec"] <= r["p999_usec"] <= r["t_max_usec"] and abs(r["rtt_p50_usec"] - 2 * r["t_typical_usec"]) < 0.01
  and r["rtt_p99_usec"] >= r["rtt_p50_usec"]'

# Bandwidth for a second: one connection, then four (-q), 64 B and 4 KiB.
pair "$bw_sane"' and r["mode"] == "tcp" and r["size"] == 64 and r["qps"] == 1' send bw -s 64 -D 1
pair "$bw_sane"' and r["mode"] == "tcp-poll" and r["size"] == 4096 and r["qps"] == 4' send bw -s 4096 -q 4 -D 1 --poll
# A fixed count: exactly -n messages per connection, acknowledged and counted by the server
# (the client checks the server's byte count too), with a window of 3 and a torn-message-prone size.
pair "$bw_sane"' and r["iterations"] == 3 * 1000 and r["size"] == 1000 and r["tx_depth"] == 3' bw -s 1000 -n 1000 -q 3 -t 3
# Latency for a second in both socket modes, and a fixed count.
pair "$lat_sane"' and r["mode"] == "tcp" and r["size"] == 64' send lat -s 64 -D 1
pair "$lat_sane"' and r["mode"] == "tcp-poll"' lat -s 64 -D 1 --poll
pair "$lat_sane"' and r["iterations"] == 500 and r["size"] == 2 and r["frames_per_msg"] >= 1' lat -n 500

# Failure paths: a client with no server, a server with no client: both give up at --timeout (3).
rc=0; "$bin" --client 127.0.0.1 --port "$(free_port)" --timeout 1 --json lat > "$work/noserver.json" 2> "$work/noserver.log" || rc=$?
[ "$rc" -eq 3 ] || fail "client without a server: exit $rc, expected 3"
[ ! -s "$work/noserver.json" ] || fail "client without a server printed a result"
rc=0; "$bin" --server --port "$(free_port)" --timeout 1 > "$work/noclient.log" 2>&1 || rc=$?
[ "$rc" -eq 3 ] || fail "server without a client: exit $rc, expected 3"
# Usage errors: 2.
rc=0; "$bin" --client lat -q 2 > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "lat with two connections: exit $rc, expected 2"
echo "tcp_perf: all cases passed"

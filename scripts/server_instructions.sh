#!/bin/bash
# Instructions per message of the production receive path: a rocedp-perf --server (the responder,
# the end that bounds a two-process run) under callgrind, fed by a native rocedp-perf --client over
# net_memif, counted over the server's steady state only (its per-size loop, `server_size`:
# polls, memif's receive, classification, the engine, ACKs, mbuf frees). Deterministic up to the
# number of polls that find nothing; prints the total and the largest functions per message.
#   scripts/server_instructions.sh [BUILD_DIR] [rocedp-perf test args]   (default: write bw -s 64 -q 1)
# Needs root (EAL) and valgrind. The server runs 50-100 times slower under callgrind, so the client
# waits on its window and the count is of busy polls.
set -euo pipefail
build=${1:-build}
shift || true
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(write bw -s 64 -q 1)
n=200000
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/setup.sh)" >&2; exit 2; }
bin=$(cd "$build/bin" && pwd)/rocedp-perf
tmp=$(mktemp -d)
pre="rdp-srvins-$$"
port=$((20000 + $$ % 20000))
srv=""
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$tmp" "/var/run/dpdk/${pre}s" "/var/run/dpdk/${pre}c"
}
trap cleanup EXIT
sock=$tmp/memif.sock
common=(--oob-port "$port" --timeout 280 --memory-mb 512)
taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" --toggle-collect='*server_size*' \
  "$bin" --server --port-devargs "net_memif0,role=server,socket=$sock,socket-abstract=no" \
  --ip 198.18.10.1/24 --mac 02:00:00:00:0a:01 --lcore 0 --file-prefix "${pre}s" "${common[@]}" \
  >"$tmp/server.log" 2>&1 &
srv=$!
# The client retries its connection until the (slow) server listens.
ok=0
for _ in $(seq 1 60); do
  if taskset -c 1 "$bin" --client 127.0.0.1 --port-devargs "net_memif0,role=client,socket=$sock,socket-abstract=no" \
    --ip 198.18.10.2/24 --mac 02:00:00:00:0a:02 --lcore 1 --file-prefix "${pre}c" "${common[@]}" \
    "${args[@]}" -n "$n" >"$tmp/client.log" 2>&1; then
    ok=1
    break
  fi
  grep -q "cannot connect" "$tmp/client.log" || break
  sleep 1
done
[ $ok = 1 ] || { echo "client failed:" >&2; tail -5 "$tmp/client.log" >&2; exit 1; }
wait "$srv" || true
srv=""
msgs=$n
total=$(callgrind_annotate "$tmp/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1; exit}')
if [ -z "$total" ] || [ "$total" -eq 0 ]; then
  echo "no instructions collected:" >&2
  tail -5 "$tmp/server.log" >&2
  exit 1
fi
echo "rocedp-perf --server, ${args[*]} x $n: $((total / msgs)) instructions per message"
callgrind_annotate "$tmp/cg.out" 2>/dev/null | grep -E '^ *[0-9,]+ ' | sed -n '2,16p' |
  python3 -c '
import re, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
m = int(sys.argv[1])
for line in sys.stdin:
    count, rest = line.split(None, 1)
    rest = re.sub(r"^\([^)]*\) +", "", rest.strip())          # the percentage
    where, _, obj = rest.rpartition(" [")
    fn = where.split(":", 1)[1] if ":" in where else where     # after the file name
    depth, name = 0, ""
    for ch in fn:                                           # drop argument lists
        depth += ch == "("
        if depth == 0:
            name += ch
        depth -= ch == ")"
    lib = obj.rstrip("]").rsplit("/", 1)[-1]
    print("%8.1f  %s  (%s)" % (int(count.replace(",", "")) / m, name, lib))
' "$msgs"

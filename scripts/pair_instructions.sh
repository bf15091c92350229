#!/bin/bash
# Instructions per message of the production data path between two rocedp-perf processes over
# net_memif: one end under callgrind, the other native, counted over the measured end's steady
# state only. Deterministic up to the number of polls that find nothing; prints the total and the
# largest functions per message.
#   scripts/pair_instructions.sh [--client] [BUILD_DIR] [rocedp-perf test args]
#     (default: the server, write bw -s 64 -q 1)
#   PAIR_CALLGRIND_OUT=FILE keeps callgrind's output for a line-level callgrind_annotate.
# The server (the responder; its loop `server_size`: polls, memif's receive, classification, the
# engine, ACKs, mbuf frees) is measured by default; --client measures the requester instead (its
# loop `client_bw`: posts through the NDK layer, the engine's sends, memif's transmit, ACKs,
# completions). Needs root (EAL) and valgrind. The measured end runs 50-100 times slower under
# callgrind, so the other waits for it and the count is of busy polls.
set -euo pipefail
side=server
if [ "${1:-}" = --client ]; then
  side=client
  shift
fi
build=${1:-build}
shift || true
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(write bw -s 64 -q 1)
n=200000
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/setup.sh)" >&2; exit 2; }
bin=$(cd "$build/bin" && pwd)/rocedp-perf
tmp=$(mktemp -d)
pre="rdp-pairins-$$"
port=$((20000 + $$ % 20000))
srv=""
cleanup() {
  [ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$tmp" "/var/run/dpdk/${pre}s" "/var/run/dpdk/${pre}c"
}
trap cleanup EXIT
sock=$tmp/memif.sock
common=(--oob-port "$port" --timeout 280 --memory-mb 512)
grind=(valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out")
server_pre=() client_pre=()
if [ $side = server ]; then
  server_pre=("${grind[@]}" --toggle-collect='*server_size*')
else
  client_pre=("${grind[@]}" --toggle-collect='*client_bw*')
fi
taskset -c 0 "${server_pre[@]}" "$bin" --server \
  --port-devargs "net_memif0,role=server,socket=$sock,socket-abstract=no" \
  --ip 198.18.10.1/24 --mac 02:00:00:00:0a:01 --lcore 0 --file-prefix "${pre}s" "${common[@]}" \
  >"$tmp/server.log" 2>&1 &
srv=$!
# The client retries its connection until the server listens.
ok=0
for _ in $(seq 1 60); do
  if taskset -c 1 "${client_pre[@]}" "$bin" --client 127.0.0.1 \
    --port-devargs "net_memif0,role=client,socket=$sock,socket-abstract=no" \
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
[ -n "${PAIR_CALLGRIND_OUT:-}" ] && cp "$tmp/cg.out" "$PAIR_CALLGRIND_OUT"
total=$(callgrind_annotate "$tmp/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done {gsub(",","",$1); print $1; done = 1}')
if [ -z "$total" ] || [ "$total" -eq 0 ]; then
  echo "no instructions collected:" >&2
  tail -5 "$tmp/$side.log" >&2
  exit 1
fi
echo "rocedp-perf --$side, ${args[*]} x $n: $((total / msgs)) instructions per message"
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

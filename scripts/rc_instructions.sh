#!/bin/bash
# Instructions per message of the RC engine (bench_rc_engine's fixed-count mode under callgrind):
# total, and the requester side (A: its consumer's posts, its polls, its receive path, its CQ)
# and the responder side (B: the same) as World::batch splits them. Deterministic: the counts do
# not depend on the clock or on other load.
#   scripts/rc_instructions.sh [BUILD_DIR] [OP,SIZE,QPS ...]   (default: write,64,1 send,64,1 read,64,1)
set -euo pipefail
build=${1:-build}
shift || true
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(write,64,1 send,64,1 read,64,1)
batches=200
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/setup.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-16s %10s %10s %10s\n' workload total requester responder
for spec in "${specs[@]}"; do
  out=$tmp/cg.out
  ROCEDP_RC_FIXED_OPS=$spec,$batches valgrind --tool=callgrind --callgrind-out-file="$out" \
    --toggle-collect='*measured_batches*' "$build/bin/bench_rc_engine" >"$tmp/log" 2>&1
  msgs=$((batches * 32))
  callgrind_annotate --inclusive=yes "$out" 2>/dev/null >"$tmp/ann"
  total=$(awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1; exit}' "$tmp/ann")
  side() { awk -v pat="World::$1" 'index($0, pat) {gsub(",","",$1); s += $1} END {print s + 0}' "$tmp/ann"; }
  req=$(side requester_side)
  resp=$(side responder_side)
  printf '%-16s %10d %10d %10d\n' "$spec" $((total / msgs)) $((req / msgs)) $((resp / msgs))
done

#!/bin/bash
# Instructions per message of the RC engine (bench_rc_engine's fixed-count mode under callgrind):
# total, and the requester side (A: its consumer's posts, its polls, its receive path, its CQ)
# and the responder side (B: the same) as World::batch splits them. Deterministic: the counts do
# not depend on the clock or on other load.
#   scripts/rc_instructions.sh [BUILD_DIR] [OP,SIZE,QPS ...]   (default: write,64,1 send,64,1 read,64,1)
# RC_CACHE=1 adds the lines a message misses in callgrind's simulated caches (32 KiB L1 data,
# 32 MiB 16-way last level, the same on every machine; prefetches are not simulated, so every
# cold line a message reads counts): at 100,000 QPs, the lines of per-QP state a message touches.
set -euo pipefail
build=${1:-build}
shift || true
specs=("$@")
[ ${#specs[@]} -eq 0 ] && specs=(write,64,1 send,64,1 read,64,1)
batches=200
command -v valgrind >/dev/null || { echo "valgrind is not installed (scripts/setup.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cache=()
[ "${RC_CACHE:-0}" = 1 ] && cache=(--cache-sim=yes --D1=32768,8,64 --LL=33554432,16,64)
printf '%-16s %10s %10s %10s' workload total requester responder
[ ${#cache[@]} -gt 0 ] && printf ' %10s %10s' l1d_misses ll_misses
printf '\n'
for spec in "${specs[@]}"; do
  out=$tmp/cg.out
  ROCEDP_RC_FIXED_OPS=$spec,$batches valgrind --tool=callgrind "${cache[@]}" --callgrind-out-file="$out" \
    --toggle-collect='*measured_batches*' "$build/bin/bench_rc_engine" >"$tmp/log" 2>&1
  msgs=$((batches * 32))
  # Every function once (no source annotation, whose call lines repeat them; no threshold). A
  # side's functions are counted by their own entries in bench_rc_engine.cpp: the entries of code
  # inlined into them from other files are inside those already.
  callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$out" 2>/dev/null >"$tmp/ann"
  total=$(awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1; exit}' "$tmp/ann")
  side() {
    awk -v pat="World::$1" 'index($0, pat) && index($0, "bench_rc_engine.cpp:") {gsub(",","",$1); s += $1}
      END {print s + 0}' "$tmp/ann"
  }
  req=$(side requester_side)
  resp=$(side responder_side)
  printf '%-16s %10d %10d %10d' "$spec" $((total / msgs)) $((req / msgs)) $((resp / msgs))
  if [ ${#cache[@]} -gt 0 ]; then
    # PROGRAM TOTALS: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw (read and write misses added).
    callgrind_annotate --show-percs=no "$out" 2>/dev/null | tr -d , |
      awk -v m="$msgs" '/PROGRAM TOTALS/ {printf " %10.1f %10.1f", ($5 + $6) / m, ($8 + $9) / m}'
  fi
  printf '\n'
done

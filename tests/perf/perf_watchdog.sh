#!/usr/bin/env bash
# rocedp-perf's watchdog (apps/perf/watchdog.cpp): a process still alive a grace period after its
# --timeout (5 s for --timeout 1) prints what it was doing and ends with status 3, its results
# already printed still on stdout. The hang is the test hook ROCEDP_PERF_TEST_HANG_AT_EXIT (the
# process stays in main as one stuck on its way out); the run is rocedp-perf --raw --reflector on
# a net_ring port, which loops its frames back, so it needs no peer. Without the hook the same
# run exits 0 at once and says nothing of the watchdog.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${ROCEDP_BIN_DIR:-$here/../../build/bin}/rocedp-perf
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (EAL runtime directory)"; exit 77; }
[ -x "$bin" ] || { echo "FAIL: $bin not built" >&2; exit 1; }

work=$(mktemp -d /tmp/rocedp-perf-wd.XXXXXX)
pid=
cleanup() {
  local rc=$?
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  [ $rc -ne 0 ] && for f in "$work"/*; do [ -f "$f" ] && { echo "---- $f"; tail -n 20 "$f"; } >&2; done
  rm -rf "$work" "/var/run/dpdk/rdp-wd-$$-1" "/var/run/dpdk/rdp-wd-$$-2"
  exit $rc
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

# run N HOOK: one run; sets rc and secs.
run() {
  local n=$1 hook=$2 start
  start=$(date +%s%N)
  if [ "$hook" = 1 ]; then export ROCEDP_PERF_TEST_HANG_AT_EXIT=1; else unset ROCEDP_PERF_TEST_HANG_AT_EXIT; fi
  "$bin" --raw --reflector 02:00:00:00:00:09 --port-devargs net_ring0 --ip 198.18.11.1/24 \
    --file-prefix "rdp-wd-$$-$n" --memory-mb 256 --timeout 1 write lat -n 1000 \
    > "$work/out$n" 2> "$work/err$n" &
  pid=$!
  rc=0
  wait "$pid" || rc=$?
  pid=
  secs=$(( ($(date +%s%N) - start) / 1000000000 ))
  echo "run $n (hook $hook): exit $rc after ${secs} s"
}

run 1 0
[ "$rc" -eq 0 ] || fail "a clean run exited $rc"
[ "$secs" -lt 5 ] || fail "a clean run took $secs s"
grep -q "still running" "$work/err1" && fail "the watchdog spoke in a clean run"
grep -Eq '^ 2 +1000 ' "$work/out1" || fail "no result line in a clean run"

run 2 1
[ "$rc" -eq 3 ] || fail "a run stuck on its way out exited $rc, expected 3 (the watchdog)"
# --timeout 1 and a grace of 5 s: not before 6 s, and not much later.
if [ "$secs" -lt 5 ] || [ "$secs" -ge 15 ]; then fail "the watchdog ended the run after $secs s (expected about 6)"; fi
grep -q "rocedp-perf: still running 5 s after --timeout 1 s, while exiting: stopping (status 3)" "$work/err2" ||
  fail "no watchdog message naming the phase"
grep -Eq '^ 2 +1000 ' "$work/out2" || fail "the result printed before the hang was lost"
echo "PASS: perf_watchdog"

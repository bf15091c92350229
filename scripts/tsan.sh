#!/usr/bin/env bash
# Builds test_ndk_threads with ThreadSanitizer (build-tsan/, Debug: the owner-thread debug checks
# are on) and runs it: consumer threads drive the NDK API while another thread runs the cores and
# the control loop. Exit status: the test's (TSan reports fail it: halt_on_error).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DROCEDP_TSAN=ON >/dev/null
cmake --build "$root/build-tsan" -j "$(nproc)" --target test_ndk_threads
cd "$root/build-tsan"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  ./tests/test_ndk_threads "$@"

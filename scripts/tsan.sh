#!/usr/bin/env bash
# ThreadSanitizer pass (build-tsan/, Debug: the owner-thread debug checks are on) over the threaded
# tests: the lock-free CQ and work queues, the MR table's seqlock, the address registry, and
# test_ndk_threads (consumer threads drive the NDK API while another thread runs the cores and the
# control loop). Only their targets are built. TSan reports fail a test (halt_on_error), except
# the allocator false positive scripts/tsan.supp names.
#   scripts/tsan.sh [TEST...]   (default: all of them)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(test_rc_completion_queue test_rc_work_queue test_rc_memory_region
                                 test_address_registry test_ndk_threads)
cmake --preset tsan -S "$root" >/dev/null
cmake --build "$root/build-tsan" -j "$(nproc)" --target "${tests[@]}"
cd "$root/build-tsan"
regex="^($(IFS='|'; echo "${tests[*]}"))\$"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/scripts/tsan.supp ${TSAN_OPTIONS:-}" \
  ctest --output-on-failure --timeout 600 -R "$regex"

#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: every label in the Release tree (build/, gcc
# -O3), then the `unit` and `eal` tests again in a clang Debug tree under ASan+UBSan (the
# owner-thread assertions run there); then the lint (clang-format, clang-tidy) and the threaded
# tests under ThreadSanitizer. The sanitizer trees build only the targets of their tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Each phase's wall time goes to stderr ("== phase: N s"), so a CI log shows where its minutes go.
phase_start=$(date +%s) phase_name=setup
phase() {  # phase NAME: ends the running phase, starts NAME
  echo "== $phase_name: $(($(date +%s) - phase_start)) s" >&2
  phase_start=$(date +%s) phase_name=$1
}
trap 'phase end' EXIT
"$root/scripts/setup.sh"
phase build
"$root/scripts/build.sh" "$root/build"
phase rig
# The interop tests' Linux peer: the rig builds its guest (apt-get download, qemu) once, here rather
# than inside the first test's time limit.
if [ -x "$root/../shared/rig/up.sh" ]; then
  "$root/../shared/rig/up.sh" >/tmp/rocedp-rig-up.log 2>&1 || { cat /tmp/rocedp-rig-up.log >&2; exit 1; }
fi
phase ctest
# Two tests at a time: the interop and load tests (RUN_SERIAL) still run alone. Not one per CPU:
# the EAL tests and daemons pin their lcores to CPUs 0 and 1, so more at once would only crowd
# those two (measured on 2 CPUs: 1,247 s against 1,348 s one at a time).
(cd "$root/build" && ctest --output-on-failure --timeout 300 -j 2)
phase asan

# The `unit` and the `eal` tests (build-asan/, preset asan: clang, Debug at -O1, ASan+UBSan), with
# assert() and every `_st` owner check on (the Release build compiles them out), under
# AddressSanitizer with leak detection and UndefinedBehaviorSanitizer. Only their targets are built.
cmake --preset asan -S "$root" >/dev/null
check_tests=$(cd "$root" && ctest --preset asan -N | sed -n 's/^ *Test *#[0-9]*: *//p')
# shellcheck disable=SC2086
cmake --build "$root/build-asan" -j "$(nproc)" --target $check_tests
(cd "$root" && ctest --preset asan -j 2)  # its labels, ASAN_OPTIONS and UBSAN_OPTIONS

# Lint (scripts/lint.sh): clang-format over every file (seconds); clang-tidy over the files changed
# since main (the whole tree takes 15 min on 2 cores: `scripts/lint.sh` runs it).
phase lint
LINT_TIDY=0 "$root/scripts/lint.sh"
LINT_FORMAT=0 LINT_BUILD=build-asan "$root/scripts/lint.sh" --changed  # its compile commands hold every test

# ThreadSanitizer pass over the tests whose threads share our data structures directly (DPDK's
# own libraries are not instrumented, so EAL tests that hand frames between threads inside DPDK
# would report its internals; test_ndk_threads keeps those hand-offs on one thread).
phase tsan
"$root/scripts/tsan.sh"

#!/usr/bin/env bash
# Builds the check trees of scripts/test.sh next to build/ (which must be built): build-asan/ with
# the `unit` tests under ASan+UBSan, build-debug/ with the `eal` tests, build-tsan/ with
# scripts/tsan.sh's tests. Only those tests' targets are built.
#   scripts/build_checks.sh [BUILD-DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
tests_of() { (cd "$build" && ctest -N -L "$1" | sed -n 's/^ *Test *#[0-9]*: *//p'); }
unit_tests=$(tests_of unit)
eal_tests=$(tests_of eal)
cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DROCEDP_SANITIZE=ON >/dev/null
# shellcheck disable=SC2086
cmake --build "$root/build-asan" -j "$(nproc)" --target $unit_tests
cmake --preset debug -S "$root" >/dev/null
# shellcheck disable=SC2086
cmake --build "$root/build-debug" -j "$(nproc)" --target $eal_tests
"$root/scripts/tsan.sh" --build-only

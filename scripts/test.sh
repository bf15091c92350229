#!/usr/bin/env bash
# Installs, builds and runs the whole test suite, then the unit tests again under ASan+UBSan.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
# The interop tests' Linux peer: the rig builds its guest (apt-get download, qemu) once, here rather
# than inside the first test's time limit.
if [ -x "$root/../shared/rig/up.sh" ]; then
  "$root/../shared/rig/up.sh" >/tmp/rocedp-rig-up.log 2>&1 || { cat /tmp/rocedp-rig-up.log >&2; exit 1; }
fi
(cd "$root/build" && ctest --output-on-failure --timeout 300)

# Sanitizer pass: the `unit` tests (no EAL: DPDK's memory model and ASan do not mix). Only their
# targets are built, so the pass costs a fraction of a full build.
unit_tests=$(cd "$root/build" && ctest -N -L unit | sed -n 's/^ *Test *#[0-9]*: *//p')
cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DROCEDP_SANITIZE=ON >/dev/null
# shellcheck disable=SC2086
cmake --build "$root/build-asan" -j "$(nproc)" --target $unit_tests
(cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure --timeout 300 -L unit)

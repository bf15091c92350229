#!/usr/bin/env bash
# Installs, builds and runs the whole test suite, then the unit tests again under ASan+UBSan.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
(cd "$root/build" && ctest --output-on-failure --timeout 300)
# Sanitizer pass: unit tests only (no EAL: DPDK's memory model and ASan do not mix).
"$root/scripts/build.sh" "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DROCEDP_SANITIZE=ON
(cd "$root/build-asan" && ctest --output-on-failure --timeout 300 -L unit)

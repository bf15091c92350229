#!/usr/bin/env bash
# Configures and builds into build/ (or $1 with extra cmake arguments after it).
# ROCEDP_SKIP_TEST_LABELS (a ;-list, default none): the tests with these labels are left out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  "-DROCEDP_SKIP_TEST_LABELS=${ROCEDP_SKIP_TEST_LABELS:-}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"

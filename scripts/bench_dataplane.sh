#!/usr/bin/env bash
# Data-path benchmarks: rocedp-perf pairs over net_memif, each figure against the --raw baseline
# of the same run (scripts/bench_dataplane.py says how). Needs root (EAL) and 2 CPUs.
#   BUILD_DIR     build directory (default build/)
#   BENCH_ROUNDS  alternating rounds (default 5)
#   BENCH_SKIP_BUILD=1 to use an existing build
#   extra arguments go to scripts/bench_dataplane.py (e.g. --filter WRITE --duration 2)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
rounds=${BENCH_ROUNDS:-5}
if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
  cmake --build "$build" --target rocedp-perf -j"$(nproc)"
fi
echo "bench_dataplane: server on CPU 0, client on CPU 1 ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $rounds rounds" >&2
python3 "$root/scripts/bench_dataplane.py" --bin-dir "$build/bin" --out "$root/bench/results/latest.json" \
  --rounds "$rounds" "$@"

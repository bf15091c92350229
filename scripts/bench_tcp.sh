#!/usr/bin/env bash
# rocedp against kernel TCP in one run: rocedp-perf (net_memif) and tcp-perf (kernel TCP on
# 127.0.0.1) alternated with the same message size and count; scripts/bench_tcp.py says how.
# Needs root (EAL) and 2 CPUs; server on CPU 0, client on CPU 1 for both tools.
#   BUILD_DIR     build directory (default build/)
#   BENCH_ROUNDS  alternating rounds (default 5)
#   BENCH_SKIP_BUILD=1 to use an existing build
#   extra arguments go to scripts/bench_tcp.py (e.g. --filter latency --duration 2)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
rounds=${BENCH_ROUNDS:-5}
if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
  cmake --build "$build" --target rocedp-perf tcp-perf -j"$(nproc)"
fi
echo "bench_tcp: rocedp-perf vs tcp-perf, server on CPU 0, client on CPU 1 ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $rounds rounds" >&2
python3 "$root/scripts/bench_tcp.py" --bin-dir "$build/bin" --out "$root/bench/results/latest.json" \
  --rounds "$rounds" "$@"

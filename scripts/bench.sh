#!/usr/bin/env bash
# Builds, then runs the microbenchmarks in bench/ alternating baseline and
# subject (>= 5 rounds each), pinned with taskset to one core, and writes
# bench/results/latest.json and a Markdown table on stdout.
#   BUILD_DIR   build directory (default build/)
#   BENCH_CORE  core to pin to (default: the last core)
#   BENCH_ROUNDS alternating rounds (default 5)
#   BENCH_SKIP_BUILD=1 to use an existing build
#   extra arguments go to scripts/bench_report.py (e.g. --extra-rows rows.json)
#   BENCH_DATAPLANE=0 skips the rocedp-perf data-path rows (scripts/bench_dataplane.sh)
#   BENCH_TCP=0 skips the rocedp vs kernel TCP rows (scripts/bench_tcp.sh)
#   BENCH_LOSS=0 skips the goodput-under-loss rows and plot (scripts/bench_loss.py, plot_loss.py)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
core=${BENCH_CORE:-$(( $(nproc) - 1 ))}
rounds=${BENCH_ROUNDS:-5}
if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
  "$root/scripts/build.sh" "$build"
fi
echo "bench: pinned to core $core ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $rounds rounds" >&2
python3 "$root/scripts/bench_report.py" --bin-dir "$build/bin" --out "$root/bench/results/latest.json" \
  --core "$core" --rounds "$rounds" "$@"
# Data-path rows (rocedp-perf over memif vs its --raw baseline), merged into the same file.
# BENCH_DATAPLANE=0 skips them.
if [[ "${BENCH_DATAPLANE:-1}" == 1 ]]; then
  BUILD_DIR=$build BENCH_ROUNDS=$rounds BENCH_SKIP_BUILD=1 "$root/scripts/bench_dataplane.sh"
fi
# rocedp against kernel TCP (rocedp-perf vs tcp-perf, alternated), merged into the same file.
if [[ "${BENCH_TCP:-1}" == 1 ]]; then
  BUILD_DIR=$build BENCH_ROUNDS=$rounds BENCH_SKIP_BUILD=1 "$root/scripts/bench_tcp.sh"
fi
# Goodput and latency under random loss, each lossy run alternated with a clean one (>= 3 rounds),
# then the goodput-vs-loss plot bench/results/loss.svg.
if [[ "${BENCH_LOSS:-1}" == 1 ]]; then
  cmake --build "$build" --target rocedp-perf -j"$(nproc)" >/dev/null
  python3 "$root/scripts/bench_loss.py" --bin-dir "$build/bin" --out "$root/bench/results/latest.json" \
    --rounds "$(( rounds < 3 ? 3 : rounds ))"
  python3 "$root/scripts/plot_loss.py"
fi

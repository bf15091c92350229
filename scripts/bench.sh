#!/usr/bin/env bash
# Every benchmark row of the README in one command: builds, then runs the groups below, each
# subject alternated with its baseline in the same run (>= 5 rounds: medians, ratio min-max), and
# merges the rows into bench/results/latest.json (a Markdown table of each group on stdout).
#
#   scripts/bench.sh [--groups LIST] [--rounds N] [--cores N] [--duration S] [-- bench_report.py args]
#
# Groups (default: all, in this order):
#   micro      codec, RC engine and connection microbenchmarks (bench/, one core; bench_report.py)
#   dataplane  rocedp-perf pairs over net_memif: round trips vs the --raw frame bounce, 100,000 QPs
#              vs 1 QP (scripts/bench_dataplane.py)
#   wire       rocedp-perf vs dpdk-testpmd txonly->rxonly, same frames, same memif link and CPUs
#   tcp        rocedp-perf SEND vs sockperf over kernel TCP (throughput and ping-pong)
#   daemon     rocedpd's echo, memory and perftest services vs two rocedp-perf processes
#   cores      one rocedpd with --cores polling lcores vs 1 (--cores N for a bigger host)
#   sizes      WRITE message rate vs size, 64 B to 64 KiB, rocedp vs testpmd, and the plot
#              bench/results/rate_vs_size.svg (scripts/plot_rate.py)
#   loss       goodput and latency under random loss, and bench/results/loss.svg
#   ecn        goodput of an ECN-capable sender (DCQCN) under CE marking, WRITE and READ
#              (scripts/bench_ecn.py)
#   ipv6       WRITE 64 B message rate and 4 KiB goodput over IPv6 vs IPv4 (scripts/bench_ipv6.py)
# (wire, tcp, daemon, cores, sizes: scripts/bench_baselines.py, which says how each is measured.)
#
# Environment: BUILD_DIR (default build/), BENCH_ROUNDS (5), BENCH_GROUPS, BENCH_CORES (2),
# BENCH_DURATION (seconds per throughput run, 3), BENCH_CORE (core of the micro group: the last),
# BENCH_SKIP_BUILD=1 (use the existing build). Fewer than 5 rounds is a smoke run of the harness:
# its rows are marked "smoke": true and are not measurements. Needs root (EAL) and 2 CPUs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
rounds=${BENCH_ROUNDS:-5}
groups=${BENCH_GROUPS:-micro,dataplane,wire,tcp,daemon,cores,sizes,loss,ecn,ipv6}
cores=${BENCH_CORES:-2}
duration=${BENCH_DURATION:-3}
core=${BENCH_CORE:-$(( $(nproc) - 1 ))}
while [[ $# -gt 0 ]]; do
  case $1 in
    --groups) groups=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --cores) cores=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
out=$root/bench/results/latest.json
has() { [[ ",$groups," == *",$1,"* ]]; }

if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
  "$root/scripts/setup.sh"
  "$root/scripts/build.sh" "$build"
fi
echo "bench: groups $groups, $rounds rounds, $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

min5=$(( rounds < 5 ? 5 : rounds ))
if has micro; then
  # bench_report.py rewrites the file with its rows unless --only: keep everyone else's rows.
  python3 "$root/scripts/bench_report.py" --bin-dir "$build/bin" --out "$out" --core "$core" --rounds "$min5" "$@"
fi
if has dataplane; then
  python3 "$root/scripts/bench_dataplane.py" --bin-dir "$build/bin" --out "$out" --rounds "$rounds"
fi
baseline_groups=()
for g in wire tcp daemon cores sizes; do has "$g" && baseline_groups+=("$g"); done
if [[ ${#baseline_groups[@]} -gt 0 ]]; then
  python3 "$root/scripts/bench_baselines.py" --bin-dir "$build/bin" --out "$out" --rounds "$rounds" \
    --duration "$duration" --cores "$cores" --groups "$(IFS=,; echo "${baseline_groups[*]}")"
fi
if has sizes; then
  # Debian's python3 has matplotlib (scripts/setup.sh); a python3 of its own may not.
  py=python3
  [[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
  "$py" "$root/scripts/plot_rate.py" --in "$out" --out "$root/bench/results/rate_vs_size.svg"
fi
# Goodput and latency under random loss, each lossy run alternated with a clean one (>= 3 rounds),
# then the goodput-vs-loss plot bench/results/loss.svg.
if has loss; then
  python3 "$root/scripts/bench_loss.py" --bin-dir "$build/bin" --out "$out" --rounds "$(( rounds < 3 ? 3 : rounds ))"
  python3 "$root/scripts/plot_loss.py"
fi
# An --ecn sender (WRITE: the client; READ: the server) and a receiver whose port marks CE on a
# share of what it receives, each marked run alternated with an unmarked one (>= 3 rounds).
if has ecn; then
  python3 "$root/scripts/bench_ecn.py" --bin-dir "$build/bin" --out "$out" --rounds "$(( rounds < 3 ? 3 : rounds ))"
fi
# The same WRITEs with the QPs over IPv6 and over IPv4, alternated (>= 3 rounds).
if has ipv6; then
  python3 "$root/scripts/bench_ipv6.py" --bin-dir "$build/bin" --out "$out" --rounds "$(( rounds < 3 ? 3 : rounds ))"
fi

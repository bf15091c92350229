#!/usr/bin/env bash
# Installs every package rocedp needs to build, test, benchmark and run (Debian 12, as root).
# Idempotent and quiet: does nothing when all packages are present; on failure prints apt's log.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3
  libdpdk-dev dpdk dpdk-dev libnuma-dev   # EAL, ethdev, rings, vdev PMDs, dpdk-telemetry.py
  libtbb-dev                              # control-plane concurrent tables
  libyaml-cpp-dev                         # configuration
  libgtest-dev libgmock-dev               # tests
  libbenchmark-dev                        # microbenchmarks
  libisal-dev                             # vectorised CRC-32 for the ICRC
  libpcap-dev                             # reading and writing pcap files
  libcli11-dev                            # command lines of the apps
  nlohmann-json3-dev                      # JSON output of the apps
  libcpp-httplib-dev                      # rocedpctl metrics --listen (Prometheus scrapes)
  zlib1g-dev                              # independent CRC-32 in tests
  python3-scapy tshark                    # independent decoders (roce-check)
  python3-prometheus-client               # independent parser of rocedpctl metrics in tests
  iproute2 iputils-ping procps tcpdump    # network namespaces, veth, ping, captures in tests
  nftables                                # random loss on the interop bridge (no sch_netem here)
  libibverbs-dev librdmacm-dev            # the Linux side of interop_rdma_cm's ops-check cases
  sockperf                                # kernel TCP baseline of scripts/bench.sh
  python3-matplotlib                      # message rate vs size plot (scripts/plot_rate.py)
  clang libclang-rt-dev                   # the sanitizer trees (build-asan, build-tsan)
  clang-format clang-tidy                 # scripts/lint.sh
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
log=$(mktemp /tmp/rocedp-setup.XXXXXX.log)
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  echo "setup.sh: apt-get failed; log follows" >&2
  cat "$log" >&2
  exit 1
fi
rm -f "$log"

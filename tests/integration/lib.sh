# Helpers for the rocedpd integration tests (sourced). Every test:
#   - works in its own temporary directory and EAL file prefix (tests may run in parallel),
#   - stops the daemon by PID and removes its files on every exit path (trap).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../scripts/lib/stop_pid.sh"
bin_dir=${ROCEDP_BIN_DIR:-$here/../../build/bin}
shared_dir=${ROCEDP_SHARED_DIR:-$here/../../../shared}
rocedpd=$bin_dir/rocedpd
tel=$here/telemetry_query.py

work=$(mktemp -d /tmp/rocedp-it.XXXXXX)
prefix=rdp-it-$(basename "$0" .sh)-$$
daemon_pid=

cleanup() {
  local rc=${exit_status:-$?}
  stop_pid "$daemon_pid"
  if [ $rc -ne 0 ] && [ -f "$work/daemon.log" ]; then
    echo "---- daemon log ----" >&2
    tail -n 60 "$work/daemon.log" >&2
  fi
  rm -rf "$work" "/var/run/dpdk/$prefix"
  exit $rc
}
trap cleanup EXIT INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }; }

# write_pcap_config FILE: one net_pcap port replaying the Soft-RoCE capture; we are the rping server
# (198.18.0.11, 02:52:17:00:00:0b), so half of the capture is addressed to us.
write_pcap_config() {
  cat > "$1" <<YAML
eal:
  lcores: [0, 1]
  main_lcore: 0
  memory_mb: 256
  file_prefix: $prefix
  extra_args: ["--no-pci"]
ports:
  - name: p0
    devargs: net_pcap0,rx_pcap=$shared_dir/captures/rxe-rping.pcap,tx_pcap=$work/tx.pcap
    mac: "02:52:17:00:00:0b"
    address: 198.18.0.11/24
dataplane:
  lcores: [1]
  mbuf_count: 4095
telemetry:
  stats_interval_ms: 20
YAML
}

# A rocedp-perf client in the background ($perf_pid, EAL prefix $prefix-c). stop_perf stops it by
# PID, so a test's trap can run `stop_perf; cleanup`. It keeps the test's exit status in
# $exit_status for cleanup and returns 0: returning the status would end the trap there under
# set -e, and cleanup would leave the daemon running.
perf_pid=
stop_perf() {
  exit_status=${exit_status:-$?}
  stop_pid "$perf_pid" 30
  rm -rf "/var/run/dpdk/$prefix-c"
  return 0
}

# write_memif_pair_configs OCTET ND_PORT IDLE_SLEEP_US STATS_MS: $work/daemon.yaml (memif server
# 198.18.OCTET.1 with a memory service on ND_PORT) and $work/client.yaml (memif client
# 198.18.OCTET.2 for rocedp-perf), joined by the socket $work/memif.sock.
write_memif_pair_configs() {
  local o=$1 sock=$work/memif.sock
  cat > "$work/daemon.yaml" <<YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $prefix, extra_args: ["--no-pci"]}
ports:
  - name: memif0
    devargs: net_memif0,role=server,socket=$sock,socket-abstract=no
    mac: "02:00:00:00:0$o:01"
    address: 198.18.$o.1/24
    neighbours: [{ip: 198.18.$o.2, mac: "02:00:00:00:0$o:02"}]
dataplane: {lcores: [1], mbuf_count: 8191, idle_sleep_us: $3}
telemetry: {stats_interval_ms: $4}
listeners:
  - {port: memif0, nd_port: $2, service: memory, memory_bytes: 1048576}
YAML
  cat > "$work/client.yaml" <<YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $prefix-c, extra_args: ["--no-pci"]}
ports:
  - name: memif0
    devargs: net_memif0,role=client,socket=$sock,socket-abstract=no
    mac: "02:00:00:00:0$o:02"
    address: 198.18.$o.2/24
    neighbours: [{ip: 198.18.$o.1, mac: "02:00:00:00:0$o:01"}]
dataplane: {lcores: [1], mbuf_count: 8191}
telemetry: {enabled: false}
YAML
}

# start_daemon CONFIG: runs rocedpd in the background (log in $work/daemon.log) and waits until it
# logs event=running; fails if it exits first.
start_daemon() {
  "$rocedpd" --config "$1" > "$work/daemon.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 600); do
    grep -q "event=running" "$work/daemon.log" 2>/dev/null && return 0
    kill -0 "$daemon_pid" 2>/dev/null || { wait "$daemon_pid" || true; fail "rocedpd exited during start-up"; }
    sleep 0.1
  done
  fail "rocedpd did not reach event=running"
}

# stop_daemon SIGNAL: sends SIGNAL to the daemon and returns its exit status in $daemon_status.
stop_daemon() {
  kill "-$1" "$daemon_pid"
  daemon_status=0
  wait "$daemon_pid" || daemon_status=$?
  daemon_pid=
}

# write_svc_configs OCTET CLIENT_PREFIX < SERVER_TAIL: $work/server.yaml, rocedpd as memif server
# 198.18.OCTET.1 (its polling core on lcore 1), its further sections (limits, listeners) from
# stdin; and $work/client.yaml, a memif client 198.18.OCTET.2 for svc_client (EAL prefix
# CLIENT_PREFIX), which polls on lcore 0 and runs main() on lcore 1, so the two processes' polling
# cores do not share a CPU. Joined by the socket $work/memif.sock.
write_svc_configs() {
  local o=$1 sock=$work/memif.sock
  {
    cat <<YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $prefix, extra_args: ["--no-pci"]}
ports:
  - name: memif0
    devargs: net_memif0,role=server,socket=$sock
    mac: "02:00:00:00:0$o:01"
    address: 198.18.$o.1/24
    neighbours: [{ip: 198.18.$o.2, mac: "02:00:00:00:0$o:02"}]
dataplane: {lcores: [1], mbuf_count: 8191}
telemetry: {stats_interval_ms: 20}
YAML
    cat
  } > "$work/server.yaml"
  cat > "$work/client.yaml" <<YAML
eal: {lcores: [0, 1], main_lcore: 1, memory_mb: 256, file_prefix: $2, extra_args: ["--no-pci"]}
ports:
  - name: memif0
    devargs: net_memif0,role=client,socket=$sock
    mac: "02:00:00:00:0$o:02"
    address: 198.18.$o.2/24
    neighbours: [{ip: 198.18.$o.1, mac: "02:00:00:00:0$o:01"}]
dataplane: {lcores: [0], mbuf_count: 8191}
telemetry: {enabled: false}
YAML
}

# svc_client_ready PID LOG: waits (up to 60 s) until the svc_client process PID printed READY in
# LOG, its connections made and checked; fails if it exits first.
svc_client_ready() {
  for _ in $(seq 600); do
    grep -q READY "$2" 2>/dev/null && return 0
    kill -0 "$1" 2>/dev/null || fail "svc_client ($2) exited before READY"
    sleep 0.1
  done
  fail "svc_client ($2) never got READY"
}

# tel_get COMMAND EXPR: evaluates EXPR over the command's JSON value `d`.
tel_get() { python3 "$tel" "$prefix" "$1" "$2"; }

# wait_for COMMAND EXPR: polls telemetry until EXPR is true (bounded; no time is asserted).
wait_for() {
  for _ in $(seq 300); do
    [ "$(tel_get "$1" "$2" 2>/dev/null || true)" = "True" ] && return 0
    sleep 0.1
  done
  fail "telemetry $1: never true: $2 (last: $(python3 "$tel" "$prefix" "$1" 2>&1 || true))"
}

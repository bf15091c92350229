#!/usr/bin/env bash
# rocedpd's sd_notify sequence (packaging/rocedpd.service is Type=notify), checked without systemd:
# notify_check.py owns the NOTIFY_SOCKET datagram socket and starts the daemon (net_memif server
# port, echo + memory listeners): READY=1 only once ports are up and listeners listen, RELOADING=1
# and READY=1 on SIGHUP, STOPPING=1 on SIGTERM, exit 0.
source "$(dirname "$0")/lib.sh"
need_root
cat > "$work/notify.yaml" <<YAML
eal: {lcores: [0, 1], main_lcore: 0, memory_mb: 256, file_prefix: $prefix, extra_args: ["--no-pci"]}
ports:
  - name: memif0
    devargs: net_memif0,role=server,socket=$work/memif.sock,socket-abstract=no
    mac: "02:00:00:00:01:01"
    address: 198.18.1.1/24
dataplane: {lcores: [1], mbuf_count: 4095}
listeners:
  - {port: memif0, nd_port: 7000, service: echo}
  - {port: memif0, nd_port: 7001, service: memory}
YAML
python3 "$here/notify_check.py" "$rocedpd" "$work/notify.yaml" "$prefix" "$work" || fail "notification sequence"
grep -q "event=reload_done" "$work/daemon.log" || fail "no reload_done in the log"
echo PASS

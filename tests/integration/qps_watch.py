#!/usr/bin/env python3
"""Watch a rocedpd's telemetry while connections come and go, and check every snapshot: each
established connection's QP is listed by /rocedp/qps with the same QPN and core, in state RTS.

usage: qps_watch.py FILE_PREFIX SECONDS MIN_CONNECTIONS
Reads /rocedp/control, /rocedp/connections, /rocedp/qps, /rocedp/control on one socket as fast as
it can; a sample counts only when the snapshot sequence did not change in between (one snapshot).
Exit 0 when at least one snapshot showed MIN_CONNECTIONS established connections and no snapshot
broke the rule; 1 otherwise (the offending snapshot is printed)."""
import json
import socket
import sys
import time


def main():
    prefix, seconds, want = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2")
    info = json.loads(s.recv(16384))

    def q(cmd):
        s.send(cmd.encode())
        return json.loads(s.recv(info["max_output_len"]))[cmd]

    end = time.time() + seconds
    seen, checked, full = set(), 0, 0
    while time.time() < end:
        before = q("/rocedp/control")["snapshot_sequence"]
        conns, qps = q("/rocedp/connections"), q("/rocedp/qps")
        if q("/rocedp/control")["snapshot_sequence"] != before or before in seen:
            continue
        seen.add(before)
        checked += 1
        by_qpn = {qpn: (core, state) for qpn, core, state in zip(qps["qpn"], qps["core"], qps["state"])}
        established = [(qpn, core) for qpn, core, state in zip(conns["qpn"], conns["core"], conns["state"])
                       if state == "established"]
        if len(established) >= want:
            full += 1
        for qpn, core in established:
            if by_qpn.get(qpn) != (core, "RTS"):
                print(f"snapshot {before}: connection QPN {qpn} (core {core}) established, /rocedp/qps has "
                      f"{by_qpn.get(qpn)}\n  connections: {json.dumps(conns)}\n  qps: {json.dumps(qps)}")
                return 1
    print(f"{checked} snapshots checked, {full} with {want} established connections")
    return 0 if full > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

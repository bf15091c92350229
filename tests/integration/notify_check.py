#!/usr/bin/env python3
"""sd_notify protocol check without systemd: owns a unix datagram socket, starts rocedpd with
NOTIFY_SOCKET pointing at it, and asserts the notification sequence.

usage: notify_check.py ROCEDPD CONFIG PREFIX WORKDIR
 1. nothing but STATUS= before READY=1; when READY=1 arrives the daemon's telemetry already shows
    every port started with link up and every listener (rocedpctl is not needed: the socket is read
    directly), i.e. READY=1 only after ports are up and listeners are listening;
 2. SIGHUP -> RELOADING=1, then READY=1 again, with STATUS=running when the file is the same
    but for comments, logging and listeners (applied live: /rocedp/listeners shows the new set),
    and saying a restart is needed when more changed;
 3. SIGTERM -> STOPPING=1, then the process exits 0.
Exit 0 on success, 1 with the received messages on failure."""
import json
import os
import signal
import socket
import subprocess
import sys
import time


def tel(prefix, cmd):
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.connect(f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2")
        info = json.loads(s.recv(16384))
        s.send(cmd.encode())
        return json.loads(s.recv(info["max_output_len"]))[cmd]


def main():
    rocedpd, config, prefix, work = sys.argv[1:5]
    path = os.path.join(work, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(60)
    env = dict(os.environ, NOTIFY_SOCKET=path)
    log = open(os.path.join(work, "daemon.log"), "w")
    proc = subprocess.Popen([rocedpd, "--config", config], stdout=log, stderr=subprocess.STDOUT, env=env)
    got = []

    def fail(why):
        print(f"FAIL: {why}\nmessages: {got}", file=sys.stderr)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        return 1

    def until(key):
        while True:
            try:
                msg = sock.recv(4096).decode()
            except socket.timeout:
                return None
            fields = dict(line.split("=", 1) for line in msg.split("\n") if "=" in line)
            got.append(fields)
            if key in fields:
                return fields

    try:
        ready = until("READY")
        if ready is None:
            return fail("no READY=1")
        # Ports up and listeners listening at the moment READY=1 was sent: the telemetry socket
        # exists (installed before ports start) and shows it.
        ports = tel(prefix, "/rocedp/ports")
        # Started, not necessarily linked: a memif server has no link until a client comes.
        if ports["started"] != [1] * len(ports["name"]):
            return fail(f"READY=1 before ports were up: {ports}")
        listeners = tel(prefix, "/rocedp/listeners")
        if listeners["count"] != 2 or sorted(listeners["nd_port"]) != [7000, 7001]:
            return fail(f"READY=1 without listeners: {listeners}")
        # Each listener logged service_listening (after its Listen call succeeded) before READY=1.
        with open(os.path.join(work, "daemon.log")) as f:
            if f.read().count("event=service_listening") != 2:
                return fail("READY=1 before both listeners logged service_listening")
        status = tel(prefix, "/rocedp/status")
        if status["state"] != "running" or status["pid"] != proc.pid:
            return fail(f"/rocedp/status: {status}")
        if any(k not in ("STATUS",) for m in got[:-1] for k in m):
            return fail("something other than STATUS= before READY=1")
        if not ready.get("STATUS", "").startswith("running") or ready.get("MAINPID") != str(proc.pid):
            return fail(f"READY message: {ready}")
        # Reloads: the file as it was, then with a comment and another logging level (applied
        # live: STATUS=running), then with a listener more (applied live: it listens), then with
        # the memory listener gone and another pool size (the listener stops; the pool needs a
        # restart, and the status says so).
        with open(config) as f:
            original = f.read()
        memory_line = "  - {port: memif0, nd_port: 7001, service: memory}\n"
        if memory_line not in original or "mbuf_count: 4095" not in original:
            return fail("the configuration is not the one this check edits")
        edits = [
            (original, "running", [7000, 7001]),
            ("# edited\n" + original.replace("eal:", "logging: {level: debug}\neal:", 1), "running",
             [7000, 7001]),
            (original + "  - {port: memif0, nd_port: 7002, service: echo}\n", "running",
             [7000, 7001, 7002]),
            (original.replace(memory_line, "").replace("mbuf_count: 4095", "mbuf_count: 8191"),
             "running; other changes to the file apply on restart", [7000]),
        ]
        for text, status, nd_ports in edits:
            with open(config, "w") as f:
                f.write(text)
            proc.send_signal(signal.SIGHUP)
            reloading = until("RELOADING")
            if reloading is None or reloading.get("RELOADING") != "1":
                return fail("no RELOADING=1 after SIGHUP")
            again = until("READY")
            if again is None:
                return fail("no READY=1 after the reload")
            if again.get("STATUS") != status:
                return fail(f"reload status {again.get('STATUS')!r}, expected {status!r}")
            listeners = tel(prefix, "/rocedp/listeners")
            if sorted(listeners["nd_port"]) != nd_ports:
                return fail(f"listeners after the reload: {listeners}, expected nd_ports {nd_ports}")
        # Stop.
        proc.send_signal(signal.SIGTERM)
        stopping = until("STOPPING")
        if stopping is None or stopping.get("STOPPING") != "1":
            return fail("no STOPPING=1 after SIGTERM")
        rc = proc.wait(timeout=60)
        if rc != 0:
            return fail(f"exit status {rc}")
        print("notifications:", [sorted(m) for m in got])
        return 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()


if __name__ == "__main__":
    sys.exit(main())

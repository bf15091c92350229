#!/usr/bin/env python3
"""rocedp against independent baselines, alternated in one run (DESIGN.md section 8): each round
runs the baseline, then the subject; a row's value and baseline are medians over the rounds, its
ratio the median of the per-round ratios subject/baseline, with min-max.

Groups (--groups, comma-separated):
  wire    rocedp-perf over net_memif vs dpdk-testpmd (txonly -> rxonly) over the same memif link
          with frames of the same size: WRITE 64 B message rate (target >= 0.8), WRITE 4 KiB
          bandwidth (target >= 0.9), SEND 64 B message rate, WRITE 64 B at 64 QPs; and WRITE 64 B
          ping-pong against the same frames bounced by testpmd's macswap (rocedp-perf --raw
          --reflector times them).
  tcp     rocedp-perf SEND 64 B vs sockperf over kernel TCP on loopback: throughput (`sockperf tp
          --tcp -m 64`, target >= 15x) and ping-pong half round trip (`sockperf pp --tcp -m 64`,
          p50 target <= 0.1x; p99 shown).
  daemon  rocedpd's services vs the same operation between two rocedp-perf processes through the
          IB CM: SEND 64 B ping-pong through the echo service (target <= 1.5x the pair's half
          round trip) and WRITE 64 KiB bandwidth into the memory service (target >= 0.8x); and
          the perftest service against rocedp-perf's own perftest server, the same `rocedp-perf
          --perftest -R` client for both: WRITE 64 KiB and SEND 4 KiB bandwidth (target >= 0.8x).
  cores   one rocedpd with N polling lcores (--cores) vs the same daemon with 1: WRITE 64 B
          message rate into the memory service from N rocedp-perf clients, one per daemon core.
  sizes   WRITE message rate against message size, 64 B to 64 KiB, rocedp-perf vs testpmd with
          frames of the RDMA run's average frame size (messages/s = frames/s / frames per
          message); scripts/plot_rate.py draws it.

Pinning (2 CPUs): every server on CPU 0, every client on CPU 1, two processes, EAL --no-huge and
a file prefix of their own. testpmd maps its main lcore and its one forwarding lcore onto the same
CPU (--lcores 0@C,1@C: the main lcore only sleeps between statistics), forwards one port
(--port-topology=loop) and prints port statistics every second (--stats-period 1) through
line-buffered stdout (stdbuf -oL). Its rate is the receiver's Rx-pps, the median of the full
one-second periods after the first (the first and the last period with traffic are partial).
sockperf runs `sr` on CPU 0 and `tp`/`pp` on CPU 1 over 127.0.0.1 (the kernel does the receiver's
TCP work in the sender's system call); it reports latency as half the round trip, as perftest.

Where the two CPUs sit (every group): before, between and after the two runs of a round
they measure one cache line's round trip between the two CPUs (build/bin/cpu_pair_rtt; see
scripts/bench_dataplane.py); a round whose three probes fall on one side of --near-ns counts for
that placement, and each row also gives its ratio per placement ("near", "far") over those rounds.

Rows are merged into --out (bench/results/latest.json): a row of the same name is replaced.
"""
import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dataplane import NEAR_NS, by_placement, free_port, merge_rows, probed, run_pair  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, 1
PERFTEST_MSG = 4096  # the perftest listener's receive size: the SEND row's message size
PMTU = 1024  # rocedp-perf's path MTU on its default 1500-byte port MTU
HDR = 14 + 20 + 8 + 12 + 4  # Ethernet, IPv4, UDP, BTH, ICRC
RETH = 16


def write_frames(size, pmtu=PMTU):
    """Frames of a WRITE of `size` bytes and their total length (the first carries the RETH)."""
    n = max(1, math.ceil(size / pmtu))
    return n, size + n * HDR + RETH


def send_frames(size, pmtu=PMTU):
    n = max(1, math.ceil(size / pmtu))
    return n, size + n * HDR


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def stop(proc, sig=signal.SIGINT, timeout=15):
    """Ends one process we started: `sig`, then SIGKILL after `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---- dpdk-testpmd ---------------------------------------------------------------------------------

def testpmd_cmd(cpu, prefix, devargs, mode, extra):
    return (["stdbuf", "-oL", "taskset", "-c", str(cpu), "dpdk-testpmd", "--lcores", f"0@{cpu},1@{cpu}",
             "--no-huge", "-m", "256", "--file-prefix", prefix, "--no-pci", "--no-telemetry", "--vdev", devargs, "--",
             f"--forward-mode={mode}", "--stats-period", "1", "--port-topology=loop", "--nb-cores=1",
             "--total-num-mbufs=8192"] + extra)


def testpmd_rate(frame, duration, tag):
    """txonly (client, CLIENT_CPU) -> rxonly (server, SERVER_CPU) over a fresh memif link with
    `frame`-byte frames for duration + 2 s. Returns (pps median, [full-period pps])."""
    with tempfile.TemporaryDirectory(prefix="rdp-tpmd-") as d:
        sock = os.path.join(d, "memif.sock")
        pre = f"rdp-tpmd-{os.getpid()}-{tag}"
        rx_log, tx_log = os.path.join(d, "rx.log"), os.path.join(d, "tx.log")
        with open(rx_log, "w") as rxf, open(tx_log, "w") as txf:
            rx = subprocess.Popen(testpmd_cmd(SERVER_CPU, pre + "s", f"net_memif0,role=server,socket={sock},socket-abstract=no",
                                              "rxonly", []), stdout=rxf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            tx = None
            try:
                # The receiver forwards (its port started) before the sender connects: a memif
                # client that meets a server not started yet may never come up.
                for _ in range(600):
                    with open(rx_log) as f:
                        if "start packet forwarding" in f.read() or rx.poll() is not None:
                            break
                    time.sleep(0.1)
                tx = subprocess.Popen(testpmd_cmd(CLIENT_CPU, pre + "c", f"net_memif0,role=client,socket={sock},socket-abstract=no",
                                                  "txonly", [f"--txpkts={frame}"]),
                                      stdout=txf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                # Until the receiver printed the first (partial) period with traffic and `duration`
                # full ones after it (EAL start-up takes seconds on a loaded machine).
                deadline = time.time() + duration + 60
                while time.time() < deadline and rx.poll() is None and tx.poll() is None:
                    with open(rx_log) as f:
                        if sum(1 for v in re.findall(r"Rx-pps:\s+(\d+)", f.read()) if int(v) > 0) >= duration + 1:
                            break
                    time.sleep(0.2)
                time.sleep(0.5)
            finally:
                if tx is not None:
                    stop(tx)
                time.sleep(1.2)  # one more (empty) period on the receiver
                stop(rx)
                for p in (pre + "s", pre + "c"):
                    subprocess.run(["rm", "-rf", f"/var/run/dpdk/{p}"])
        with open(rx_log) as f:
            text = f.read()
        with open(tx_log) as f:
            tx_text = f.read()
    pps = [int(x) for x in re.findall(r"Rx-pps:\s+(\d+)", text)]
    live = [i for i, v in enumerate(pps) if v > 0]
    if len(live) < 3:
        raise RuntimeError(f"testpmd {frame} B: fewer than 3 periods with traffic: {pps}; "
                           f"receiver: {text[-300:]} sender: {tx_text[:1200]} ... {tx_text[-300:]}")
    full = pps[live[0] + 1:live[-1]]  # drop the first and the last period with traffic (partial)
    return statistics.median(full), full


def testpmd_bounce(perf, args, tag):
    """The wire's round trip with testpmd as the far end: rocedp-perf --raw --reflector (CLIENT_CPU,
    the memif server: it times each message's frames until they are back) against dpdk-testpmd
    --forward-mode=macswap (SERVER_CPU, the memif client), which swaps the MACs of every frame and
    sends it back. Returns rocedp-perf's JSON row (half the round trip, as perftest)."""
    with tempfile.TemporaryDirectory(prefix="rdp-tpmb-") as d:
        sock = os.path.join(d, "memif.sock")
        pre = f"rdp-tpmb-{os.getpid()}-{tag}"
        mac = "02:00:00:00:0b:01"
        cli = subprocess.Popen(["taskset", "-c", str(CLIENT_CPU), perf, "--raw", "--reflector", mac, "--port-devargs",
                                f"net_memif0,role=server,socket={sock},socket-abstract=no", "--ip", "198.18.11.2/24",
                                "--mac", "02:00:00:00:0b:02", "--lcore", str(CLIENT_CPU), "--file-prefix", pre + "c",
                                "--timeout", "60", "--json"] + args,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tp = None
        try:
            for _ in range(300):
                if os.path.exists(sock) or cli.poll() is not None:
                    break
                time.sleep(0.1)
            tp = subprocess.Popen(testpmd_cmd(SERVER_CPU, pre + "s",
                                              f"net_memif0,role=client,socket={sock},socket-abstract=no,mac={mac}",
                                              "macswap", []),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            out, err = cli.communicate(timeout=120)
        finally:
            if cli.poll() is None:
                stop(cli)
            if tp is not None:
                stop(tp)
            for p in (pre + "s", pre + "c"):
                subprocess.run(["rm", "-rf", f"/var/run/dpdk/{p}"])
        if cli.returncode != 0:
            raise RuntimeError(f"rocedp-perf --raw --reflector {' '.join(args)}: exit {cli.returncode}: {err[-800:]}")
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# ---- sockperf -------------------------------------------------------------------------------------

def sockperf(mode, size, duration):
    """sockperf sr on SERVER_CPU and `mode` (tp|pp) on CLIENT_CPU, TCP on 127.0.0.1. Returns
    {'msg_rate': msg/s} for tp, {'p50_usec', 'p99_usec', 'avg_usec'} (half round trip) for pp."""
    port = str(free_port())
    srv = subprocess.Popen(["taskset", "-c", str(SERVER_CPU), "sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", port],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        cli = subprocess.run(["taskset", "-c", str(CLIENT_CPU), "sockperf", mode, "--tcp", "-i", "127.0.0.1", "-p", port,
                              "-m", str(size), "-t", str(duration)], capture_output=True, text=True, timeout=duration + 60)
    finally:
        stop(srv, signal.SIGTERM, 5)
    out = cli.stdout + cli.stderr
    if cli.returncode != 0:
        raise RuntimeError(f"sockperf {mode}: exit {cli.returncode}: {out[-600:]}")
    if mode == "tp":
        m = re.search(r"Message Rate is (\d+) \[msg/sec\]", out)
        if not m:
            raise RuntimeError(f"sockperf tp: no message rate: {out[-600:]}")
        return {"msg_rate": int(m.group(1))}
    p50 = re.search(r"percentile 50\.000 =\s+([\d.]+)", out)
    p99 = re.search(r"percentile 99\.000 =\s+([\d.]+)", out)
    avg = re.search(r"Latency is ([\d.]+) usec", out)
    if not (p50 and p99 and avg):
        raise RuntimeError(f"sockperf pp: no percentiles: {out[-600:]}")
    return {"p50_usec": float(p50.group(1)), "p99_usec": float(p99.group(1)), "avg_usec": float(avg.group(1))}


# ---- rocedpd and rocedp-perf --listen/--connect -----------------------------------------------------

def _json_rows(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _wait_for(path, needle, proc, what, timeout=60, ready=None):
    """Until `needle` is in the log at `path` (or `ready()` holds), while `proc` runs."""
    ready = ready or (lambda: needle in open(path).read())
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited during start-up: {open(path).read()[-800:]}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up: {open(path).read()[-800:]}")


def daemon_yaml(d, prefix, cores, clients, netns=None):
    """rocedpd: polling lcores 0..cores-1 (CPU = lcore), main lcore `cores` on CPU 0 (it sleeps:
    eal.main_lcore_cpu), an echo (ND port 7000), a memory (7001) and a perftest (7002, its SENDs
    counted and dropped) listener. Over memif: one memif server port (one client).
    With `netns`: one net_af_packet port on veth d0 of that namespace with `cores` queue pairs
    (the kernel spreads flows over them by hash), its clients on the same bridge."""
    lines = [f"eal: {{lcores: [{', '.join(str(i) for i in range(cores + 1))}], main_lcore: {cores}, main_lcore_cpu: 0, memory_mb: 512, "
             f"file_prefix: {prefix}, extra_args: [\"--no-pci\"]}}", "ports:"]
    if netns is None:
        lines += ["  - name: memif0",
                  f"    devargs: net_memif0,role=server,socket={d}/memif0.sock,socket-abstract=no",
                  "    mac: \"02:00:00:00:10:01\"",
                  "    address: 198.18.10.1/24",
                  "    neighbours: [{ip: 198.18.10.2, mac: \"02:00:00:00:10:02\"}]"]
    else:
        lines += ["  - name: veth0",
                  f"    devargs: net_af_packet0,iface=d0,qpairs={cores}",
                  "    mac: \"02:00:00:00:20:01\"",
                  "    address: 198.18.20.1/24",
                  "    neighbours: [" + ", ".join(f"{{ip: 198.18.20.{k + 2}, mac: \"02:00:00:00:20:{k + 2:02x}\"}}"
                                                for k in range(clients)) + "]"]
    lines += [f"dataplane: {{lcores: [{', '.join(str(i) for i in range(cores))}], mbuf_count: 16383}}",
              "telemetry: {enabled: false}", "listeners:",
              f"  - {{port: {'memif0' if netns is None else 'veth0'}, nd_port: 7000, service: echo, message_bytes: 4096, queue_depth: 64}}",
              f"  - {{port: {'memif0' if netns is None else 'veth0'}, nd_port: 7001, service: memory, memory_bytes: 16777216}}",
              f"  - {{port: {'memif0' if netns is None else 'veth0'}, nd_port: 7002, service: perftest, memory_bytes: 1048576, "
              f"message_bytes: {PERFTEST_MSG}, queue_depth: 256}}"]
    path = os.path.join(d, "daemon.yaml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def client_cmd(binary, d, k, cpu, prefix, target, args, netns=None, perftest=False):
    """rocedp-perf --connect (with `perftest`: --perftest -R, perftest's client), polling inline on
    its main lcore on CPU `cpu`, with the server's MAC as a static neighbour (no ARP to lose on a
    loaded machine): over memif (the memif0 socket in `d`) or, with `netns`, over net_af_packet on
    veth c<k> of that namespace."""
    cfg = os.path.join(d, f"client{k}.yaml")
    if netns is None:
        port = (f"    devargs: net_memif0,role=client,socket={d}/memif0.sock,socket-abstract=no\n"
                f"    mac: \"02:00:00:00:10:02\"\n    address: 198.18.10.2/24\n"
                f"    neighbours: [{{ip: 198.18.10.1, mac: \"02:00:00:00:10:01\"}}]\n")
    else:
        port = (f"    devargs: net_af_packet0,iface=c{k}\n"
                f"    mac: \"02:00:00:00:20:{k + 2:02x}\"\n    address: 198.18.20.{k + 2}/24\n"
                f"    neighbours: [{{ip: 198.18.20.1, mac: \"02:00:00:00:20:01\"}}]\n")
    with open(cfg, "w") as f:
        # rocedp-perf keeps main_lcore and polls inline on it; the dataplane lcore only passes the
        # file's checks.
        f.write(f"eal: {{lcores: [{cpu}, {cpu + 1}], main_lcore: {cpu}, memory_mb: 512, file_prefix: {prefix}, "
                f"extra_args: [\"--no-pci\"]}}\nports:\n  - name: port0\n" + port +
                f"dataplane: {{lcores: [{cpu + 1}], mbuf_count: 16383}}\ntelemetry: {{enabled: false}}\n")
    ns = ["ip", "netns", "exec", netns] if netns else []
    host, port = target.split(":")
    mode = ["--perftest", host, "-R", "-p", port] if perftest else ["--connect", target, "--json"]
    return ns + ["taskset", "-c", str(cpu), binary, "--config", cfg, "--timeout", "120"] + mode + args


def perftest_bw(text):
    """The BW average column of `rocedp-perf --perftest`'s bandwidth table (perftest's own
    layout: #bytes, #iterations, BW peak, BW average, MsgRate), one row."""
    rows = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d+\s+\d+(\s+[\d.]+){3}\s*$", ln)]
    if len(rows) != 1:
        raise RuntimeError(f"expected one perftest bandwidth row, got {len(rows)}: {text[-400:]}")
    return float(rows[0][3])


def run_clients(cmds, what, parse=None):
    """Starts every client at once; returns their JSON rows (one list per client), or what
    `parse` makes of each client's output."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{what}: client exit {p.returncode}: {e[-800:]} {o[-800:]}")
        outs.append(parse(o) if parse else _json_rows(o))
    return outs


def make_bridge(netns, clients):
    """A network namespace of our own with bridge br0 joining veth d0 (the daemon's end) and
    c0..c<clients-1> (the clients' ends); IPv6 off so the kernel sends nothing on them."""
    sh = lambda *c: subprocess.run(["ip", "netns", "exec", netns] + list(c), check=True, capture_output=True)  # noqa: E731
    subprocess.run(["ip", "netns", "add", netns], check=True, capture_output=True)
    sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
    sh("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
    sh("ip", "link", "add", "br0", "type", "bridge")
    sh("ip", "link", "set", "br0", "up")
    for name in ["d0"] + [f"c{k}" for k in range(clients)]:
        sh("ip", "link", "add", name, "type", "veth", "peer", "name", name + "b")
        sh("ip", "link", "set", name + "b", "master", "br0")
        sh("ip", "link", "set", name + "b", "up")
        sh("ip", "link", "set", name, "up")


def daemon_run(bins, args, tag, nd_port, cores=1, clients=1, afpacket=False, perftest=False):
    """rocedpd (polling lcores on CPUs 0..cores-1) and `clients` rocedp-perf --connect clients
    (with `perftest`: --perftest -R clients, each returning its bandwidth), client k on CPU
    cores+k (CLIENT_CPU when the host has no more CPUs: shared then). Over one memif link (one
    client), or with `afpacket` over veths on a bridge in a namespace of ours."""
    with tempfile.TemporaryDirectory(prefix="rdp-bd-") as d:
        pre = f"rdp-bd-{os.getpid()}-{tag}"
        netns = f"rdp-cores-{os.getpid()}-{tag}" if afpacket else None
        cfg = daemon_yaml(d, pre + "d", cores, clients, netns)
        dlog = os.path.join(d, "daemon.log")
        dproc = None
        try:
            if netns:
                make_bridge(netns, clients)
            with open(dlog, "w") as lf:
                dproc = subprocess.Popen((["ip", "netns", "exec", netns] if netns else []) + [bins["rocedpd"], "--config", cfg],
                                         stdout=lf, stderr=subprocess.STDOUT)
            _wait_for(dlog, "event=running", dproc, "rocedpd")
            ncpu = os.cpu_count() or 2
            ip = "198.18.20.1" if netns else "198.18.10.1"
            # CPUs 0..cores-1 poll for the daemon (its main lcore sleeps on CPU 0); clients after them.
            cmds = [client_cmd(bins["rocedp-perf"], d, k, cores + k if cores + k < ncpu else CLIENT_CPU,
                               f"{pre}c{k}", f"{ip}:{nd_port}", args, netns, perftest) for k in range(clients)]
            try:
                return run_clients(cmds, f"rocedpd {' '.join(args)}", perftest_bw if perftest else None)
            except RuntimeError as e:
                with open(dlog) as f:
                    raise RuntimeError(f"{e}; rocedpd log tail: {f.read()[-800:]}") from None
        finally:
            if dproc is not None:
                stop(dproc, signal.SIGTERM, 20)
            if netns:
                subprocess.run(["ip", "netns", "del", netns], capture_output=True)
            subprocess.run(["rm", "-rf", f"/var/run/dpdk/{pre}d"] + [f"/var/run/dpdk/{pre}c{k}" for k in range(clients)])


def listen_run(bins, args, tag, perftest=False):
    """rocedp-perf --listen (memif server, CPU 0) and rocedp-perf --connect (client, CPU 1): the
    client's JSON rows. With `perftest`: rocedp-perf --perftest's server and its -R client, the
    client's bandwidth."""
    binary = bins["rocedp-perf"]
    with tempfile.TemporaryDirectory(prefix="rdp-bl-") as d:
        pre = f"rdp-bl-{os.getpid()}-{tag}"
        slog = os.path.join(d, "listen.log")
        sock = os.path.join(d, "memif0.sock")
        port = "7002" if perftest else "9000"
        mode = ["--perftest"] + args + ["-R", "-p", port] if perftest else ["--listen", port]
        with open(slog, "w") as lf:
            srv = subprocess.Popen(["taskset", "-c", str(SERVER_CPU), binary] + mode + ["--port-devargs",
                                    f"net_memif0,role=server,socket={sock},socket-abstract=no",
                                    "--ip", "198.18.10.1/24", "--mac", "02:00:00:00:10:01", "--lcore", str(SERVER_CPU),
                                    "--file-prefix", pre + "s", "--timeout", "120", "--memory-mb", "512"],
                                   stdout=lf, stderr=subprocess.STDOUT)
        try:
            # The perftest server listens once its link is up, i.e. once the client is on the memif
            # link: its client starts when the socket is there (and retries until it listens).
            _wait_for(slog, "listening on", srv, f"rocedp-perf {mode[0]}",
                      ready=(lambda: os.path.exists(sock)) if perftest else None)
            out = run_clients([client_cmd(binary, d, 0, CLIENT_CPU, pre + "c", f"198.18.10.1:{port}", args,
                                          perftest=perftest)],
                              f"rocedp-perf {mode[0]} {' '.join(args)}", perftest_bw if perftest else None)[0]
            try:
                srv.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            return out
        finally:
            stop(srv, signal.SIGTERM, 10)
            subprocess.run(["rm", "-rf", f"/var/run/dpdk/{pre}s", f"/var/run/dpdk/{pre}c"])


def mode_row(rows):
    return [x for x in rows if "mode" in x][0]


# ---- rows -----------------------------------------------------------------------------------------

def retry(fn, *a, attempts=3, **kw):
    """A run that fails on a shared machine (a peer starved past a time limit, a memif peer not
    listening yet) runs again, up to `attempts` times in all; every retry is printed."""
    for k in range(attempts):
        try:
            return fn(*a, **kw)
        except (RuntimeError, subprocess.TimeoutExpired, IndexError) as e:
            if k + 1 == attempts:
                raise
            log(f"  retrying after: {str(e)[:300]}")


def alternate(a, name, one_round):
    """Runs one_round(k) -> (subject, baseline) for each round. A round whose runs failed even
    after retries is left out and counted (the row says how many); None when every round failed."""
    subj, base, failed = [], [], []
    for k in range(a.rounds):
        try:
            sv, bv = one_round(k)
        except (RuntimeError, subprocess.TimeoutExpired, IndexError) as e:
            log(f"  {name}: round {k} failed: {str(e)[:400]}")
            failed.append(str(e)[:400])
            continue
        subj.append(sv)
        base.append(bv)
    if not subj:
        log(f"  {name}: every round failed")
        return None
    return subj, base, failed


def make_row(name, unit, subj, base, ratio_of, target, subject, baseline_name, how, rounds, **extra):
    ratios = [ratio_of(s, b) for s, b in zip(subj, base)]
    r = {"name": name, "value": round(statistics.median(subj), 4), "unit": unit, "subject": subject,
         "baseline_name": baseline_name, "baseline_value": round(statistics.median(base), 4),
         "ratio": round(statistics.median(ratios), 4), "ratio_min": round(min(ratios), 4),
         "ratio_max": round(max(ratios), 4), "rounds": rounds, "how": how,
         "subject_values": [round(x, 4) for x in subj], "baseline_values": [round(x, 4) for x in base]}
    if target:
        op, bound = target.split()
        r["target"] = target
        r["meets_target"] = r["ratio"] >= float(bound) if op == ">=" else r["ratio"] <= float(bound)
    r.update(extra)
    t = f", target {target}: {'met' if r['meets_target'] else 'not met'}" if target else ""
    log(f"  {name}: {r['value']} {unit} vs {r['baseline_value']} {unit}, ratio {r['ratio']} "
        f"[{r['ratio_min']}-{r['ratio_max']}]{t}")
    return r


def failed_row(name, group_how, errors):
    return {"name": name, "failed": True, "errors": errors, "how": group_how}


def finish(rows, name, res, unit, target, subject, baseline_name, how, a, pick=None, probes=None, **extra):
    """Appends the row for `res` (alternate()'s result); pick(x) takes the metric from a run;
    `probes` (probed()'s, one per round kept) adds the ratio per CPU placement."""
    if res is None:
        rows.append(failed_row(name, how, ["every round failed"]))
        return
    subj, base, failed = res
    if pick:
        subj, base = [pick[0](x) for x in subj], [pick[1](x) for x in base]
    if probes:
        extra.update(by_placement(subj, base, probes, a.near_ns))
    r = make_row(name, unit, subj, base, lambda s, b: s / b if b else float("nan"), target, subject, baseline_name, how,
                 len(subj), **extra)
    if failed:
        r["rounds_failed"] = len(failed)
        r["errors"] = failed
    rows.append(r)


def group_wire(a, bins):
    D = a.duration
    cases = [  # name, rocedp-perf args, message size, operation, target
        ("WRITE 64 B message rate, 1 QP, vs testpmd (138-byte frames)", ["write", "bw", "-s", "64", "-q", "1"], 64, "write", ">= 0.8"),
        ("WRITE 64 B message rate, 64 QPs, vs testpmd (138-byte frames)", ["write", "bw", "-s", "64", "-q", "64"], 64, "write", None),
        ("WRITE 4 KiB bandwidth, 1 QP, vs testpmd (the same bytes per message, 4 frames)", ["write", "bw", "-s", "4096", "-q", "1"], 4096, "write", ">= 0.9"),
        ("SEND 64 B message rate, 1 QP, vs testpmd (122-byte frames)", ["send", "bw", "-s", "64", "-q", "1"], 64, "send", None),
    ]
    rows = []
    for i, (name, args, size, op, target) in enumerate(cases):
        if a.filter not in name:
            continue
        nf, total = (write_frames if op == "write" else send_frames)(size)
        frame = round(total / nf)

        probes = []

        def one(k):
            (pps, _), s = probed(bins["cpu_pair_rtt"], probes, k, lambda: retry(testpmd_rate, frame, D, f"w{i}{k}"),
                                 lambda: mode_row(retry(run_pair, bins["rocedp-perf"], args + ["-D", str(D)], f"w{i}s{k}")),
                                 a.near_ns)
            if size == 64:
                return s["msg_rate_Mpps"], pps / 1e6
            # Payload bandwidth: testpmd's frames carry the same bytes per message.
            return s["bw_avg_Gbps"], pps / nf * size * 8 / 1e9

        how = (f"rocedp-perf --server (CPU 0) / --client (CPU 1) {' '.join(args)} -D {D} over net_memif; "
               f"dpdk-testpmd rxonly (CPU 0) <- txonly --txpkts={frame} (CPU 1) over net_memif, Rx-pps median of full 1 s periods"
               + ("" if size == 64 else f"; testpmd's rate as payload: pps / {nf} frames x {size} B"))
        finish(rows, name, alternate(a, name, one), "Mmsg/s" if size == 64 else "Gb/s", target,
               "rocedp-perf:" + " ".join(args), f"dpdk-testpmd txonly->rxonly --txpkts={frame}", how, a,
               probes=probes, frame_bytes=frame, frames_per_msg=nf)
    # The round trip against testpmd as the far end: rocedp's WRITE ping-pong between two
    # rocedp-perf against the same 138-byte frames bounced by testpmd's macswap.
    names = [f"WRITE 64 B ping-pong, half round trip {p}, vs testpmd macswap bounce (138-byte frames)" for p in ("p50", "p99")]
    if any(a.filter in n for n in names):
        # -D: steady state (20,000 round trips take 20 ms, and their p99 is the first ones').
        args = ["write", "lat", "-s", "64", "-D", str(D)]
        probes = []

        def one(k):
            b, s = probed(bins["cpu_pair_rtt"], probes, k,
                          lambda: mode_row(retry(testpmd_bounce, bins["rocedp-perf"], args, f"b{k}")),
                          lambda: mode_row(retry(run_pair, bins["rocedp-perf"], args, f"bs{k}")), a.near_ns)
            return s, b
        res = alternate(a, names[0], one)
        how = (f"rocedp-perf --server (CPU 0) / --client (CPU 1) write lat -s 64 -D {D} over net_memif, half the round "
               f"trip as perftest; rocedp-perf --raw --reflector (CPU 1) write lat -s 64 -D {D} timing the same frames "
               "bounced by dpdk-testpmd --forward-mode=macswap (CPU 0) over net_memif")
        for n, key, target in ((names[0], "t_typical_usec", None), (names[1], "p99_usec", None)):
            finish(rows, n, res, "us", target, "rocedp-perf:" + " ".join(args),
                   "dpdk-testpmd macswap <- rocedp-perf --raw --reflector " + " ".join(args), how, a,
                   pick=(lambda x, key=key: x[key], lambda x, key=key: x[key]), probes=probes)
    return rows


def group_tcp(a, bins):
    D = a.duration
    rows = []
    name = "SEND 64 B message rate vs kernel TCP (sockperf tp --tcp -m 64)"
    if a.filter in name:
        probes = []

        def one(k):
            b, s = probed(bins["cpu_pair_rtt"], probes, k, lambda: retry(sockperf, "tp", 64, D)["msg_rate"] / 1e6,
                          lambda: mode_row(retry(run_pair, bins["rocedp-perf"],
                                                 ["send", "bw", "-s", "64", "-q", "1", "-D", str(D)], f"t{k}")),
                          a.near_ns)
            return s["msg_rate_Mpps"], b
        finish(rows, name, alternate(a, name, one), "Mmsg/s", ">= 15", "rocedp-perf:send bw -s 64 -q 1",
               f"sockperf tp --tcp -m 64 -t {D}", "rocedp-perf pair over net_memif (server CPU 0, client CPU 1); "
               "sockperf sr (CPU 0) / tp (CPU 1) over 127.0.0.1", a, probes=probes)
    names = [f"SEND 64 B ping-pong, half round trip {p}, vs kernel TCP (sockperf pp --tcp -m 64)" for p in ("p50", "p99")]
    if any(a.filter in n for n in names):
        probes = []

        def one(k):
            b, s = probed(bins["cpu_pair_rtt"], probes, k, lambda: retry(sockperf, "pp", 64, D),
                          lambda: mode_row(retry(run_pair, bins["rocedp-perf"],
                                                 ["send", "lat", "-s", "64", "-n", "20000"], f"l{k}")),
                          a.near_ns)
            return s, b
        res = alternate(a, names[0], one)
        how = ("rocedp-perf send lat -s 64 -n 20000 over net_memif (server CPU 0, client CPU 1), half the round trip as perftest; "
               f"sockperf sr (CPU 0) / pp --tcp -m 64 -t {D} (CPU 1) over 127.0.0.1, its latency = half the round trip")
        for n, sk, rk, target in ((names[0], "p50_usec", "t_typical_usec", "<= 0.1"), (names[1], "p99_usec", "p99_usec", None)):
            finish(rows, n, res, "us", target, "rocedp-perf:send lat -s 64", "sockperf pp --tcp -m 64", how, a,
                   pick=(lambda x, rk=rk: x[rk], lambda x, sk=sk: x[sk]), probes=probes)
    return rows


def group_daemon(a, bins):
    D = a.duration
    rows = []
    names = [f"SEND 64 B ping-pong through rocedpd's echo service, half round trip {p}, vs two rocedp-perf" for p in ("p50", "p99")]
    if any(a.filter in n for n in names):
        args = ["send", "lat", "-s", "64", "-n", "20000"]

        probes = []

        def one(k):
            b, s = probed(bins["cpu_pair_rtt"], probes, k, lambda: mode_row(retry(listen_run, bins, args, f"el{k}")),
                          lambda: mode_row(retry(daemon_run, bins, args, f"ed{k}", 7000)[0]), a.near_ns)
            return s, b
        res = alternate(a, names[0], one)
        how = ("rocedp-perf --connect (CPU 1) send lat -s 64 -n 20000 through the IB CM, against rocedpd's echo service "
               "(polling lcore on CPU 0, control thread napping) and against rocedp-perf --listen (CPU 0)")
        for n, key, target in ((names[0], "t_typical_usec", "<= 1.5"), (names[1], "p99_usec", None)):
            finish(rows, n, res, "us", target, "rocedpd echo <- rocedp-perf --connect " + " ".join(args),
                   "rocedp-perf --listen <- rocedp-perf --connect " + " ".join(args), how, a,
                   pick=(lambda x, key=key: x[key], lambda x, key=key: x[key]), probes=probes)
    name = "WRITE 64 KiB bandwidth into rocedpd's memory service vs two rocedp-perf"
    if a.filter in name:
        args = ["write", "bw", "-s", "65536", "-q", "1", "-D", str(D)]

        probes = []

        def one(k):
            b, s = probed(bins["cpu_pair_rtt"], probes, k,
                          lambda: mode_row(retry(listen_run, bins, args, f"ml{k}"))["bw_avg_Gbps"],
                          lambda: mode_row(retry(daemon_run, bins, args, f"md{k}", 7001)[0])["bw_avg_Gbps"], a.near_ns)
            return s, b
        finish(rows, name, alternate(a, name, one), "Gb/s", ">= 0.8", "rocedpd memory <- rocedp-perf --connect " + " ".join(args),
               "rocedp-perf --listen <- rocedp-perf --connect " + " ".join(args),
               "rocedp-perf --connect (CPU 1) through the IB CM into rocedpd's memory region (polling lcore on CPU 0) "
               "and into rocedp-perf --listen's passive region (CPU 0)", a, probes=probes)
    for op, size in (("write", 65536), ("send", PERFTEST_MSG)):
        name = (f"{op.upper()} {size // 1024} KiB bandwidth through rocedpd's perftest service vs "
                "rocedp-perf's perftest server")
        if a.filter not in name:
            continue
        args = [op, "bw", "-s", str(size), "-D", str(D), "--report_gbits"]
        probes = []

        def one(k, args=args, op=op):
            b, s = probed(bins["cpu_pair_rtt"], probes, k, lambda: retry(listen_run, bins, args, f"p{op[0]}l{k}", perftest=True),
                          lambda: retry(daemon_run, bins, args, f"p{op[0]}d{k}", 7002, perftest=True)[0], a.near_ns)
            return s, b
        finish(rows, name, alternate(a, name, one), "Gb/s", ">= 0.8",
               "rocedpd perftest <- rocedp-perf --perftest -R " + " ".join(args),
               "rocedp-perf --perftest -R (server) <- rocedp-perf --perftest -R " + " ".join(args),
               "the same rocedp-perf --perftest -R client (CPU 1), perftest's rdma_cm exchange, against rocedpd's "
               "perftest listener (polling lcore on CPU 0; SENDs counted and dropped, `sends: sink`) and against "
               "rocedp-perf --perftest's server (CPU 0); the client's BW average", a, probes=probes)
    return rows


def group_cores(a, bins):
    """rocedpd with N polling lcores and N clients (one memif port and one client per core) vs
    the same with 1 lcore and 1 client: the message rate summed over the clients."""
    D, n = a.duration, a.cores
    args = ["write", "bw", "-s", "64", "-q", "1", "-D", str(D)]
    name = f"WRITE 64 B message rate, rocedpd with {n} polling lcores vs 1"
    rows = []
    if a.filter not in name:
        return rows

    probes = []

    def one(k):
        return tuple(reversed(probed(
            bins["cpu_pair_rtt"], probes, k,
            lambda: sum(mode_row(r)["msg_rate_Mpps"] for r in retry(daemon_run, bins, args, f"c1{k}", 7001, 1, 1, True)),
            lambda: sum(mode_row(r)["msg_rate_Mpps"] for r in retry(daemon_run, bins, args, f"cn{k}", 7001, n, n, True)),
            a.near_ns)))
    ncpu = os.cpu_count() or 2
    shared = 2 * n > ncpu
    how = (f"rocedpd with {n} polling lcores (CPUs 0..{n - 1}, its sleeping main lcore on CPU 0), one net_af_packet port "
           f"with {n} queue pairs on a veth of a bridge in a namespace of ours, and one rocedp-perf --connect client per lcore "
           f"on its own veth (client k on CPU {n}+k{', or CPU 1 where the host has no such CPU: SHARED CPUs' if shared else ''}), "
           f"{' '.join(args)} into the memory service, rates summed; baseline: the same with 1 lcore and 1 client")
    if n > ncpu:
        reason = f"not runnable on this host: rocedpd with {n} polling lcores needs {n} CPUs; the host has {ncpu}"
        log(f"  {name}: {reason}")
        rows.append({"name": name, "failed": True, "errors": [reason], "how": how, "host_cpus": ncpu})
        return rows
    finish(rows, name, alternate(a, name, one), "Mmsg/s", None, f"rocedpd {n} lcores, {n} clients", "rocedpd 1 lcore, 1 client",
           how, a, probes=probes, cpus_shared=shared, host_cpus=ncpu)
    return rows


SIZES = (64, 256, 1024, 4096, 16384, 65536)


def group_sizes(a, bins):
    D = a.duration
    rows = []
    for size in SIZES:
        name = f"WRITE {size} B message rate vs testpmd (frames of the same average size)"
        if a.filter not in name:
            continue
        nf, total = write_frames(size)
        frame = round(total / nf)

        probes = []

        def one(k):
            args = ["write", "bw", "-s", str(size), "-q", "1", "-D", str(D)]
            (pps, _), s = probed(bins["cpu_pair_rtt"], probes, k, lambda: retry(testpmd_rate, frame, D, f"z{size}{k}"),
                                 lambda: mode_row(retry(run_pair, bins["rocedp-perf"], args, f"z{size}s{k}")),
                                 a.near_ns)
            return s["msg_rate_Mpps"], pps / nf / 1e6
        res = alternate(a, name, one)
        finish(rows, name, res, "Mmsg/s", None, f"rocedp-perf:write bw -s {size} -q 1",
               f"dpdk-testpmd txonly->rxonly --txpkts={frame}, pps / {nf}",
               f"as the wire group; testpmd frames of {frame} B (the RDMA message's {total} B over {nf} frames)", a,
               probes=probes, size_bytes=size, frames_per_msg=nf, frame_bytes=frame, plot="rate_vs_size")
    return rows


GROUPS = {"wire": group_wire, "tcp": group_tcp, "daemon": group_daemon, "cores": group_cores, "sizes": group_sizes}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--groups", default="wire,tcp,daemon,cores,sizes")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=3, help="seconds of each throughput run (testpmd: 2 more)")
    ap.add_argument("--cores", type=int, default=2, help="polling lcores of the daemon in the cores group")
    ap.add_argument("--filter", default="", help="only rows whose name contains this")
    ap.add_argument("--near-ns", type=float, default=NEAR_NS,
                    help="CPUs whose cache-line round trip is below this are near (one shared cache)")
    a = ap.parse_args()
    if a.rounds < 5:
        log(f"bench_baselines: {a.rounds} round(s): a smoke run of the harness, not a measurement (5 or more rounds)")
    bins = {n: os.path.join(a.bin_dir, n) for n in ("rocedp-perf", "rocedpd", "cpu_pair_rtt")}
    for b in bins.values():
        if not os.access(b, os.X_OK):
            sys.exit(f"bench_baselines: {b} not built")
    for tool in ("dpdk-testpmd", "sockperf", "stdbuf", "taskset"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"bench_baselines: {tool} missing (scripts/setup.sh installs it)")
    all_rows = []
    for g in a.groups.split(","):
        if g not in GROUPS:
            sys.exit(f"bench_baselines: unknown group {g} (have {', '.join(GROUPS)})")
        log(f"bench_baselines: group {g}, {a.rounds} rounds")
        rows = GROUPS[g](a, bins)
        for r in rows:
            r["group"] = g
            r["smoke"] = a.rounds < 5
            if "core" not in r:
                r["core"] = "server CPU 0, client CPU 1" if g != "cores" else f"daemon CPUs 0..{a.cores - 1}"
        merge_rows(a.out, rows)  # after every group: a later failure keeps what was measured
        all_rows += rows
    print("| benchmark | rocedp | baseline | ratio (median, min–max) | target |")
    print("|---|---|---|---|---|")
    for r in all_rows:
        if r.get("failed"):
            print(f"| {r['name']} | failed | – | – | – |")
            continue
        t = f"{r['target']}: {'met' if r['meets_target'] else 'not met'}" if "target" in r else "–"
        print(f"| {r['name']} | {r['value']} {r['unit']} | {r['baseline_value']} {r['unit']} | "
              f"{r['ratio']:.3f} ({r['ratio_min']:.3f}–{r['ratio_max']:.3f}) | {t} |")
        for side in ("near", "far"):
            if f"ratio_{side}" in r:
                print(f"|   CPUs {side} ({r[f'rounds_{side}']} of {r['rounds']} rounds) | | | "
                      f"{r[f'ratio_{side}']:.3f} ({r[f'ratio_{side}_min']:.3f}–{r[f'ratio_{side}_max']:.3f}) | |")


if __name__ == "__main__":
    main()

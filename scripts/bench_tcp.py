#!/usr/bin/env python3
"""rocedp against kernel TCP, side by side in one run (the project's aim: ten times the message
rate of kernel TCP at a fifth of its latency).

Subject: rocedp-perf pairs over net_memif with scripts/bench_dataplane.py's command lines (see
run_pair). Baseline: tcp-perf pairs over kernel TCP on loopback (127.0.0.1), the same test shape
(SEND of N-byte messages, the same -s/-D/-q/-t, the same window of outstanding messages; ping-pong
of N bytes for latency). Each round runs baseline, subject (and a second baseline where a case has
one), alternately (DESIGN.md section 8, >= 5 rounds); a row's ratio is the median of the pairwise
subject/baseline ratios of the same round, with min-max.

Pinning: both tools put the server on CPU 0 and the client on CPU 1 (taskset -c). rocedp-perf runs
its polling core inline on that CPU (EAL -l 0 / -l 1); tcp-perf runs one thread per side on it.
On loopback the kernel does the receiver's TCP/IP processing in the sender's system call (softirq
on the sending CPU), so each TCP CPU carries its own sends plus the peer's receive processing.

TCP modes: each headline row is against the stronger of tcp-perf's two socket modes for that
metric, measured on these machines: blocking sockets for message rate and bandwidth (a sleeping
receiver wakes to a batch of messages per recv(); spinning reads them one by one), --poll
(spinning on non-blocking sockets, never sleeping: the CPU model of a polling core) for latency.
The other mode is a second row, so both stay visible.

Rows are merged into bench/results/latest.json: a row of the same name is replaced, every other
row is kept (so --filter refreshes some rows only).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dataplane import free_port, run_pair  # noqa: E402  (one way to run rocedp pairs)

CORE = "server CPU 0, client CPU 1 for both tools (rocedp-perf: inline polling core on each main lcore; tcp-perf: one thread per side)"


def cases(duration):
    D = ["-D", str(duration)]
    lat_n = ["-n", "20000"]
    poll = ["--poll"]
    rate, bw = ("msg_rate_Mpps", "Mmsg/s"), ("bw_avg_Gbps", "Gb/s")
    # Latency as perftest's send_lat reports it: half the round trip (p50 = t_typical).
    p50, p99 = ("t_typical_usec", "us"), ("p99_usec", "us")

    def tcp_bw(size, conns, extra=()):
        return ["bw", "-s", str(size), "-q", str(conns)] + D + list(extra)

    # Throughput rows: TCP with blocking sockets (faster than spinning here: a sleeping receiver
    # wakes to a batch of messages per recv()); latency rows: TCP spinning (--poll), which saves the
    # wake-up. Either way the headline row has the stronger TCP; the other mode is a second row.
    return [
        dict(subject=["send", "bw", "-s", "64", "-q", "1"] + D,
             baselines={"block": tcp_bw(64, 1), "poll": tcp_bw(64, 1, poll)},
             rows=[("rocedp SEND 64 B message rate vs kernel TCP", "block", rate, ">= 10"),
                   ("rocedp SEND 64 B message rate vs kernel TCP (busy-polling sockets)", "poll", rate, ">= 10")]),
        dict(subject=["write", "bw", "-s", "64", "-q", "1"] + D,
             baselines={"block": tcp_bw(64, 1)},
             rows=[("rocedp WRITE 64 B message rate vs kernel TCP (send)", "block", rate, ">= 10")]),
        dict(subject=["send", "bw", "-s", "64", "-q", "64"] + D,
             baselines={"block": tcp_bw(64, 64)},
             rows=[("rocedp SEND 64 B message rate, 64 QPs vs kernel TCP, 64 connections", "block", rate, ">= 10")]),
        # Streaming: a window of 100,000 messages never fills in -D seconds, so TCP coalesces the
        # queued messages into large segments: its best bandwidth, not the same test shape.
        dict(subject=["send", "bw", "-s", "4096", "-q", "1"] + D,
             baselines={"block": tcp_bw(4096, 1), "stream": tcp_bw(4096, 1, ["-t", "100000"])},
             rows=[("rocedp SEND 4 KiB bandwidth vs kernel TCP", "block", bw, None),
                   ("rocedp SEND 4 KiB bandwidth vs kernel TCP streaming (no message window)", "stream", bw, None)]),
        dict(subject=["write", "bw", "-s", "4096", "-q", "1"] + D,
             baselines={"block": tcp_bw(4096, 1)},
             rows=[("rocedp WRITE 4 KiB bandwidth vs kernel TCP (send)", "block", bw, None)]),
        dict(subject=["send", "lat", "-s", "64"] + lat_n,
             baselines={"poll": ["lat", "-s", "64"] + lat_n + poll, "block": ["lat", "-s", "64"] + lat_n},
             rows=[("rocedp SEND 64 B latency (p50) vs kernel TCP", "poll", p50, "<= 0.2"),
                   ("rocedp SEND 64 B latency (p99) vs kernel TCP", "poll", p99, None),
                   ("rocedp SEND 64 B latency (p50) vs kernel TCP (blocking sockets)", "block", p50, "<= 0.2"),
                   ("rocedp SEND 64 B latency (p99) vs kernel TCP (blocking sockets)", "block", p99, None)]),
        dict(subject=["write", "lat", "-s", "64"] + lat_n,
             baselines={"poll": ["lat", "-s", "64"] + lat_n + poll},
             rows=[("rocedp WRITE 64 B latency (p50) vs kernel TCP (send)", "poll", p50, "<= 0.2")]),
    ]


def tcp_pair(binary, args):
    """One tcp-perf server/client pair on 127.0.0.1; returns the client's JSON row."""
    port = str(free_port())
    srv = subprocess.Popen(["taskset", "-c", "0", binary, "--server", "--port", port, "--timeout", "120"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        cli = subprocess.run(["taskset", "-c", "1", binary, "--client", "127.0.0.1", "--port", port, "--timeout", "120",
                              "--json"] + args, capture_output=True, text=True, timeout=300)
        srv.wait(timeout=60)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    if cli.returncode != 0 or srv.returncode != 0:
        raise RuntimeError(f"tcp-perf {' '.join(args)}: client exit {cli.returncode}, server exit {srv.returncode}: "
                           f"{cli.stderr[-400:]} {srv.stderr.read()[-400:] if srv.stderr else ''}")
    return [json.loads(line) for line in cli.stdout.splitlines() if line.startswith("{")][0]


def retry(fn, *a, attempts=3):
    """A run that fails on this shared machine (a peer starved past a time limit, a memif peer not
    listening yet) is run again, up to `attempts` times in all; every retry is printed."""
    for k in range(attempts):
        try:
            return fn(*a)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            if k + 1 == attempts:
                raise
            print(f"  retrying after: {str(e)[:300]}", file=sys.stderr, flush=True)


def merge(path, rows):
    """Writes rows into the JSON list at path: a row of the same name is replaced, others kept."""
    kept = []
    if os.path.exists(path):
        with open(path) as f:
            names = {r["name"] for r in rows}
            kept = [x for x in json.load(f) if x.get("name") not in names]
    with open(path, "w") as f:
        json.dump(kept + rows, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=1, help="-D seconds of each bandwidth run")
    ap.add_argument("--filter", default="", help="only cases with a row whose name contains this")
    args = ap.parse_args()
    if args.rounds < 5:
        sys.exit("bench_tcp: at least 5 alternating rounds (DESIGN.md section 8)")
    rocedp = os.path.join(args.bin_dir, "rocedp-perf")
    tcp = os.path.join(args.bin_dir, "tcp-perf")
    for b in (rocedp, tcp):
        if not os.access(b, os.X_OK):
            sys.exit(f"bench_tcp: {b} not built")
    results = []
    for i, case in enumerate(c for c in cases(args.duration) if any(args.filter in r[0] for r in c["rows"])):
        labels = list(case["baselines"])
        subj_runs, base_runs = [], {k: [] for k in labels}
        for k in range(args.rounds):
            # baseline, subject, then the other baseline: each subject run sits between its baselines.
            base_runs[labels[0]].append(retry(tcp_pair, tcp, case["baselines"][labels[0]]))
            out = retry(run_pair, rocedp, case["subject"], f"t{i}s{k}")
            subj_runs.append([x for x in out if "mode" in x][0])
            for lab in labels[1:]:
                base_runs[lab].append(retry(tcp_pair, tcp, case["baselines"][lab]))
        for name, lab, (metric, unit), target in case["rows"]:
            if args.filter not in name:
                continue
            sv = [s[metric] for s in subj_runs]
            bv = [b[metric] for b in base_runs[lab]]
            ratios = [s / b if b else float("nan") for s, b in zip(sv, bv)]
            r = {"name": name, "value": round(statistics.median(sv), 3), "unit": unit,
                 "subject": "rocedp-perf:" + " ".join(case["subject"]) + " (net_memif)", "rounds": args.rounds,
                 "core": CORE,
                 "baseline_name": "tcp-perf:" + " ".join(case["baselines"][lab]) + " (kernel TCP, 127.0.0.1)",
                 "baseline_value": round(statistics.median(bv), 3), "ratio": round(statistics.median(ratios), 3),
                 "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
                 "metric": metric + (" (half round trip, as perftest)" if metric.endswith("usec") else ""),
                 "subject_values": [round(x, 4) for x in sv], "baseline_values": [round(x, 4) for x in bv]}
            if target:
                op, bound = target.split()
                med = statistics.median(ratios)
                r["target"] = target
                r["meets_target"] = med >= float(bound) if op == ">=" else med <= float(bound)
            results.append(r)
            merge(args.out, [r])  # after every row: a later failure keeps what was measured
            print(f"  {name}: {r['value']} {unit} (TCP {r['baseline_value']}, ratio {r['ratio']} "
                  f"[{r['ratio_min']}-{r['ratio_max']}]{', target ' + target if target else ''})",
                  file=sys.stderr, flush=True)
    print("| benchmark | rocedp | kernel TCP | ratio (median, min–max) | target |")
    print("|---|---|---|---|---|")
    for r in results:
        t = f"{r['target']}: {'met' if r['meets_target'] else 'not met'}" if "target" in r else "–"
        print(f"| {r['name']} | {r['value']} {r['unit']} | {r['baseline_value']} {r['unit']} | "
              f"{r['ratio']:.3f} ({r['ratio_min']:.3f}–{r['ratio_max']:.3f}) | {t} |")


if __name__ == "__main__":
    main()

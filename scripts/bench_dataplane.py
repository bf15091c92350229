#!/usr/bin/env python3
"""Data-path benchmarks between two rocedp-perf processes over net_memif, one polling core per
side, where rocedp-perf's own --raw mode is a stable baseline (DESIGN.md section 8: alternated,
median of the pairwise ratios with min-max):

  * round trips (WRITE, READ, SEND 64 B, p50 and p99) against the --raw frame bounce: the same
    frames bounced back with no RDMA processing. The bounce is steady run to run and matches
    testpmd's: the wire group (scripts/bench_baselines.py) times the same frames bounced by
    dpdk-testpmd's macswap (rocedp-perf --raw --reflector) against the WRITE ping-pong.
  * WRITE 64 B at 1,000 and 100,000 QPs (depth 4) against 1 QP at depth 4, and 100,000 QPs against
    1 QP with its full window (target: >= 0.5).

Message rate and bandwidth are measured against dpdk-testpmd instead (scripts/bench_baselines.py,
group wire): the --raw flood has no flow control and its rate swung tenfold between runs.

Topology (2 CPUs): the server process is pinned to CPU 0 (EAL -l 0: its main lcore runs the
polling core inline together with the perftest loop), the client to CPU 1 (-l 1, same). Each
process's control thread is unpinned and sleeps when idle. Before, between and after the two
runs of a round a probe reads where the two CPUs sit (build/bin/cpu_pair_rtt, below); every row
also gives its ratio per placement over the rounds that stayed in one.

Rows are merged into bench/results/latest.json: a row of the same name is replaced, every other
row is kept (so --filter refreshes some rows only).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile

# Each row: its subject and its baseline rocedp-perf arguments.
BW = "msg_rate_Mpps"
GB = "bw_avg_Gbps"


def rows(duration):
    """name, subject args, baseline args, metric, unit."""
    out = []
    for op in ("write", "read", "send"):
        for pct, key in (("p50", "rtt_p50_usec"), ("p99", "rtt_p99_usec")):
            args = [op, "lat", "-s", "64", "-n", "20000"]
            out.append(dict(name=f"{op.upper()} 64 B round trip {pct}, memif, vs raw frame bounce",
                            args=args, base=args + ["--raw"], metric=key, unit="us"))
    one = ["write", "bw", "-s", "64", "-q", "1", "-t", "4", "-D", str(duration)]
    many = {qps: ["write", "bw", "-s", "64", "-q", str(qps), "-t", "4", "-n", str(max(2, 2000000 // qps))]
            for qps in (1000, 100000)}
    for qps in (1000, 100000):
        out.append(dict(name=f"WRITE 64 B message rate, {qps:,} QPs vs 1 QP (depth 4), memif",
                        args=many[qps], base=one, metric=BW, unit="Mmsg/s", memory=True))
    # The target row: at depth 4 one QP is bound by its round trip, so its baseline is one QP with
    # its full window (rocedp-perf's default depth), its best rate.
    out.append(dict(name="WRITE 64 B message rate, 100,000 QPs (depth 4) vs 1 QP (full window), memif",
                    args=many[100000], base=["write", "bw", "-s", "64", "-q", "1", "-D", str(duration)],
                    metric=BW, unit="Mmsg/s", target=">= 0.5"))
    return out


def free_port():
    """A TCP port on 127.0.0.1 nobody listens on now (for the out-of-band exchange)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(binary, args, tag, both=(), server=()):
    """One rocedp-perf server/client pair over net_memif (server CPU 0, client CPU 1); returns the
    client's JSON rows. A failed client stops its server at once, so a failure costs no minute.
    scripts/bench_baselines.py uses it too, so both scripts measure rocedp the same way. `both`: extra
    endpoint options for both processes (scripts/bench_loss.py: --fault-drop); `server`: for the
    server only (scripts/bench_ecn.py: --ecn on a READ's responder)."""
    with tempfile.TemporaryDirectory(prefix="rdp-bench-") as d:
        sock = os.path.join(d, "memif.sock")
        oob = str(free_port())
        pre = f"rdp-bench-{os.getpid()}-{tag}"
        common = ["--oob-port", oob, "--timeout", "120", "--memory-mb", "1024"] + list(both)
        srv = subprocess.Popen(["taskset", "-c", "0", binary, "--server", "--port-devargs",
                                f"net_memif0,role=server,socket={sock},socket-abstract=no", "--ip", "198.18.10.1/24",
                                "--mac", "02:00:00:00:0a:01", "--lcore", "0", "--file-prefix", pre + "s"] + common
                               + list(server),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            cli = subprocess.run(["taskset", "-c", "1", binary, "--client", "127.0.0.1", "--port-devargs",
                                  f"net_memif0,role=client,socket={sock},socket-abstract=no", "--ip", "198.18.10.2/24",
                                  "--mac", "02:00:00:00:0a:02", "--lcore", "1", "--file-prefix", pre + "c", "--json"]
                                 + common + args, capture_output=True, text=True, timeout=300)
            if cli.returncode == 0:
                srv.wait(timeout=60)
        finally:
            if srv.poll() is None:
                srv.terminate()
                try:
                    srv.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    srv.kill()
                    srv.wait()
            for p in (pre + "s", pre + "c"):
                subprocess.run(["rm", "-rf", f"/var/run/dpdk/{p}"])
        if cli.returncode != 0:
            raise RuntimeError(f"rocedp-perf {' '.join(args)}: exit {cli.returncode}: {cli.stderr[-800:]} {cli.stdout[-1500:]}")
        return [json.loads(line) for line in cli.stdout.splitlines() if line.startswith("{")]



# ---- where the two CPUs sit --------------------------------------------------------------------
# On a VM the hypervisor may run the two vCPUs near each other (one shared cache) or far apart, and
# move them within seconds; the memif link between two processes is several times faster when they
# are near. build/bin/cpu_pair_rtt measures one cache line's round trip between the two CPUs; a
# round whose probes fall on one side of `near_ns` counts for that placement (README, "The two
# placements"). scripts/bench_baselines.py's wire group uses these too.
NEAR_NS = 250


def pair_row(binary, args, tag, both=(), server=()):
    """run_pair's result row and the client's RC engine counters ({} when it printed none)."""
    out = run_pair(binary, args, tag, both, server)
    row = [x for x in out if "mode" in x][0]
    cnt = [x["rc_counters"] for x in out if "rc_counters" in x]
    return row, (cnt[0] if cnt else {})


def rounds_parser():
    """The options of a script that alternates two runs of a pair per round (scripts/bench_ipv6.py,
    and the sweeps below): the build's binaries, the results file, the rounds, the run length."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=2, help="-D seconds of each bandwidth run")
    return ap


def rounds_setup(ap, name):
    """Parses those options; exits below 3 alternating rounds. Returns the options, the rocedp-perf
    binary and the CPU-pair probe."""
    args = ap.parse_args()
    if args.rounds < 3:
        sys.exit(f"{name}: at least 3 alternating rounds")
    return args, os.path.join(args.bin_dir, "rocedp-perf"), os.path.join(args.bin_dir, "cpu_pair_rtt")


def sweep_parser(rates):
    """rounds_parser for a script that sweeps a fault share (scripts/bench_loss.py, bench_ecn.py),
    with the shares."""
    ap = rounds_parser()
    ap.add_argument("--rates", default=",".join(str(r) for r in rates))
    return ap


def sweep_setup(ap, name):
    """rounds_setup, and the shares."""
    args, binary, probe = rounds_setup(ap, name)
    return args, binary, probe, [float(r) for r in args.rates.split(",")]


def print_ratio_table(results, value_head, baseline_head):
    """The rows' Markdown table: value, baseline value, ratio (median, min-max)."""
    print(f"| benchmark | {value_head} | {baseline_head} | ratio (median, min–max) |")
    print("|---|---|---|---|")
    for r in results:
        print(f"| {r['name']} | {r['value']} {r['unit']} | {r['baseline_value']} {r['unit']} | "
              f"{r['ratio']:.3f} ({r['ratio_min']:.3f}–{r['ratio_max']:.3f}) |")


def ratio_row(subj, base, probes, digits=3):
    """The fields of a row that sets `subj` against `base`, run by run in alternated rounds: their
    medians, the median of the per-round ratios with min-max, and the ratio per CPU placement."""
    ratios = [s / b if b else float("nan") for s, b in zip(subj, base)]
    return {"value": round(statistics.median(subj), 3), "baseline_value": round(statistics.median(base), 3),
            "ratio": round(statistics.median(ratios), digits), "ratio_min": round(min(ratios), digits),
            "ratio_max": round(max(ratios), digits), "ratios": [round(r, digits) for r in ratios],
            **by_placement(subj, base, probes)}


def merge_rows(path, results):
    """Writes `results` into the JSON list at `path`, replacing the rows of the same names."""
    kept = []
    if os.path.exists(path):
        with open(path) as f:
            names = {r["name"] for r in results}
            kept = [x for x in json.load(f) if x.get("name") not in names]
    with open(path, "w") as f:
        json.dump(kept + results, f, indent=2)
        f.write("\n")


def cpu_pair_rtt(binary):
    """One cache line's round trip between the server's CPU (0) and the client's (1), in ns."""
    out = subprocess.run([binary, "0", "1"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"cpu_pair_rtt: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)["rtt_ns"]


def placement(probes, near_ns=NEAR_NS):
    """near / far when every probe of a round falls on one side of near_ns, else mixed."""
    sides = {"near" if p < near_ns else "far" for p in probes}
    return sides.pop() if len(sides) == 1 else "mixed"


def probed(binary, probes, k, baseline, subject, near_ns=NEAR_NS):
    """One round's two runs with the probe before, between and after them (appended to `probes`
    once both runs succeeded); returns (baseline(), subject())."""
    p0 = cpu_pair_rtt(binary)
    b = baseline()
    p1 = cpu_pair_rtt(binary)
    s = subject()
    probes.append((p0, p1, cpu_pair_rtt(binary)))
    print(f"    round {k}: CPU pair round trip {p0:.0f} / {p1:.0f} / {probes[-1][2]:.0f} ns "
          f"({placement(probes[-1], near_ns)})", file=sys.stderr, flush=True)
    return b, s


def by_placement(subj, base, probes, near_ns=NEAR_NS):
    """A row's probes, and its ratio per CPU placement over the rounds that stayed in one."""
    out = {"cpu_pair_rtt_ns": [[round(p, 1) for p in ps] for ps in probes],
           "placements": [placement(ps, near_ns) for ps in probes]}
    for side in ("near", "far"):
        rs = [sv / bv for sv, bv, pl in zip(subj, base, out["placements"]) if pl == side and bv]
        if rs:
            out[f"ratio_{side}"] = round(statistics.median(rs), 4)
            out[f"ratio_{side}_min"] = round(min(rs), 4)
            out[f"ratio_{side}_max"] = round(max(rs), 4)
            out[f"rounds_{side}"] = len(rs)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=1, help="-D seconds of each bandwidth run")
    ap.add_argument("--filter", default="", help="only rows whose name contains this")
    args = ap.parse_args()
    if args.rounds < 5:
        print(f"bench_dataplane: {args.rounds} round(s): a smoke run, not a measurement (5 or more rounds)", file=sys.stderr)
    binary = os.path.join(args.bin_dir, "rocedp-perf")
    probe = os.path.join(args.bin_dir, "cpu_pair_rtt")
    results = []
    for i, row in enumerate(r for r in rows(args.duration) if args.filter in r["name"]):
        subj, base, ratios, mem, probes = [], [], [], [], []
        for k in range(args.rounds):
            b, out = probed(probe, probes, k, lambda: [x for x in run_pair(binary, row["base"], f"{i}b{k}") if "mode" in x][0],
                            lambda: run_pair(binary, row["args"], f"{i}s{k}"))
            s = [x for x in out if "mode" in x][0]
            mem += [x["qp_memory"]["rss_bytes_per_qp"] for x in out if "qp_memory" in x]
            bv, sv = b[row["metric"]], s[row["metric"]]
            base.append(bv)
            subj.append(sv)
            ratios.append(sv / bv if bv else float("nan"))
        r = {"name": row["name"], "value": round(statistics.median(subj), 3), "unit": row["unit"],
             "subject": "rocedp-perf:" + " ".join(row["args"]), "rounds": args.rounds,
             "core": "server CPU 0, client CPU 1 (inline polling core on each main lcore)",
             "baseline_name": "rocedp-perf:" + " ".join(row["base"]), "smoke": args.rounds < 5,
             "baseline_value": round(statistics.median(base), 3), "ratio": round(statistics.median(ratios), 3),
             "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3)}
        r.update(by_placement(subj, base, probes))
        if row.get("target"):
            op, bound = row["target"].split()
            r["target"] = row["target"]
            r["meets_target"] = r["ratio"] >= float(bound) if op == ">=" else r["ratio"] <= float(bound)
        results.append(r)
        per = "; ".join(f"CPUs {s} {r[f'ratio_{s}']} over {r[f'rounds_{s}']} rounds" for s in ("near", "far")
                        if f"ratio_{s}" in r)
        print(f"  {r['name']}: {r['value']} {r['unit']} (baseline {r['baseline_value']}, ratio {r['ratio']} "
              f"[{r['ratio_min']}-{r['ratio_max']}]; {per or 'every round changed placement'})", file=sys.stderr, flush=True)
        if row.get("memory") and mem:
            qps = row["args"][row["args"].index("-q") + 1]
            results.append({"name": f"memory per QP at {qps} QPs (rocedp-perf process RSS growth while creating them)",
                            "value": statistics.median(mem), "unit": "bytes/QP",
                            "subject": "rocedp-perf:" + " ".join(row["args"]), "rounds": args.rounds,
                            "core": r["core"]})
    merge_rows(args.out, results)
    print("| benchmark | value | baseline | ratio (median, min–max) |")
    print("|---|---|---|---|")
    for r in results:
        if "ratio" in r:
            print(f"| {r['name']} | {r['value']} {r['unit']} | {r['baseline_value']} {r['unit']} | "
                  f"{r['ratio']:.3f} ({r['ratio_min']:.3f}–{r['ratio_max']:.3f}) |")
        else:
            print(f"| {r['name']} | {r['value']} {r['unit']} | – | – |")


if __name__ == "__main__":
    main()

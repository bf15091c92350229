#!/usr/bin/env python3
"""Goodput of an ECN-capable sender under CE marking (DCQCN, dataplane/rc/congestion.hpp): two
rocedp-perf processes over net_memif (server CPU 0, client CPU 1, as scripts/bench_dataplane.py).
WRITE: the client's QPs send the data, ECN-capable (--ecn: ECT(0)), and the port that receives it
(the server's) marks CE on a share of the ECN-capable frames (--fault-ce, a congested switch in
front of the server). READ: the server's QPs send the data as READ responses (--ecn on the
server), and the client's port marks them.

Each round runs the pair unmarked, then marked, for every marking share (alternated in the same
invocation); the figure is the median over the rounds of the per-round ratio marked / unmarked,
with min-max, and the client's engine counters (WRITE: the CNPs it received and its rate cuts;
READ: the CNPs it sent). This is what DCQCN does with a fabric that marks that share of the
packets, not a comparison with another implementation: no peer here runs DCQCN (Linux rdma_rxe
neither sends nor acts on CNPs).

Rows are merged into bench/results/latest.json (same rule as bench_dataplane.py).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dataplane  # noqa: E402

MARK_RATES = (1.0, 10.0, 100.0)

# (name, the client's arguments, the server's, where the marks go, the counters kept): the marks
# sit at the data's receiver, the port of the other end than the ECN-capable sender.
OPS = {
    "write": ("WRITE", ["write", "bw", "-s", "4096", "--ecn"], [], "server", ("rx_cnp", "rate_cuts")),
    "read": ("READ", ["read", "bw", "-s", "4096"], ["--ecn"], "client", ("tx_cnp", "rx_ce")),
}


def one(binary, op, duration, tag, mark):
    _, client, server, marker, _ = OPS[op]
    args = client + ["-D", str(duration)]
    fault = ["--fault-ce", str(mark)] if mark > 0 else []
    if marker == "server":
        return bench_dataplane.pair_row(binary, args, tag, server=server + fault)
    return bench_dataplane.pair_row(binary, args + fault, tag, server=server)


def main():
    ap = bench_dataplane.sweep_parser(MARK_RATES)
    ap.add_argument("--ops", default="write,read", help="write, read or both")
    args, binary, probe, rates = bench_dataplane.sweep_setup(ap, "bench_ecn")
    results = []
    for op in args.ops.split(","):
        label, client, server, marker, kept = OPS[op]
        for rate in rates:
            clean, marked, counters, probes = [], [], [], []
            for k in range(args.rounds):
                (c, _), (s, cnt) = bench_dataplane.probed(
                    probe, probes, k, lambda: one(binary, op, args.duration, f"E{op}{rate}c{k}", 0),
                    lambda: one(binary, op, args.duration, f"E{op}{rate}s{k}", rate))
                clean.append(c["bw_avg_Gbps"])
                marked.append(s["bw_avg_Gbps"])
                counters.append({k2: cnt.get(k2) for k2 in kept + ("tx_packets",)})
                ratio = s["bw_avg_Gbps"] / c["bw_avg_Gbps"] if c["bw_avg_Gbps"] else float("nan")
                print(f"  {label} {rate}% round {k}: unmarked {c['bw_avg_Gbps']:.3f} Gb/s, marked "
                      f"{s['bw_avg_Gbps']:.3f} Gb/s, ratio {ratio:.3f}; " +
                      ", ".join(f"{k2} {cnt.get(k2)}" for k2 in kept), file=sys.stderr, flush=True)
            sender = "client" if marker == "server" else "server"
            results.append({
                "name": f"{label} 4 KiB goodput, ECN-capable, {rate:g}% of its frames marked CE, vs unmarked",
                "unit": "Gb/s", "ce_pct": rate,
                "subject": f"rocedp-perf:{' '.join(client)} -D {args.duration} ({sender} --ecn, "
                           f"{marker} --fault-ce {rate:g})",
                "rounds": args.rounds, "core": "server CPU 0, client CPU 1",
                "baseline_name": f"rocedp-perf:{' '.join(client)} (unmarked)",
                "client_counters_kept": list(kept),
                "client_rc_counters": counters, **bench_dataplane.ratio_row(marked, clean, probes, digits=4)})
    bench_dataplane.merge_rows(args.out, results)
    print("| benchmark | marked | unmarked | ratio (median, min–max) | client's counters (median) |")
    print("|---|---|---|---|---|")
    for r in results:
        kept = r["client_counters_kept"]
        med = {k2: statistics.median([c[k2] or 0 for c in r["client_rc_counters"]]) for k2 in kept}
        print(f"| {r['name']} | {r['value']} {r['unit']} | {r['baseline_value']} {r['unit']} | "
              f"{r['ratio']:.4f} ({r['ratio_min']:.4f}–{r['ratio_max']:.4f}) | "
              + ", ".join(f"{k2} {med[k2]:g}" for k2 in kept) + " |")


if __name__ == "__main__":
    main()

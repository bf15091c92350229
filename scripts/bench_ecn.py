#!/usr/bin/env python3
"""Goodput of an ECN-capable sender under CE marking (DCQCN, dataplane/rc/congestion.hpp): two
rocedp-perf processes over net_memif (server CPU 0, client CPU 1, as scripts/bench_dataplane.py),
the client's QPs ECN-capable (--ecn: ECT(0)), the server's port marking CE on a share of the
ECN-capable frames it receives (--fault-ce, a congested switch in front of the server).

Each round runs the pair unmarked, then marked, for every marking share (alternated in the same
invocation); the figure is the median over the rounds of the per-round ratio marked / unmarked,
with min-max, and the client's CNPs received and rate cuts. This is what DCQCN does with a fabric
that marks that share of the packets, not a comparison with another implementation: no peer here
runs DCQCN (Linux rdma_rxe neither sends nor acts on CNPs).

Rows are merged into bench/results/latest.json (same rule as bench_dataplane.py).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dataplane  # noqa: E402

MARK_RATES = (1.0, 10.0, 100.0)


def one(binary, args, tag, mark):
    return bench_dataplane.pair_row(binary, args, tag, ["--fault-ce", str(mark)] if mark > 0 else [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=2, help="-D seconds of each bandwidth run")
    ap.add_argument("--rates", default=",".join(str(r) for r in MARK_RATES))
    args = ap.parse_args()
    if args.rounds < 3:
        sys.exit("bench_ecn: at least 3 alternating rounds")
    binary = os.path.join(args.bin_dir, "rocedp-perf")
    probe = os.path.join(args.bin_dir, "cpu_pair_rtt")
    bw_args = ["write", "bw", "-s", "4096", "-D", str(args.duration), "--ecn"]
    results = []
    for rate in [float(r) for r in args.rates.split(",")]:
        clean, marked, counters, probes = [], [], [], []
        for k in range(args.rounds):
            (c, _), (s, cnt) = bench_dataplane.probed(probe, probes, k,
                                                      lambda: one(binary, bw_args, f"E{rate}c{k}", 0),
                                                      lambda: one(binary, bw_args, f"E{rate}s{k}", rate))
            clean.append(c["bw_avg_Gbps"])
            marked.append(s["bw_avg_Gbps"])
            counters.append({k2: cnt.get(k2) for k2 in ("rx_cnp", "rate_cuts", "tx_packets")})
            print(f"  {rate}% round {k}: unmarked {c['bw_avg_Gbps']:.3f} Gb/s, marked {s['bw_avg_Gbps']:.3f} Gb/s, "
                  f"ratio {s['bw_avg_Gbps'] / c['bw_avg_Gbps'] if c['bw_avg_Gbps'] else float('nan'):.3f}; CNPs {cnt.get('rx_cnp')}, rate cuts {cnt.get('rate_cuts')}",
                  file=sys.stderr, flush=True)
        results.append({
            "name": f"WRITE 4 KiB goodput, ECN-capable, {rate:g}% of its frames marked CE, vs unmarked",
            "unit": "Gb/s", "ce_pct": rate,
            "subject": "rocedp-perf:" + " ".join(bw_args) + f" (server --fault-ce {rate:g})",
            "rounds": args.rounds, "core": "server CPU 0, client CPU 1",
            "baseline_name": "rocedp-perf:" + " ".join(bw_args) + " (unmarked)",
            "client_rc_counters": counters, **bench_dataplane.ratio_row(marked, clean, probes, digits=4)})
    bench_dataplane.merge_rows(args.out, results)
    print("| benchmark | marked | unmarked | ratio (median, min–max) | CNPs, rate cuts (median) |")
    print("|---|---|---|---|---|")
    for r in results:
        cnps = statistics.median([c["rx_cnp"] or 0 for c in r["client_rc_counters"]])
        cuts = statistics.median([c["rate_cuts"] or 0 for c in r["client_rc_counters"]])
        print(f"| {r['name']} | {r['value']} {r['unit']} | {r['baseline_value']} {r['unit']} | "
              f"{r['ratio']:.4f} ({r['ratio_min']:.4f}–{r['ratio_max']:.4f}) | {cnps:g}, {cuts:g} |")


if __name__ == "__main__":
    main()

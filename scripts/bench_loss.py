#!/usr/bin/env python3
"""Goodput and latency under random loss (issue 8 section 2): two rocedp-perf processes over
net_memif (server CPU 0, client CPU 1, as scripts/bench_dataplane.py), both dropping the same
share of the frames they receive (--fault-drop on both endpoints: loss in both directions).

Each round runs a clean pair, then the lossy pair, for every loss rate (alternated in the same
invocation, DESIGN.md section 8); the figure is the median over the rounds of the per-round ratio
lossy / clean, with min-max. Rows:
  - 4 KiB WRITE bandwidth, 4 QPs, at 0.1%, 1%, 5% and 10% loss, as a ratio to clean;
  - 64 B WRITE round trip p50 and p99 at 1% loss, as a ratio to clean.
The client's RC engine counters (timeouts, probes, NAKs, retransmissions) are kept per run in
the JSON rows, to show where the time goes. The CPU-pair probe runs around every round (as in
scripts/bench_dataplane.py): each row also has its ratio over the rounds with the VM's two CPUs
near each other and over those with them far apart.

Rows are merged into bench/results/latest.json (same rule as bench_dataplane.py), and
scripts/plot_loss.py draws bench/results/loss.svg from them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dataplane  # noqa: E402

LOSS_RATES = (0.1, 1.0, 5.0, 10.0)


def one(binary, args, tag, drop):
    both = ["--fault-drop", str(drop), "--fault-seed", str(abs(hash(tag)) % 1000000 + 1)] if drop > 0 else []
    return bench_dataplane.pair_row(binary, args, tag, both)


def main():
    ap = bench_dataplane.sweep_parser(LOSS_RATES)
    ap.add_argument("--no-latency", action="store_true")
    args, binary, probe, rates = bench_dataplane.sweep_setup(ap, "bench_loss")
    bw_args = ["write", "bw", "-s", "4096", "-q", "4", "-D", str(args.duration)]
    results = []
    for rate in rates:
        clean, lossy, counters, probes = [], [], [], []
        for k in range(args.rounds):
            (c, _), (s, cnt) = bench_dataplane.probed(probe, probes, k,
                                                      lambda: one(binary, bw_args, f"L{rate}c{k}", 0),
                                                      lambda: one(binary, bw_args, f"L{rate}s{k}", rate))
            clean.append(c["bw_avg_Gbps"])
            lossy.append(s["bw_avg_Gbps"])
            counters.append(cnt)
            print(f"  {rate}% round {k}: clean {c['bw_avg_Gbps']:.3f} Gb/s, lossy {s['bw_avg_Gbps']:.3f} Gb/s, "
                  f"ratio {s['bw_avg_Gbps'] / c['bw_avg_Gbps'] if c['bw_avg_Gbps'] else float('nan'):.3f}; timeouts {cnt.get('ack_timeouts')} (probes {cnt.get('rto_probes')}, "
                  f"nothing lost {cnt.get('spurious_timeouts')}), "
                  f"NAKs {cnt.get('naks_received')}, retransmitted {cnt.get('tx_retransmit')} of "
                  f"{cnt.get('tx_packets')}", file=sys.stderr, flush=True)
        results.append({
            "name": f"WRITE 4 KiB goodput, 4 QPs, {rate:g}% loss both directions, vs clean",
            "unit": "Gb/s", "loss_pct": rate,
            "subject": "rocedp-perf:" + " ".join(bw_args) + f" --fault-drop {rate:g} (both endpoints)",
            "rounds": args.rounds, "core": "server CPU 0, client CPU 1",
            "baseline_name": "rocedp-perf:" + " ".join(bw_args) + " (no loss)",
            "client_rc_counters": counters, **bench_dataplane.ratio_row(lossy, clean, probes)})
    if not args.no_latency:
        lat_args = ["write", "lat", "-s", "64", "-n", "20000"]
        cl = {"rtt_p50_usec": [], "rtt_p99_usec": []}
        ls = {"rtt_p50_usec": [], "rtt_p99_usec": []}
        probes = []
        for k in range(args.rounds):
            (c, _), (s, _) = bench_dataplane.probed(probe, probes, k, lambda: one(binary, lat_args, f"Tc{k}", 0),
                                                    lambda: one(binary, lat_args, f"Ts{k}", 1.0))
            for key in cl:
                cl[key].append(c[key])
                ls[key].append(s[key])
            print(f"  lat round {k}: clean p50/p99 {c['rtt_p50_usec']:.2f}/{c['rtt_p99_usec']:.2f} us, 1% loss "
                  f"{s['rtt_p50_usec']:.2f}/{s['rtt_p99_usec']:.2f} us", file=sys.stderr, flush=True)
        for key, pct in (("rtt_p50_usec", "p50"), ("rtt_p99_usec", "p99")):
            results.append({
                "name": f"WRITE 64 B round trip {pct}, 1% loss both directions, vs clean",
                "unit": "us", "loss_pct": 1.0,
                "subject": "rocedp-perf:" + " ".join(lat_args) + " --fault-drop 1 (both endpoints)",
                "rounds": args.rounds, "core": "server CPU 0, client CPU 1",
                "baseline_name": "rocedp-perf:" + " ".join(lat_args) + " (no loss)",
                **bench_dataplane.ratio_row(ls[key], cl[key], probes)})
    bench_dataplane.merge_rows(args.out, results)
    bench_dataplane.print_ratio_table(results, "value", "clean")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Draws WRITE message rate against message size, 64 B to 64 KiB, for rocedp and dpdk-testpmd
(bench/results/rate_vs_size.svg) from the rows of scripts/bench_baselines.py's group `sizes` in
bench/results/latest.json: the medians, with min-max bars from the per-round values. testpmd's
rate is its frame rate divided by the frames of one RDMA message (frames of the message's
average size), so both curves count messages of the same bytes on the wire.

  scripts/plot_rate.py [--in bench/results/latest.json] [--out bench/results/rate_vs_size.svg]
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--in", dest="inp", default=os.path.join(root, "bench/results/latest.json"))
    ap.add_argument("--out", default=os.path.join(root, "bench/results/rate_vs_size.svg"))
    args = ap.parse_args()
    with open(args.inp) as f:
        rows = [r for r in json.load(f) if r.get("plot") == "rate_vs_size" and not r.get("failed")]
    if not rows:
        raise SystemExit(f"plot_rate: no rate_vs_size rows in {args.inp} (scripts/bench.sh --groups sizes)")
    rows.sort(key=lambda r: r["size_bytes"])
    sizes = [r["size_bytes"] for r in rows]

    def series(values_key, median_key):
        med = [r[median_key] for r in rows]
        lo = [m - min(r[values_key]) for m, r in zip(med, rows)]
        hi = [max(r[values_key]) - m for m, r in zip(med, rows)]
        return med, [lo, hi]

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, med_key, label, marker in (("subject_values", "value", "rocedp WRITE (rocedp-perf, 1 QP)", "o"),
                                        ("baseline_values", "baseline_value",
                                         "dpdk-testpmd txonly→rxonly, same bytes per message", "s")):
        med, err = series(key, med_key)
        ax.errorbar(sizes, med, yerr=err, marker=marker, capsize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([f"{s // 1024} KiB" if s >= 1024 else f"{s} B" for s in sizes])
    ax.set_xlabel("message size")
    ax.set_ylabel("messages per second (millions)")
    rounds = min(r["rounds"] for r in rows)
    smoke = any(r.get("smoke") for r in rows)
    ax.set_title("Message rate vs size over net_memif, server CPU 0, client CPU 1"
                 + (f"\n(smoke run: {rounds} round(s), not a measurement)" if smoke else f"\n(medians of {rounds} alternated rounds, min–max bars)"),
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    fig.savefig(args.out)
    print(f"plot_rate: wrote {args.out}")


if __name__ == "__main__":
    main()

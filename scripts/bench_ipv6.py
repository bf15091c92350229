#!/usr/bin/env python3
"""What RoCEv2 over IPv6 costs against IPv4: two rocedp-perf processes over net_memif (server CPU
0, client CPU 1, as scripts/bench_dataplane.py), the same workload with the QPs connected over
IPv4 and over IPv6 (--ip6 on both ends: the out-of-band exchange gives each side the other's IPv6
address, and the QPs send IPv6 frames), alternated in the same invocation.

Workloads: WRITE 64 B message rate (one packet, the requester's short path for IPv4, the general
one for IPv6) and WRITE 4 KiB goodput. The figure is the median over the rounds of the per-round
ratio IPv6 / IPv4, with min-max. This sets rocedp's IPv6 path against its IPv4 path, not against
another implementation (the wire and tcp groups compare rocedp with independent tools); the
instructions behind it are counted by scripts/rc_instructions.sh (write6, send6, read6).

Rows are merged into bench/results/latest.json (same rule as bench_dataplane.py).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_dataplane  # noqa: E402

# (name, the client's arguments, the figure read from its row, its unit)
WORKLOADS = (
    ("WRITE 64 B message rate", ["write", "bw", "-s", "64"], "msg_rate_Mpps", "M msg/s"),
    ("WRITE 4 KiB goodput", ["write", "bw", "-s", "4096"], "bw_avg_Gbps", "Gb/s"),
)
SERVER6, CLIENT6 = "fd52::a01", "fd52::a02"


def one(binary, args, duration, tag, ipv6):
    args = args + ["-D", str(duration)]
    if not ipv6:
        return bench_dataplane.pair_row(binary, args, tag)
    return bench_dataplane.pair_row(binary, args + ["--ip6", CLIENT6], tag, server=["--ip6", SERVER6])


def main():
    args, binary, probe = bench_dataplane.rounds_setup(bench_dataplane.rounds_parser(), "bench_ipv6")
    results = []
    for name, client, field, unit in WORKLOADS:
        v4, v6, probes = [], [], []
        for k in range(args.rounds):
            (a, _), (b, _) = bench_dataplane.probed(
                probe, probes, k, lambda: one(binary, client, args.duration, f"I4{k}", False),
                lambda: one(binary, client, args.duration, f"I6{k}", True))
            v4.append(a[field])
            v6.append(b[field])
            print(f"  {name} round {k}: IPv4 {a[field]:.3f}, IPv6 {b[field]:.3f} {unit}, ratio "
                  f"{b[field] / a[field] if a[field] else float('nan'):.3f}", file=sys.stderr, flush=True)
        results.append({
            "name": f"{name} over IPv6 vs IPv4", "unit": unit,
            "subject": f"rocedp-perf:{' '.join(client)} -D {args.duration} --ip6 (both ends)",
            "rounds": args.rounds, "core": "server CPU 0, client CPU 1",
            "baseline_name": f"rocedp-perf:{' '.join(client)} (IPv4)",
            **bench_dataplane.ratio_row(v6, v4, probes)})
    bench_dataplane.merge_rows(args.out, results)
    bench_dataplane.print_ratio_table(results, "IPv6", "IPv4")


if __name__ == "__main__":
    main()

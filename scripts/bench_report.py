#!/usr/bin/env python3
"""Runs benchmark pairs alternately (baseline, subject, baseline, subject...)
pinned to one core, and writes bench/results/latest.json plus a Markdown table.

Every row compares a subject with its baseline measured in the same run
(DESIGN.md section 8): value and baseline_value are medians over the runs,
ratio is the median of the pairwise ratios subject/baseline of the same
round, with ratio_min/ratio_max. Rows without a baseline carry only the value.

To add rows: append to ROWS (Google Benchmark binaries), or pass
--extra-rows FILE.json with rows another tool produced (same keys); they are
merged into latest.json and the table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# name, binary, subject benchmark, baseline benchmark (or None), metric, unit, note
ROWS = []
for size, label in ((64, "64 B"), (256, "256 B"), (1024, "1 KiB"), (4096, "4 KiB")):
    ROWS.append(dict(name=f"icrc {label} vs bare crc32_gzip_refl", binary="bench_icrc",
                     subject=f"BM_Icrc/{size}", baseline=f"BM_Crc32GzipRefl/{size}",
                     metric="bytes_per_second", unit="GB/s"))
    ROWS.append(dict(name=f"icrc {label} vs memcpy", binary="bench_icrc",
                     subject=f"BM_Icrc/{size}", baseline=f"BM_Memcpy/{size}",
                     metric="bytes_per_second", unit="GB/s"))
for size, label in ((512, "512 B"), (1024, "1 KiB"), (4096, "4 KiB")):
    ROWS.append(dict(name=f"CRC of a long run, {label}: 256-bit fold vs crc32_gzip_refl", binary="bench_icrc",
                     subject=f"BM_CrcLong256/{size}", baseline=f"BM_Crc32GzipRefl/{size}",
                     metric="bytes_per_second", unit="GB/s"))
for size, what in ((44, "ACK"), (120, "WRITE 64 B")):
    ROWS.append(dict(name=f"RC ICRC, {size}-byte frame ({what}): 512-bit path vs 128-bit path", binary="bench_icrc",
                     subject=f"BM_IcrcPlain<true>/{size}", baseline=f"BM_IcrcPlain<false>/{size}",
                     metric="ns", unit="ns/frame"))
ROWS += [
    dict(name="write headers (Eth+IPv4+UDP+BTH+RETH) vs memcpy of a header template", binary="bench_codec",
         subject="BM_WriteHeaders", baseline="BM_CopyHeaderTemplate", metric="ns", unit="ns/packet"),
    dict(name="build frame, 256 B payload, ICRC included", binary="bench_codec",
         subject="BM_BuildFrame", baseline=None, metric="ns", unit="ns/packet"),
    dict(name="parse frame, 256 B payload, IP checksum + ICRC verified, vs parse without checks",
         binary="bench_codec", subject="BM_ParseFrame", baseline="BM_ParseFrameNoIcrc", metric="ns",
         unit="ns/packet"),
]

# RC engine, two engines in one thread over an in-memory wire (bench/bench_rc_engine.cpp). The
# baseline moves the same frames through the same wire and buffer pool with no RDMA processing.
for qps in (1, 1000, 100000):
    ROWS.append(dict(name=f"RC WRITE 64 B message rate, {qps} QP(s), vs raw wire (same frames)",
                     binary="bench_rc_engine", subject=f"BM_RcWrite/64/{qps}", baseline="BM_RawWire/64",
                     metric="items_per_second", unit="Mmsg/s"))
for qps in (1, 1000, 100000):
    ROWS.append(dict(name=f"RC WRITE 4 KiB bandwidth, {qps} QP(s), vs raw wire (same frames)",
                     binary="bench_rc_engine", subject=f"BM_RcWrite/4096/{qps}", baseline="BM_RawWire/4096",
                     metric="bytes_per_second", unit="GB/s"))
ROWS += [
    dict(name="RC SEND 64 B message rate, 1 QP, vs raw wire", binary="bench_rc_engine",
         subject="BM_RcSend/64/1", baseline="BM_RawWire/64", metric="items_per_second", unit="Mmsg/s"),
    dict(name="RC READ 64 B message rate, 1 QP, vs raw wire", binary="bench_rc_engine",
         subject="BM_RcRead/64/1", baseline="BM_RawWire/64", metric="items_per_second", unit="Mmsg/s"),
    dict(name="RC WRITE 64 B message rate, 100,000 QPs vs 1 QP (flatness)", binary="bench_rc_engine",
         subject="BM_RcWrite/64/100000", baseline="BM_RcWrite/64/1", metric="items_per_second", unit="Mmsg/s"),
    dict(name="RC WRITE 64 B message rate, 100,000 QPs vs 1,000 QPs (cache misses alone)",
         binary="bench_rc_engine", subject="BM_RcWrite/64/100000", baseline="BM_RcWrite/64/1000",
         metric="items_per_second", unit="Mmsg/s"),
    dict(name="RC WRITE 64 B, 100,000 QPs: heap allocations per message (debug counter)",
         binary="bench_rc_engine", subject="BM_RcWrite/64/100000", baseline=None,
         metric="counter:allocs_per_op", unit="allocs/op"),
    dict(name="RC WRITE 64 B, 100,000 QPs: QPs visited per poll (both engines)",
         binary="bench_rc_engine", subject="BM_RcWrite/64/100000", baseline=None,
         metric="counter:visits_per_poll", unit="QPs/poll"),
]
for qps in (1, 1000, 100000):
    ROWS.append(dict(name=f"memory per QP at {qps} QP(s): engine QueuePair + SQ(4)/RQ(1) queues",
                     binary="bench_rc_engine", subject=f"BM_QpMemory/{qps}/iterations:1", baseline=None,
                     metric="counter:bytes_per_qp", unit="bytes/QP"))

# Connections per second on one control thread (bench/bench_cm_connections.cpp): two adapters over
# a ring pair, one thread polls both CMs and all cores; Connect/Accept/CompleteConnect/Disconnect on
# both sides per connection, QPs created ahead of time. window = connections in flight at once.
for window in (1, 16, 64):
    ROWS.append(dict(name=f"CM connections established + torn down per second, {window} in flight (both ends on one thread)",
                     binary="bench_cm_connections", subject=f"BM_CmConnect/{window}/real_time", baseline=None,
                     metric="counter:kconn_per_s", unit="k conn/s"))


def run_one(bin_dir, binary, bench, core, min_time):
    """One process, one benchmark; returns the metric (bytes/s or ns per iteration)."""
    cmd = ["taskset", "-c", str(core), os.path.join(bin_dir, binary),
           f"--benchmark_filter=^{bench}$", f"--benchmark_min_time={min_time}",
           "--benchmark_format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    b = [x for x in data["benchmarks"] if x.get("run_type", "iteration") == "iteration"][0]
    return b


def metric_of(b, metric):
    if metric == "bytes_per_second":
        return b["bytes_per_second"] / 1e9  # GB/s (10^9 bytes)
    if metric == "items_per_second":
        return b["items_per_second"] / 1e6  # millions per second
    if metric.startswith("counter:"):
        return b[metric.split(":", 1)[1]]  # a user counter, as the benchmark reports it
    # CPU time per iteration in ns (wall time on a shared machine includes steal).
    t = b["cpu_time"]
    return {"ns": 1.0, "us": 1e3, "ms": 1e6}[b["time_unit"]] * t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--core", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", default="0.2")
    ap.add_argument("--extra-rows", action="append", default=[])
    ap.add_argument("--only", default=None,
                    help="run only the rows whose binary is this (the others are kept from --out)")
    args = ap.parse_args()
    if args.rounds < 5:
        sys.exit("bench_report: at least 5 alternating rounds (DESIGN.md section 8)")

    results = []
    previous = []
    if args.only and os.path.exists(args.out):
        with open(args.out) as f:
            previous = json.load(f)
    for row in ROWS:
        if args.only and row["binary"] != args.only:
            continue
        subj, base, ratios = [], [], []
        # A benchmark that skips itself on this CPU (SkipWithError: no AVX-512, no VPCLMULQDQ)
        # gives a row that says so, not a value of 0.
        probe = run_one(args.bin_dir, row["binary"], row["subject"], args.core, "0.01")
        if probe.get("error_occurred"):
            r = {"name": row["name"], "skipped": probe.get("error_message", "skipped"),
                 "subject": f'{row["binary"]}:{row["subject"]}'}
            results.append(r)
            print(f"  {r['name']}: skipped ({r['skipped']})", file=sys.stderr)
            continue
        for _ in range(args.rounds):
            if row["baseline"]:
                bv = metric_of(run_one(args.bin_dir, row["binary"], row["baseline"], args.core, args.min_time),
                               row["metric"])
                base.append(bv)
            sv = metric_of(run_one(args.bin_dir, row["binary"], row["subject"], args.core, args.min_time),
                           row["metric"])
            subj.append(sv)
            if row["baseline"]:
                ratios.append(sv / bv if bv else float("nan"))
        r = {"name": row["name"], "value": round(statistics.median(subj), 3), "unit": row["unit"],
             "subject": f'{row["binary"]}:{row["subject"]}', "rounds": args.rounds, "core": args.core}
        if row["baseline"]:
            r.update({"baseline_name": f'{row["binary"]}:{row["baseline"]}',
                      "baseline_value": round(statistics.median(base), 3),
                      "ratio": round(statistics.median(ratios), 3),
                      "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3)})
        results.append(r)
        print(f"  {r['name']}: {r['value']} {r['unit']}"
              + (f" (baseline {r['baseline_value']}, ratio {r['ratio']})" if "ratio" in r else ""),
              file=sys.stderr)
    for path in args.extra_rows:
        with open(path) as f:
            results += json.load(f)
    if args.only:
        # The other binaries' rows stay where they were; this binary's rows replace theirs in
        # place (matched by name), new ones go at the end.
        fresh = {r["name"]: r for r in results}
        merged = []
        for r in previous:
            if not r.get("subject", "").startswith(args.only + ":"):
                merged.append(r)
            elif r["name"] in fresh:
                merged.append(fresh.pop(r["name"]))
        results = merged + [r for r in results if r["name"] in fresh]
    elif os.path.exists(args.out):
        # Rows of the other scripts (bench_dataplane.py, bench_baselines.py, ...) stay.
        with open(args.out) as f:
            names = {r["name"] for r in results}
            results = [r for r in json.load(f) if r.get("name") not in names] + results

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")

    print("| benchmark | value | baseline | baseline value | ratio (median, min–max) |")
    print("|---|---|---|---|---|")
    for r in results:
        if "skipped" in r:
            print(f"| {r['name']} | skipped: {r['skipped']} | – | – | – |")
        elif "ratio" in r:
            rr = f"{r['ratio']:.3f} ({r.get('ratio_min', r['ratio']):.3f}–{r.get('ratio_max', r['ratio']):.3f})"
            print(f"| {r['name']} | {r['value']} {r['unit']} | {r['baseline_name']} | "
                  f"{r['baseline_value']} {r['unit']} | {rr} |")
        else:
            print(f"| {r['name']} | {r['value']} {r['unit']} | – | – | – |")


if __name__ == "__main__":
    main()

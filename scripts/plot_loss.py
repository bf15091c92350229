#!/usr/bin/env python3
"""Draws goodput vs loss (bench/results/loss.svg) from the rows scripts/bench_loss.py merged into
bench/results/latest.json: the measured ratio to clean (median, min-max bars) next to the
go-back-N ceiling (1-p)/(1+(W-1)p) of shared/reference/LOSS.md for W = 8, 16, 32 and 128
packets in flight. Plain SVG, no plotting library.

  scripts/plot_loss.py [--in bench/results/latest.json] [--out bench/results/loss.svg]
"""
import argparse
import json
import math
import os

W_CURVES = (8, 16, 32, 128)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--in", dest="inp", default=os.path.join(root, "bench/results/latest.json"))
    ap.add_argument("--out", default=os.path.join(root, "bench/results/loss.svg"))
    args = ap.parse_args()
    with open(args.inp) as f:
        rows = [r for r in json.load(f) if r.get("name", "").startswith("WRITE 4 KiB goodput") and "loss_pct" in r]
    rows.sort(key=lambda r: r["loss_pct"])
    width, height, left, right, top, bottom = 640, 400, 60, 150, 30, 50
    pw, ph = width - left - right, height - top - bottom
    lo, hi = math.log10(0.05), math.log10(20)

    def x(p):
        return left + (math.log10(p) - lo) / (hi - lo) * pw

    def y(v):
        return top + (1 - max(0.0, min(1.05, v)) / 1.05) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="12">', f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">rocedp: 4 KiB WRITE goodput vs random loss (both directions), '
           f'4 QPs, memif</text>']
    for v in (0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0):
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for p in (0.1, 1, 5, 10):
        out.append(f'<line x1="{x(p):.1f}" x2="{x(p):.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x(p):.1f}" y="{top + ph + 16}" text-anchor="middle">{p:g}%</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">frames lost (each direction)</text>')
    out.append(f'<text x="16" y="{top + ph / 2}" transform="rotate(-90 16 {top + ph / 2})" '
               f'text-anchor="middle">goodput / clean goodput</text>')
    greys = ("#999", "#aaa", "#bbb", "#ccc")
    for i, wn in enumerate(W_CURVES):
        pts = []
        for k in range(0, 101):
            p = 10 ** (lo + (hi - lo) * k / 100) / 100
            pts.append(f"{x(p * 100):.1f},{y((1 - p) / (1 + (wn - 1) * p)):.1f}")
        out.append(f'<polyline fill="none" stroke="{greys[i]}" stroke-dasharray="4 3" points="{" ".join(pts)}"/>')
        out.append(f'<text x="{left + pw + 6}" y="{top + 60 + 16 * i}" fill="#777">- - go-back-N ceiling, W={wn}</text>')
    pts = []
    for r in rows:
        px, py = x(r["loss_pct"]), y(r["ratio"])
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y(r["ratio_min"]):.1f}" y2="{y(r["ratio_max"]):.1f}" '
                   f'stroke="#c33"/>')
        out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="#c33"/>')
        out.append(f'<text x="{px + 7:.1f}" y="{py - 6:.1f}" fill="#c33">{r["ratio"]:.2f}</text>')
        pts.append(f"{px:.1f},{py:.1f}")
    if pts:
        out.append(f'<polyline fill="none" stroke="#c33" stroke-width="2" points="{" ".join(pts)}"/>')
    out.append(f'<text x="{left + pw + 6}" y="{top + 40}" fill="#c33">● measured (median, min–max)</text>')
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"plot_loss: {len(rows)} points -> {args.out}")


if __name__ == "__main__":
    main()

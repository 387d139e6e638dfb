#!/usr/bin/env python3
"""PNG charts of the SGEMM and attention prefill GFLOP/s in ak_bench's JSON, drawn by gnuplot.

    chart.py RESULTS.json [--out FILE.png ...] [--shapes REGEX]
                          [--attention-out FILE.png ...]

One panel per thread count, stacked in one PNG: grouped bars attnkern,
oneDNN, OpenBLAS for every sgemm/ shape (the skinny ones aside: they are
bound by memory and tabulated in GB/s), in the order ak_bench registers them;
a dashed line marks the measured FMA peak of the best instruction set at that
thread count (peak/fma/<isa>) when the JSON has it. A missing or failed
number leaves a gap. The default output is RESULTS-sgemm.png next to the
JSON; every further --out gets a copy (e.g. bench/sgemm.png for committing).

A second PNG, when the JSON has attention/ (prefill) results: GFLOP/s (the
useful FLOPs of compare.py's table, causal halved) against L on a log2 axis,
one panel per head dimension d (rows) and thread count (columns), a line per
implementation (attnkern, unfused oneDNN) and mask (no mask solid, causal
dashed), with the measured FMA peak at that thread count (same choice as
above) and the prefill target fraction of it (60 % for d=128, 50 % for d=64)
as horizontal lines when the JSON has the peak. The default output is
RESULTS-attention.png next to the JSON; every further --attention-out gets a
copy. Without attention/ results there is no such PNG (and no message).

Needs gnuplot with the pngcairo terminal (Debian: gnuplot-nox, which
scripts/install-deps.sh --bench installs); the rest is the standard library
and compare.py's loader. Exit status: 0 written (or nothing to draw), 2
gnuplot missing or failed.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (bench/compare.py: load(), peaks(), sgemm_group())

IMPLS = [("attnkern", "attnkern", "#d62728"), ("onednn", "oneDNN", "#1f77b4"),
         ("openblas", "OpenBLAS", "#8c8c8c")]


def collect(entries, shape_re):
    """threads -> [(shape, [GFLOP/s or None per IMPLS entry])] in registration order."""
    panels = {}
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "sgemm" or compare.sgemm_group(shape) == "skinny":
            continue
        if shape_re and not re.search(shape_re, shape):
            continue
        vals = [compare.cell(by_impl, impl, "flops", 1e9)[1] for impl, _, _ in IMPLS]
        if any(v is not None for v in vals):
            panels.setdefault(threads, []).append((shape, vals))
    return panels


# attention/<impl>/d<d>_L<L>_<mask>: implementations in legend order (others
# found in the JSON follow, sorted), the line style of each mask, and the
# prefill target as a fraction of the measured FMA peak per d.
ATTN_IMPLS = [("attnkern", "#d62728"), (compare.UNFUSED, "#1f77b4")]
ATTN_OTHER_COLORS = ["#2ca02c", "#9467bd", "#8c564b", "#e377c2"]
ATTN_MASKS = [("nomask", "no mask", 1), ("causal", "causal", 2)]  # (name, title, dash type)
ATTN_TARGET = {64: 0.50, 128: 0.60}


def collect_attention(entries):
    """(d, threads) -> {(impl, mask): {L: GFLOP/s}}, and the implementations
    in legend order; panels without a single number are left out."""
    panels = {}
    seen = set()
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "attention":
            continue
        m = compare.ATTN_RE.match(shape)
        if not m:
            continue
        d, L, mask = int(m.group(1)), int(m.group(2)), m.group(3)
        for impl in by_impl:
            v = compare.cell(by_impl, impl, "flops", 1e9)[1]
            if v is None:
                continue
            seen.add(impl)
            panels.setdefault((d, threads), {}).setdefault((impl, mask), {})[L] = v
    known = [i for i, _ in ATTN_IMPLS]
    impls = [i for i in known if i in seen] + sorted(seen - set(known))
    return panels, impls


def gnuplot_quote(s):
    """A gnuplot string literal (double quotes: a newline becomes \\n)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def script(panels, pk, context, json_name, png, tmp):
    threads = sorted(panels)
    n = max(len(rows) for rows in panels.values())
    width = max(900, 140 + 46 * n)
    height = 120 + 430 * len(threads)
    title = "SGEMM GFLOP/s (row-major, alpha 1, beta 0): attnkern vs oneDNN vs OpenBLAS"
    sub = ", ".join(x for x in (context.get("cpu_model"), str(context.get("date", ""))[:16],
                                json_name) if x)
    heading = title + "\n" + sub + "\n "  # the blank line keeps the first key clear
    lines = [
        f"set terminal pngcairo noenhanced size {width},{height} font 'DejaVu Sans,10'",
        f"set output {gnuplot_quote(png)}",
        "set datafile missing '?'",
        "set datafile separator whitespace",
        "set style data histograms",
        "set style histogram clustered gap 1",
        "set style fill solid 0.85 border rgb '#404040'",
        "set boxwidth 0.9 relative",
        "set xtics rotate by 45 right scale 0 font ',9'",
        "set ytics nomirror",
        "set grid ytics lc rgb '#d0d0d0'",
        "set key tmargin center horizontal noopaque nobox",
        "set lmargin 10",
        "set tmargin 3",
        f"set multiplot layout {len(threads)},1 title {gnuplot_quote(heading)}",
    ]
    for t in threads:
        rows = panels[t]
        data = os.path.join(tmp, f"sgemm-t{t}.dat")
        with open(data, "w", encoding="utf-8") as f:
            for shape, vals in rows:
                f.write(shape + " " + " ".join("?" if v is None else f"{v:.3f}" for v in vals)
                        + "\n")
        isa, peak = compare.best_peak(pk, t)
        top = max([v for _, vals in rows for v in vals if v is not None] + [peak or 0])
        lines += [
            f"set ylabel {gnuplot_quote(f'GFLOP/s, {t} thread' + ('s' if t > 1 else ''))}",
            f"set xrange [-0.6:{len(rows) - 0.4}]",
            f"set yrange [0:{top * 1.12:.1f}]",
        ]
        plots = []
        for j, (_, name, color) in enumerate(IMPLS):
            using = f"{j + 2}:xtic(1)" if j == 0 else f"{j + 2}"
            src = gnuplot_quote(data) if j == 0 else "''"
            plots.append(f"{src} using {using} title {gnuplot_quote(name)} lc rgb '{color}'")
        if peak:
            plots.append(f"{peak:.3f} with lines dt 2 lw 2 lc rgb '#202020' "
                         f"title {gnuplot_quote(f'measured FMA peak ({isa}) {peak:.0f}')}")
        lines.append("plot " + ", \\\n     ".join(plots))
    lines.append("unset multiplot")
    return "\n".join(lines) + "\n"


def attention_script(panels, impls, pk, context, json_name, png, tmp):
    ds = sorted({d for d, _ in panels})
    threads = sorted({t for _, t in panels})
    Ls = sorted({L for series in panels.values() for by_L in series.values() for L in by_L})
    colors = dict(ATTN_IMPLS)
    others = iter(ATTN_OTHER_COLORS)
    for impl in impls:
        if impl not in colors:
            colors[impl] = next(others, "#7f7f7f")
    width = 120 + 700 * len(threads)
    height = 150 + 470 * len(ds)
    title = ("Attention prefill GFLOP/s (batch 1, 8 heads, q_len = kv_len = L; useful FLOPs "
             "8·2·L²·2d, halved for causal): " +
             " vs ".join(compare.PRETTY.get(i, i) for i in impls))
    sub = ", ".join(x for x in (context.get("cpu_model"), str(context.get("date", ""))[:16],
                                json_name) if x)
    has_peak = any(compare.best_peak(pk, t)[1] for t in threads)
    if not has_peak:
        sub += " (no peak/fma/ results: no peak or target lines)"
    heading = title + "\n" + sub + "\n "
    lines = [
        f"set terminal pngcairo noenhanced size {width},{height} font 'DejaVu Sans,10'",
        f"set output {gnuplot_quote(png)}",
        "set datafile missing '?'",
        "set datafile separator whitespace",
        "set logscale x 2",
        f"set xrange [{Ls[0] / 1.3:.3f}:{Ls[-1] * 1.3:.3f}]",
        "set xtics (" + ", ".join(f"'{L}' {L}" for L in Ls) + ") nomirror",
        "set mxtics 1",
        "set ytics nomirror",
        "set grid xtics ytics lc rgb '#d0d0d0'",
        "set xlabel 'L (q_len = kv_len)'",
        "set key tmargin center horizontal noopaque nobox samplen 3 font ',9'",
        "set lmargin 10",
        f"set rmargin {13 if has_peak else 3}",  # room for the peak and target labels
        "set tmargin 5",
        f"set multiplot layout {len(ds)},{len(threads)} title {gnuplot_quote(heading)}",
    ]
    for d in ds:
        for t in threads:
            series = panels.get((d, t))
            if series is None:
                lines.append("set multiplot next")
                continue
            cols = [(impl, mask) for impl in impls for mask, _, _ in ATTN_MASKS]
            data = os.path.join(tmp, f"attention-d{d}-t{t}.dat")
            with open(data, "w", encoding="utf-8") as f:
                for L in Ls:
                    vals = [series.get(c, {}).get(L) for c in cols]
                    f.write(f"{L} " + " ".join("?" if v is None else f"{v:.3f}" for v in vals)
                            + "\n")
            isa, peak = compare.best_peak(pk, t)
            frac = ATTN_TARGET.get(d)
            top = max([v for by_L in series.values() for v in by_L.values()] + [peak or 0])
            thr = f"{t} thread" + ("s" if t > 1 else "")
            ptitle = f"d = {d}, {thr}"
            if frac:
                ptitle += f" (target: {100 * frac:.0f}% of the FMA peak)"
            lines += [
                f"set title {gnuplot_quote(ptitle)} font ',11'",
                f"set ylabel {gnuplot_quote(f'GFLOP/s, {thr}')}",
                f"set yrange [0:{top * 1.1:.1f}]",
                "unset label",
            ]
            plots = []
            for j, (impl, mask) in enumerate(cols):
                if not series.get((impl, mask)):
                    continue
                name = compare.PRETTY.get(impl, impl)
                mtitle = next(mt for m, mt, _ in ATTN_MASKS if m == mask)
                dt = next(dt for m, _, dt in ATTN_MASKS if m == mask)
                pt = 7 if mask == "nomask" else 5
                plots.append(f"{gnuplot_quote(data)} using 1:{j + 2} with linespoints "
                             f"dt {dt} lw 2 pt {pt} ps 0.8 lc rgb '{colors[impl]}' "
                             f"title {gnuplot_quote(f'{name}, {mtitle}')}")
            # The peak and the target: labelled in the right margin, not in the key.
            hlines = []
            if peak:
                hlines.append((peak, f"FMA peak\n{isa}: {peak:.0f}", "(10,6)", "#202020"))
                if frac:
                    hlines.append((frac * peak, f"target {100 * frac:.0f}%\nof peak: "
                                   f"{frac * peak:.0f}", "(4,3)", "#2ca02c"))
            for y, text, dt, color in hlines:
                lines.append(f"set label {gnuplot_quote(text)} at graph 1.02, first {y:.3f} "
                             f"left tc rgb '{color}' font ',9'")
                plots.append(f"{y:.3f} with lines dt {dt} lw 2 lc rgb '{color}' notitle")
            lines.append("plot " + ", \\\n     ".join(plots))
    lines.append("unset multiplot")
    return "\n".join(lines) + "\n"


def draw(gnuplot, text_of, outs, tmp, name):
    """Run gnuplot on text_of(png, tmp) writing outs[0], then copy it to the
    other outs. Returns 0, or 2 when gnuplot failed."""
    png = os.path.abspath(outs[0])
    os.makedirs(os.path.dirname(png), exist_ok=True)
    gp = os.path.join(tmp, name + ".gp")
    with open(gp, "w", encoding="utf-8") as f:
        f.write(text_of(png, tmp))
    res = subprocess.run([gnuplot, gp], capture_output=True, text=True)
    if res.returncode != 0 or not os.path.exists(png):
        sys.stderr.write(res.stderr)
        print(f"chart.py: gnuplot failed on the {name} chart (status {res.returncode})",
              file=sys.stderr)
        return 2
    if res.stderr.strip():
        sys.stderr.write(res.stderr)
    for extra in outs[1:]:
        if os.path.abspath(extra) == os.path.abspath(png):
            continue  # asked for the default path again
        os.makedirs(os.path.dirname(os.path.abspath(extra)), exist_ok=True)
        shutil.copyfile(png, extra)
    for path in outs:
        print(f"chart.py: wrote {path}", file=sys.stderr)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="Google Benchmark JSON written by ak_bench")
    ap.add_argument("--out", metavar="FILE.png", action="append",
                    help="PNG to write (default: RESULTS-sgemm.png next to the JSON); "
                         "repeat to write copies")
    ap.add_argument("--shapes", metavar="REGEX", help="only the sgemm shapes matching REGEX")
    ap.add_argument("--attention-out", metavar="FILE.png", action="append",
                    help="attention prefill chart to write (default: RESULTS-attention.png "
                         "next to the JSON); repeat to write copies")
    args = ap.parse_args(argv)

    context, entries, _ = compare.load(args.json)
    panels = collect(entries, args.shapes)
    att_panels, att_impls = collect_attention(entries)
    if not panels:
        print(f"chart.py: no sgemm/ GFLOP/s numbers in {args.json}: no SGEMM chart",
              file=sys.stderr)
    if not panels and not att_panels:
        return 0
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        print("chart.py: gnuplot not found (Debian: apt-get install gnuplot-nox, or "
              "scripts/install-deps.sh --bench)", file=sys.stderr)
        return 2
    base = args.json[:-5] if args.json.endswith(".json") else args.json
    json_name = os.path.basename(args.json)
    pk = compare.peaks(entries)
    status = 0
    with tempfile.TemporaryDirectory(prefix="ak_chart_") as tmp:
        if panels:
            status = max(status, draw(
                gnuplot, lambda png, tmp: script(panels, pk, context, json_name, png, tmp),
                args.out or [base + "-sgemm.png"], tmp, "sgemm"))
        if att_panels:
            status = max(status, draw(
                gnuplot, lambda png, tmp: attention_script(att_panels, att_impls, pk, context,
                                                           json_name, png, tmp),
                args.attention_out or [base + "-attention.png"], tmp, "attention"))
    return status


if __name__ == "__main__":
    sys.exit(main())

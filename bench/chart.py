#!/usr/bin/env python3
"""PNG chart of the SGEMM GFLOP/s per shape in ak_bench's JSON, drawn by gnuplot.

    chart.py RESULTS.json [--out FILE.png ...] [--shapes REGEX]

One panel per thread count, stacked in one PNG: grouped bars attnkern,
oneDNN, OpenBLAS for every sgemm/ shape (the skinny ones aside: they are
bound by memory and tabulated in GB/s), in the order ak_bench registers them;
a dashed line marks the measured FMA peak of the best instruction set at that
thread count (peak/fma/<isa>) when the JSON has it. A missing or failed
number leaves a gap. The default output is RESULTS-sgemm.png next to the
JSON; every further --out gets a copy (e.g. bench/sgemm.png for committing).

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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="Google Benchmark JSON written by ak_bench")
    ap.add_argument("--out", metavar="FILE.png", action="append",
                    help="PNG to write (default: RESULTS-sgemm.png next to the JSON); "
                         "repeat to write copies")
    ap.add_argument("--shapes", metavar="REGEX", help="only the sgemm shapes matching REGEX")
    args = ap.parse_args(argv)

    context, entries, _ = compare.load(args.json)
    panels = collect(entries, args.shapes)
    if not panels:
        print(f"chart.py: no sgemm/ GFLOP/s numbers in {args.json}: no chart",
              file=sys.stderr)
        return 0
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        print("chart.py: gnuplot not found (Debian: apt-get install gnuplot-nox, or "
              "scripts/install-deps.sh --bench)", file=sys.stderr)
        return 2
    base = args.json[:-5] if args.json.endswith(".json") else args.json
    outs = args.out or [base + "-sgemm.png"]
    png = os.path.abspath(outs[0])
    os.makedirs(os.path.dirname(png), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ak_chart_") as tmp:
        text = script(panels, compare.peaks(entries), context, os.path.basename(args.json), png,
                      tmp)
        gp = os.path.join(tmp, "sgemm.gp")
        with open(gp, "w", encoding="utf-8") as f:
            f.write(text)
        res = subprocess.run([gnuplot, gp], capture_output=True, text=True)
        if res.returncode != 0 or not os.path.exists(png):
            sys.stderr.write(res.stderr)
            print(f"chart.py: gnuplot failed (status {res.returncode})", file=sys.stderr)
            return 2
        if res.stderr.strip():
            sys.stderr.write(res.stderr)
    for extra in outs[1:]:
        os.makedirs(os.path.dirname(os.path.abspath(extra)), exist_ok=True)
        shutil.copyfile(png, extra)
    for path in outs:
        print(f"chart.py: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

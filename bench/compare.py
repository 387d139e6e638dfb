#!/usr/bin/env python3
"""Markdown tables from ak_bench's Google Benchmark JSON output.

    compare.py RESULTS.json [--out FILE.md]

Reads the file written by `ak_bench --benchmark_out=RESULTS.json
--benchmark_out_format=json`. With --benchmark_repetitions the median
aggregate is used (and the coefficient of variation, when present, is shown
as a noise column); without, the median of the plain runs. Benchmarks are
named sgemm/<impl>/<shape>/threads:<t> and softmax/<impl>/<shape>/threads:<t>;
anything else in the file is ignored. Standard library only.
"""

import argparse
import json
import math
import re
import statistics
import sys
from collections import OrderedDict

NAME_RE = re.compile(r"^(sgemm|softmax)/([^/]+)/([^/]+)/threads:(\d+)(?:/|$)")

# (kind) -> counter shown, its scale, the implementations in column order
KINDS = {
    "sgemm": ("flops", 1e9, ["attnkern", "onednn", "openblas"]),
    "softmax": ("bytes", 1e9, ["attnkern", "onednn", "scalar"]),
}
PRETTY = {"attnkern": "attnkern", "onednn": "oneDNN", "openblas": "OpenBLAS",
          "scalar": "scalar"}

CONTEXT_KEYS = [
    ("cpu_model", "CPU"),
    ("num_cpus", "logical CPUs"),
    ("mhz_per_cpu", "MHz (as reported)"),
    ("attnkern_version", "attnkern version"),
    ("attnkern_isa", "attnkern ISA"),
    ("openblas_corename", "OpenBLAS core"),
    ("openblas_config", "OpenBLAS config"),
    ("openblas_coretype_env", "OPENBLAS_CORETYPE"),
    ("onednn_version", "oneDNN version"),
    ("onednn_isa", "oneDNN ISA"),
    ("scalar_softmax", "scalar softmax"),
    ("date", "date"),
    ("load_avg", "load average at start"),
    ("library_build_type", "Google Benchmark library build"),
]


class Entry:
    def __init__(self):
        self.runs = []      # plain iteration values of the counter
        self.median = None  # median aggregate of the counter
        self.cv = None      # coefficient of variation aggregate (fraction)
        self.error = None
        self.relerr = None
        self.label = ""
        self.order = None   # family_index: registration order

    def value(self):
        if self.error is not None:
            return None
        if self.median is not None:
            return self.median
        if self.runs:
            return statistics.median(self.runs)
        return None


def load(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    entries = OrderedDict()  # (kind, shape, threads) -> {impl: Entry}
    reps = set()
    for b in data.get("benchmarks", []):
        m = NAME_RE.match(b.get("run_name") or b.get("name", ""))
        if not m:
            continue
        kind, impl, shape, threads = m.group(1), m.group(2), m.group(3), int(m.group(4))
        counter = KINDS[kind][0]
        e = entries.setdefault((kind, shape, threads), {}).setdefault(impl, Entry())
        if "family_index" in b:
            e.order = b["family_index"]
        if b.get("label"):
            e.label = b["label"]
        reps.add(b.get("repetitions", 1))
        if b.get("error_occurred"):
            e.error = b.get("error_message", "error")
            continue
        agg = b.get("aggregate_name") if b.get("run_type") == "aggregate" else None
        rel = b.get("relerr")
        if (agg in (None, "median") and isinstance(rel, (int, float))
                and not math.isnan(rel)):
            e.relerr = rel if e.relerr is None else max(e.relerr, rel)
        if counter not in b:
            continue
        if b.get("run_type") == "aggregate":
            agg = b.get("aggregate_name")
            if agg == "median":
                e.median = b[counter]
            elif agg == "cv":
                # The cv of the time: Google Benchmark 1.7.1 writes a
                # meaningless cv for user counters into the JSON.
                e.cv = b.get("real_time")
        else:
            e.runs.append(b[counter])
    # Registration order (shape by shape, threads, implementation), whatever
    # order the runs were made in (--benchmark_enable_random_interleaving).
    def first(item):
        orders = [e.order for e in item[1].values() if e.order is not None]
        return min(orders) if orders else float("inf")
    entries = OrderedDict(sorted(entries.items(), key=first))
    return data.get("context", {}), entries, reps


def fmt(v, digits=1):
    return "—" if v is None else f"{v:.{digits}f}"


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def noise(impls):
    cvs = [e.cv for e in impls.values() if e.cv is not None]
    return f"{100 * max(cvs):.1f}%" if cvs else "—"


def sgemm_group(shape):
    return "squares" if shape.startswith(("nn_", "nt_")) else "attention"


def sgemm_shape_cols(shape, label):
    # label: "m=.. n=.. k=.. NN|NT"
    m = re.match(r"m=(\d+) n=(\d+) k=(\d+) (N[NT])", label or "")
    if m:
        return f"{m.group(1)}×{m.group(2)}×{m.group(3)}", m.group(4)
    return "?", "?"


def table(kind, entries, has_cv):
    counter, scale, impls = KINDS[kind]
    unit = "GFLOP/s" if kind == "sgemm" else "GB/s"
    a, p1, p2 = impls
    lines = []
    head = ["shape"]
    if kind == "sgemm":
        head += ["m×n×k", "op"]
    head += ["thr"] + [f"{PRETTY[i]} {unit}" for i in impls]
    head += [f"{PRETTY[a]}/{PRETTY[p1]}", f"{PRETTY[a]}/{PRETTY[p2]}"]
    if has_cv:
        head.append("max cv")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] * (len(head) - (len(impls) + 2 + has_cv)) +
                                 ["---:"] * (len(impls) + 2 + has_cv)) + "|")
    rows = []  # (group, threads, values, ratios)
    for (k, shape, threads), by_impl in entries.items():
        if k != kind:
            continue
        vals = []
        for i in impls:
            e = by_impl.get(i)
            v = e.value() if e else None
            vals.append(None if v is None else v / scale)
        r1, r2 = ratio(vals[0], vals[1]), ratio(vals[0], vals[2])
        cells = [shape]
        if kind == "sgemm":
            label = next((e.label for e in by_impl.values() if e.label), "")
            cells += list(sgemm_shape_cols(shape, label))
        cells.append(str(threads))
        for i, v in zip(impls, vals):
            e = by_impl.get(i)
            cells.append("ERR" if e is not None and e.error else fmt(v))
        cells += [fmt(r1, 2), fmt(r2, 2)]
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
        group = sgemm_group(shape) if kind == "sgemm" else "all"
        rows.append((group, threads, vals, (r1, r2)))

    def summary(title, pick):
        sel = [r for r in rows if pick(r) and all(v is not None for v in r[2])]
        if not sel:
            return
        cells = [f"**{title}** ({len(sel)})"]
        if kind == "sgemm":
            cells += ["", ""]
        cells.append("")
        cells += [fmt(geomean([r[2][j] for r in sel])) for j in range(len(impls))]
        cells += [fmt(geomean([r[3][j] for r in sel]), 2) for j in range(2)]
        if has_cv:
            cells.append("")
        lines.append("| " + " | ".join(cells) + " |")

    thread_counts = sorted({r[1] for r in rows})
    groups = ["squares", "attention"] if kind == "sgemm" else []
    for g in groups:
        for t in thread_counts:
            summary(f"geomean {g}, {t} thr", lambda r, g=g, t=t: r[0] == g and r[1] == t)
    for t in thread_counts:
        summary(f"geomean {t} thr", lambda r, t=t: r[1] == t)
    summary("geomean all", lambda r: True)
    return lines


def render(context, entries, reps):
    out = []
    out.append("### Context")
    out.append("")
    for key, title in CONTEXT_KEYS:
        if key in context:
            v = context[key]
            if isinstance(v, list):
                v = ", ".join(f"{x:.2f}" if isinstance(x, float) else str(x) for x in v)
            out.append(f"- {title}: `{v}`")
    rep = max(reps) if reps else 1
    has_cv = any(e.cv is not None for by in entries.values() for e in by.values())
    how = (f"median of {rep} repetitions" if rep > 1 else "single run (no repetitions)")
    out.append(f"- statistic: {how}; ratios > 1 mean attnkern is faster")
    out.append("")
    kinds = [k for k in KINDS if any(key[0] == k for key in entries)]
    for kind in kinds:
        if kind == "sgemm":
            out.append("### SGEMM (GFLOP/s = 2mnk / real time)")
        else:
            out.append("### Softmax (GB/s = 2·rows·cols·4 bytes / real time)")
        out.append("")
        out += table(kind, entries, has_cv)
        out.append("")
    # Agreement check and errors.
    worst = {}
    errors = []
    for (kind, shape, threads), by_impl in entries.items():
        for impl, e in by_impl.items():
            if e.error:
                errors.append(f"{kind}/{impl}/{shape}/threads:{threads}: {e.error}")
            elif e.relerr is not None:
                cur = worst.get(kind)
                if cur is None or e.relerr > cur[0]:
                    worst[kind] = (e.relerr, f"{impl} {shape} threads:{threads}")
    for kind in kinds:
        if kind in worst:
            v, where = worst[kind]
            out.append(f"- {kind} agreement: largest max-rel-diff to the closest peer "
                       f"{v:.2g} ({where})")
    if errors:
        out.append("")
        out.append("**Errors (no number reported):**")
        out.append("")
        seen = set()
        for line in errors:
            if line not in seen:
                seen.add(line)
                out.append(f"- {line}")
    if not entries:
        out.append("(no sgemm/ or softmax/ benchmarks in this file)")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="Google Benchmark JSON written by ak_bench")
    ap.add_argument("--out", metavar="FILE", help="also write the Markdown to FILE")
    args = ap.parse_args(argv)
    context, entries, reps = load(args.json)
    text = render(context, entries, reps)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

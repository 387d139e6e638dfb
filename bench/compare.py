#!/usr/bin/env python3
"""Markdown tables from ak_bench's Google Benchmark JSON output.

    compare.py RESULTS.json [--out FILE.md]

Reads the file written by `ak_bench --benchmark_out=RESULTS.json
--benchmark_out_format=json`. With --benchmark_repetitions the median
aggregate is used (and the coefficient of variation, when present, is shown
as a noise column); without, the median of the plain runs. Benchmarks are
named <kind>/<impl>/<shape>/threads:<t> with kind sgemm, softmax, attention
(prefill), decode or membw (the streaming-read reference); anything else in
the file is ignored. Standard library only.
"""

import argparse
import json
import math
import re
import statistics
import sys
from collections import OrderedDict

NAME_RE = re.compile(
    r"^(sgemm|softmax|attention|decode|membw)/([^/]+)/([^/]+)/threads:(\d+)(?:/|$)")

# Every kind, in the order of the report.
ALL_KINDS = ["sgemm", "softmax", "attention", "decode", "membw"]
# Counters kept per benchmark (rates, per second).
COUNTERS = ["flops", "bytes"]
# (kind) -> counter shown, its scale, the implementations in column order
# (the three-way comparison tables).
KINDS = {
    "sgemm": ("flops", 1e9, ["attnkern", "onednn", "openblas"]),
    "softmax": ("bytes", 1e9, ["attnkern", "onednn", "scalar"]),
}
PRETTY = {"attnkern": "attnkern", "onednn": "oneDNN", "openblas": "OpenBLAS",
          "scalar": "scalar", "unfused_onednn": "unfused oneDNN"}

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
    ("unfused_attention", "unfused attention"),
    ("date", "date"),
    ("load_avg", "load average at start"),
    ("library_build_type", "Google Benchmark library build"),
]


class Entry:
    def __init__(self):
        self.runs = {}      # counter -> plain iteration values
        self.median = {}    # counter -> median aggregate
        self.cv = None      # coefficient of variation aggregate of the time (fraction)
        self.error = None
        self.relerr = None
        self.maxdiff = None  # attention/decode: max |attnkern - unfused|
        self.refdiff = None  # attention/decode: max |x - double reference rows|
        self.label = ""
        self.order = None   # family_index: registration order

    def value(self, counter):
        if self.error is not None:
            return None
        if counter in self.median:
            return self.median[counter]
        if self.runs.get(counter):
            return statistics.median(self.runs[counter])
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
        if agg in (None, "median"):
            for attr in ("relerr", "maxdiff", "refdiff"):
                x = b.get(attr)
                if isinstance(x, (int, float)) and not math.isnan(x):
                    cur = getattr(e, attr)
                    setattr(e, attr, x if cur is None else max(cur, x))
        if b.get("run_type") == "aggregate":
            agg = b.get("aggregate_name")
            if agg == "median":
                for c in COUNTERS:
                    if c in b:
                        e.median[c] = b[c]
            elif agg == "cv":
                # The cv of the time: Google Benchmark 1.7.1 writes a
                # meaningless cv for user counters into the JSON.
                e.cv = b.get("real_time")
        else:
            for c in COUNTERS:
                if c in b:
                    e.runs.setdefault(c, []).append(b[c])
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
            v = e.value(counter) if e else None
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


def cell(by_impl, impl, counter, scale):
    """(text, value) of one implementation's counter in a row."""
    e = by_impl.get(impl)
    if e is None:
        return "—", None
    if e.error:
        return "ERR", None
    v = e.value(counter)
    v = None if v is None else v / scale
    return fmt(v), v


def summary_row(title, rows, pick, ncols_before, nvals, nratios, has_cv):
    """Geometric means of the value and ratio columns of the picked rows that
    have every number."""
    sel = [r for r in rows if pick(r) and all(v is not None for v in r["vals"] + r["ratios"])]
    if not sel:
        return None
    cells = [f"**{title}** ({len(sel)})"] + [""] * (ncols_before - 1)
    cells += [fmt(geomean([r["vals"][j] for r in sel])) for j in range(nvals)]
    cells += [fmt(geomean([r["ratios"][j] for r in sel]), 2) for j in range(nratios)]
    if has_cv:
        cells.append("")
    return "| " + " | ".join(cells) + " |"


ATTN_RE = re.compile(r"^d(\d+)_L(\d+)_(causal|nomask)$")
DECODE_RE = re.compile(r"^h(\d+)_kvh(\d+)_d(\d+)_kv(\d+)$")
UNFUSED = "unfused_onednn"


def attention_table(entries, has_cv):
    head = ["d", "L", "mask", "thr", "attnkern GFLOP/s", "unfused oneDNN GFLOP/s",
            "attnkern/unfused"]
    if has_cv:
        head.append("max cv")
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---:"] * 2 + ["---"] + ["---:"] * (len(head) - 3)) + "|"]
    rows = []
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "attention":
            continue
        m = ATTN_RE.match(shape)
        d, L, mask = m.groups() if m else ("?", shape, "?")
        ta, va = cell(by_impl, "attnkern", "flops", 1e9)
        tu, vu = cell(by_impl, UNFUSED, "flops", 1e9)
        r = ratio(va, vu)
        cells = [d, L, mask, str(threads), ta, tu, fmt(r, 2)]
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
        rows.append({"mask": mask, "d": d, "thr": threads, "vals": [va, vu], "ratios": [r]})
    threads = sorted({r["thr"] for r in rows})
    for mask in ("nomask", "causal"):
        for t in threads:
            line = summary_row(f"geomean {mask}, {t} thr", rows,
                               lambda r, mask=mask, t=t: r["mask"] == mask and r["thr"] == t,
                               4, 2, 1, has_cv)
            if line:
                lines.append(line)
    for t in threads:
        line = summary_row(f"geomean {t} thr", rows, lambda r, t=t: r["thr"] == t,
                           4, 2, 1, has_cv)
        if line:
            lines.append(line)
    line = summary_row("geomean all", rows, lambda r: True, 4, 2, 1, has_cv)
    if line:
        lines.append(line)
    return lines


def membw_by_threads(entries):
    """threads -> streaming-read GB/s (the first membw/read benchmark)."""
    bw = {}
    for (kind, shape, threads), by_impl in entries.items():
        if kind == "membw" and threads not in bw:
            e = by_impl.get("read")
            v = e.value("bytes") if e else None
            if v is not None:
                bw[threads] = v / 1e9
    return bw


def decode_table(entries, has_cv):
    bw = membw_by_threads(entries)
    head = ["heads/kv heads", "d", "kv_len", "thr", "attnkern GB/s", "unfused oneDNN GB/s",
            "attnkern % of read BW", "unfused % of read BW", "attnkern/unfused",
            "attnkern GFLOP/s", "unfused GFLOP/s"]
    if has_cv:
        head.append("max cv")
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    rows = []
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "decode":
            continue
        m = DECODE_RE.match(shape)
        if m:
            h, kvh, d, n = m.groups()
            heads = f"{h}/{kvh}" + (" (GQA)" if int(kvh) < int(h) else "")
        else:
            heads, d, n = shape, "?", "?"
        ta, va = cell(by_impl, "attnkern", "bytes", 1e9)
        tu, vu = cell(by_impl, UNFUSED, "bytes", 1e9)
        fa, _ = cell(by_impl, "attnkern", "flops", 1e9)
        fu, _ = cell(by_impl, UNFUSED, "flops", 1e9)
        ref = bw.get(threads)
        pa = ratio(va, ref)
        pu = ratio(vu, ref)
        r = ratio(va, vu)
        cells = [heads, d, n, str(threads), ta, tu,
                 "—" if pa is None else f"{100 * pa:.0f}%",
                 "—" if pu is None else f"{100 * pu:.0f}%", fmt(r, 2), fa, fu]
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
        rows.append({"thr": threads, "vals": [va, vu], "ratios": [r]})
    for t in sorted({r["thr"] for r in rows}):
        sel = [r for r in rows if r["thr"] == t and None not in r["vals"] + r["ratios"]]
        if not sel:
            continue
        cells = [f"**geomean {t} thr** ({len(sel)})", "", "", ""]
        cells += [fmt(geomean([r["vals"][j] for r in sel])) for j in range(2)]
        cells += ["", "", fmt(geomean([r["ratios"][0] for r in sel]), 2), "", ""]
        if has_cv:
            cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def membw_table(entries, has_cv):
    head = ["benchmark", "thr", "GB/s"] + (["cv"] if has_cv else [])
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "membw":
            continue
        for impl, e in by_impl.items():
            t, _ = cell(by_impl, impl, "bytes", 1e9)
            cells = [f"membw/{impl}/{shape}", str(threads), t]
            if has_cv:
                cells.append("—" if e.cv is None else f"{100 * e.cv:.1f}%")
            lines.append("| " + " | ".join(cells) + " |")
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
    kinds = [k for k in ALL_KINDS if any(key[0] == k for key in entries)]
    for kind in kinds:
        if kind == "sgemm":
            out.append("### SGEMM (GFLOP/s = 2mnk / real time)")
            out.append("")
            out += table(kind, entries, has_cv)
        elif kind == "softmax":
            out.append("### Softmax (GB/s = 2·rows·cols·4 bytes / real time)")
            out.append("")
            out += table(kind, entries, has_cv)
        elif kind == "attention":
            out.append("### Attention prefill (batch 1, 8 heads, q_len = kv_len = L; "
                       "GFLOP/s = useful FLOPs 8·2·L²·2d, halved for causal / real time)")
            out.append("")
            out += attention_table(entries, has_cv)
        elif kind == "decode":
            out.append("### Attention decode (q_len 1, 32 query heads; GB/s = K and V "
                       "read once, 2·kv_heads·kv_len·d·4 bytes / real time; "
                       "% of the membw streaming-read GB/s at the same thread count)")
            out.append("")
            out += decode_table(entries, has_cv)
        else:
            out.append("### Memory bandwidth reference (streaming read, GB/s)")
            out.append("")
            out += membw_table(entries, has_cv)
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
    for kind in ("attention", "decode"):
        if kind not in kinds:
            continue
        md = [(e.maxdiff, f"{shape} threads:{threads}")
              for (k, shape, threads), by in entries.items() if k == kind
              for e in by.values() if e.maxdiff is not None and not e.error]
        if md:
            v, where = max(md)
            parts = []
            for impl in ("attnkern", UNFUSED):
                rd = [e.refdiff for (k, _, _), by in entries.items() if k == kind
                      for i, e in by.items() if i == impl and e.refdiff is not None
                      and not e.error]
                if rd:
                    parts.append(f"{PRETTY[impl]} {max(rd):.2g}")
            out.append(f"- {kind} agreement: largest max-abs-diff attnkern vs unfused "
                       f"{v:.2g} ({where}); largest max-abs-diff to rows computed in "
                       f"double: " + ", ".join(parts))
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
        out.append("(no sgemm/, softmax/, attention/, decode/ or membw/ benchmarks in this file)")
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

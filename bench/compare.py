#!/usr/bin/env python3
"""Markdown tables from ak_bench's Google Benchmark JSON output.

    compare.py RESULTS.json [--out FILE.md] [--command TEXT]
    compare.py RESULTS.json --update-readme bench/README.md --section avx512

The report opens with a summary: per kernel family and thread count,
attnkern against each peer as the geometric mean of the per-row ratios and
the worst row, with the machine, the instruction sets in use and the command
(--command, else the one bench/run.sh recorded in the JSON, else ak_bench's
own arguments). The full tables follow. --update-readme FILE --section NAME
replaces the text between the lines <!-- results:NAME:begin --> and
<!-- results:NAME:end --> of FILE with the summary, under a line naming the
machine, ISA, date and command, and writes the full tables to
results/NAME.md beside FILE. --update-summary FILE puts the summary alone
between <!-- results:summary:begin --> and <!-- results:summary:end -->.

Reads the file written by `ak_bench --benchmark_out=RESULTS.json
--benchmark_out_format=json`. With --benchmark_repetitions the median
aggregate is used (and the coefficient of variation, when present, is shown
as a noise column); without, the median of the plain runs. Benchmarks are
named <kind>/<impl>/<shape>/threads:<t> with kind peak (the FMA peak per
instruction set: peak/fma/<isa>), sgemm, sgemm_isa (attnkern forced to one
instruction set, and the plain loop), sgemm_batched, softmax (also the
out-of-cache shape 4096x4096_cold and the impls attnkern_log and
attnkern_axis), attention (prefill), window (attnkern's causal sliding
window), decode, membw (the streaming-read and
copy references: membw/read, membw/copy) or convert (convert/attnkern/<shape>
for ak_convert and ak_kv_cache_store, convert/memcpy/<shape> a memcpy of the
same byte count); anything else in the file is
ignored, and a table whose benchmarks are missing is left out (a column whose
reference is missing shows "—"). Standard library only; chart.py
imports load() and the peak/cell helpers from here.
"""

import argparse
import json
import os
import math
import re
import statistics
import sys
from collections import OrderedDict

import compare_kv
import compare_mods

NAME_RE = re.compile(
    r"^(sgemm_isa|sgemm_batched|sgemm|softmax|attention|window|encoder|decode|kvdecode|kvprefill|"
    r"membw|convert|peak|mods|varlen|rope|embedding)"
    r"/([^/]+)/([^/]+)/threads:(\d+)(?:/|$)")

# Every kind, in the order of the report.
ALL_KINDS = ["peak", "sgemm", "sgemm_isa", "sgemm_batched", "softmax", "attention", "window",
             "encoder", "decode", "kvdecode", "kvprefill", "membw", "convert",
             "mods", "varlen", "rope", "embedding"]
# Instruction sets of the peak benchmarks, best first.
ISA_ORDER = ["avx512", "avx2", "sse2", "neon", "scalar"]
# Counters kept per benchmark (rates, per second).
COUNTERS = ["flops", "bytes", "read_adj", "max_rss_MiB", "vs_plain", "vs_separate",
            "packed_vs_single", "vs_f32", "vs_contiguous"]
# softmax/: the three-way comparison, and attnkern's other entry points
# (ak_log_softmax, ak_softmax_axis), which have a table of their own.
SOFTMAX_IMPLS = ["attnkern", "onednn", "scalar"]
SOFTMAX_VARIANTS = ["attnkern_log", "attnkern_axis"]
COLD_SUFFIX = "_cold"  # softmax/<impl>/<rows>x<cols>_cold: rotated buffers, out of cache
# The in-cache softmax shapes of the softmax target (1.5x over oneDNN).
SOFTMAX_IN_CACHE = ["128x128", "1024x1024", "16x32768"]
PRETTY = {"attnkern": "attnkern", "onednn": "oneDNN", "openblas": "OpenBLAS",
          "scalar": "scalar", "unfused_onednn": "unfused oneDNN",
          "attnkern_log": "log-softmax", "attnkern_axis": "softmax_axis"}

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
    ("huge_pages", "large buffers"),
    ("scalar_softmax", "scalar softmax"),
    ("unfused_attention", "unfused attention"),
    ("date", "date"),
    ("run_command", "command"),
    ("ak_bench_command", "ak_bench command"),
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


TIME_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def call_ms(b):
    """Real time per iteration of one JSON entry, in ms (None if absent)."""
    t, unit = b.get("real_time"), TIME_UNIT_MS.get(b.get("time_unit", "ns"))
    return t * unit if isinstance(t, (int, float)) and unit else None


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
        ms = call_ms(b)
        if b.get("run_type") == "aggregate":
            agg = b.get("aggregate_name")
            if agg == "median":
                for c in COUNTERS:
                    if c in b:
                        e.median[c] = b[c]
                if ms is not None:
                    e.median["ms"] = ms
            elif agg == "cv":
                # The cv of the time: Google Benchmark 1.7.1 writes a
                # meaningless cv for user counters into the JSON.
                e.cv = b.get("real_time")
        else:
            for c in COUNTERS:
                if c in b:
                    e.runs.setdefault(c, []).append(b[c])
            if ms is not None:
                e.runs.setdefault("ms", []).append(ms)
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


def noise(impls, only=None):
    """The largest cv of the row's entries (of the implementations in `only`
    when given)."""
    cvs = [e.cv for i, e in impls.items() if e.cv is not None and (only is None or i in only)]
    return f"{100 * max(cvs):.1f}%" if cvs else "—"


def sgemm_group(shape):
    if shape.startswith(("nn_", "nt_")):
        return "squares"
    if shape.startswith(("qk_", "pv_")):
        return "attention"
    if shape.startswith(("tn_", "tt_")):
        return "transposed"
    if shape.startswith("skinny_"):
        return "skinny"
    return "other"


def sgemm_shape_cols(shape, label):
    # label: "m=.. n=.. k=.. NN|NT|TN|TT[ ...]"
    m = re.match(r"m=(\d+) n=(\d+) k=(\d+) ([NT][NT])", label or "")
    if m:
        return f"{m.group(1)}×{m.group(2)}×{m.group(3)}", m.group(4)
    return "?", "?"


def sgemm_mnk(label):
    m = re.match(r"m=(\d+) n=(\d+) k=(\d+)", label or "")
    return tuple(int(x) for x in m.groups()) if m else None


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
DECODE_RE = re.compile(r"^h(\d+)_kvh(\d+)_d(\d+)(?:_q(\d+))?_kv(\d+)$")
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


ENCODER_RE = re.compile(r"^b(\d+)_h(\d+)_d(\d+)_L(\d+)$")


def encoder_table(entries, has_cv):
    """Short prefill over a batch and many heads (encoder/), no mask: GFLOP/s
    of both implementations, their ratio, and attnkern's time per call."""
    head = ["batch", "heads", "d", "L", "thr", "attnkern ms per call", "attnkern GFLOP/s",
            "unfused oneDNN GFLOP/s", "attnkern/unfused"]
    if has_cv:
        head.append("max cv")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---:"] * len(head)) + "|"]
    rows = []
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "encoder":
            continue
        m = ENCODER_RE.match(shape)
        b, h, d, L = m.groups() if m else ("?", "?", "?", shape)
        _, ms = cell(by_impl, "attnkern", "ms", 1)
        ta, va = cell(by_impl, "attnkern", "flops", 1e9)
        tu, vu = cell(by_impl, UNFUSED, "flops", 1e9)
        r = ratio(va, vu)
        cells = [b, h, d, L, str(threads), fmt(ms, 3), ta, tu, fmt(r, 2)]
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
        rows.append({"thr": threads, "vals": [va, vu], "ratios": [r]})
    for t in sorted({r["thr"] for r in rows}):
        line = summary_row(f"geomean {t} thr", rows, lambda r, t=t: r["thr"] == t,
                           6, 2, 1, has_cv)
        if line:
            lines.append(line)
    return lines


WINDOW_RE = re.compile(r"^d(\d+)_L(\d+)_w(\d+)$")


def window_pair_fraction(L, w):
    """The (query, visible key) pairs of a causal sliding window of w keys
    (query i sees min(i + 1, w) of them) over those of the full causal mask,
    L (L + 1) / 2 counted as L² / 2 like the benchmark's causal FLOPs: the
    window's share of the causal call's useful FLOPs."""
    w = min(w, L)
    return (w * (w + 1) / 2 + (L - w) * w) / (L * L / 2)


def window_table(entries, has_cv):
    """attnkern's causal sliding window (window/), per (d, L, w, threads):
    the useful GFLOP/s, that rate over the one at the shortest L of the same
    d, w and threads (1.00 = cost in proportion to L·w), the time per call,
    and that time over the time of the full causal call at the same L, d and
    threads (attention/ rows, where the JSON has them)."""
    head = ["d", "L", "keys per query (w)", "thr", "attnkern GFLOP/s (useful)",
            "× the rate at the shortest L", "ms per call", "causal (no window) ms per call",
            "time / causal time", "useful FLOPs / causal's"]
    if has_cv:
        head.append("max cv")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---:"] * len(head)) + "|"]
    parsed = []
    for (kind, shape, threads), by_impl in entries.items():
        m = WINDOW_RE.match(shape) if kind == "window" else None
        if m:
            d, L, w = (int(x) for x in m.groups())
            parsed.append((d, L, w, threads, by_impl))
    base = {}
    for d, L, w, t, by_impl in sorted(parsed, key=lambda r: r[1]):
        _, v = cell(by_impl, "attnkern", "flops", 1e9)
        if v is not None:
            base.setdefault((d, w, t), v)
    for d, L, w, t, by_impl in parsed:
        text, v = cell(by_impl, "attnkern", "flops", 1e9)
        _, ms = cell(by_impl, "attnkern", "ms", 1)
        causal = entries.get(("attention", f"d{d}_L{L}_causal", t), {})
        _, ms_c = cell(causal, "attnkern", "ms", 1)
        cells = [str(d), str(L), str(w), str(t), text, fmt(ratio(v, base.get((d, w, t))), 2),
                 fmt(ms, 2), fmt(ms_c, 2), fmt(ratio(ms, ms_c), 3),
                 f"{window_pair_fraction(L, w):.3f}"]
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def membw_by_threads(entries, impl="read"):
    """threads -> GB/s of the first membw/<impl> benchmark (read: the
    streaming read; copy: bytes read + written by the copy)."""
    bw = {}
    for (kind, shape, threads), by_impl in entries.items():
        if kind == "membw" and threads not in bw:
            e = by_impl.get(impl)
            v = e.value("bytes") if e else None
            if v is not None:
                bw[threads] = v / 1e9
    return bw


ADJACENT_NOTE = ("; % of adjacent read = of the same streaming read taken just before and "
                 "after that implementation's own timed loop, the read_adj counter")


def adjacent_read(by_impl, impl):
    """GB/s of the streaming read taken next to this implementation's timed
    loop (the read_adj counter, memory-bound benchmarks only), or None."""
    e = by_impl.get(impl)
    v = e.value("read_adj") if e else None
    return v if v else None


def decode_table(entries, has_cv):
    bw = membw_by_threads(entries)
    head = ["heads/kv heads", "d", "q_len", "kv_len", "thr", "attnkern GB/s", "unfused oneDNN GB/s",
            "attnkern % of read BW", "unfused % of read BW", "attnkern % of adjacent read",
            "unfused % of adjacent read", "attnkern/unfused", "attnkern GFLOP/s",
            "unfused GFLOP/s"]
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
            h, kvh, d, q, n = m.groups()
            heads = f"{h}/{kvh}" + (" (GQA)" if int(kvh) < int(h) else "")
            q = q or "1"
        else:
            heads, d, q, n = shape, "?", "?", "?"
        ta, va = cell(by_impl, "attnkern", "bytes", 1e9)
        tu, vu = cell(by_impl, UNFUSED, "bytes", 1e9)
        fa, _ = cell(by_impl, "attnkern", "flops", 1e9)
        fu, _ = cell(by_impl, UNFUSED, "flops", 1e9)
        ref = bw.get(threads)
        pa = ratio(va, ref)
        pu = ratio(vu, ref)
        r = ratio(va, vu)
        cells = [heads, d, q, n, str(threads), ta, tu,
                 "—" if pa is None else f"{100 * pa:.0f}%",
                 "—" if pu is None else f"{100 * pu:.0f}%",
                 fmt_pct(ratio(va, adjacent_read(by_impl, "attnkern"))),
                 fmt_pct(ratio(vu, adjacent_read(by_impl, UNFUSED))), fmt(r, 2), fa, fu]
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
        rows.append({"thr": threads, "q1": q == "1", "vals": [va, vu], "ratios": [r]})
    # Single-query steps and steps of a few queries apart: the latter do
    # more arithmetic per byte and would pull a common mean around.
    for q1, what in ((True, "q_len 1"), (False, "q_len > 1")):
        for t in sorted({r["thr"] for r in rows}):
            sel = [r for r in rows if r["thr"] == t and r["q1"] == q1 and
                   None not in r["vals"] + r["ratios"]]
            if not sel:
                continue
            cells = [f"**geomean {what}, {t} thr** ({len(sel)})", "", "", "", ""]
            cells += [fmt(geomean([r["vals"][j] for r in sel])) for j in range(2)]
            cells += ["", "", "", "", fmt(geomean([r["ratios"][0] for r in sel]), 2), "", ""]
            if has_cv:
                cells.append("")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


SKINNY_TARGET = 0.90
# The skinny target's row counts (larger m, batched decode steps, are in the
# table but not in the target).
SKINNY_TARGET_RE = re.compile(r"^skinny_n[nt]_m(1|2|4|8)$")


def skinny_summary(entries):
    """Bullets against the skinny target, per thread count: attnkern's GB/s
    as a share of the adjacent streaming read for each skinny shape."""
    threads = sorted({t for (k, s, t) in entries if k == "sgemm" and sgemm_group(s) == "skinny"})
    lines = []
    for t in threads:
        shares = []
        for (k, shape, tt), by_impl in sorted(entries.items()):
            if k != "sgemm" or tt != t or not SKINNY_TARGET_RE.match(shape):
                continue
            _, va = cell(by_impl, "attnkern", "bytes", 1e9)
            r = ratio(va, adjacent_read(by_impl, "attnkern"))
            if r is not None:
                shares.append((r, shape))
        if not shares:
            continue
        met = sum(1 for r, _ in shares if r >= SKINNY_TARGET)
        lines.append(f"- skinny target, {t} thr: attnkern % of the adjacent read "
                     + ", ".join(f"{sh.replace('skinny_', '')} {fmt_pct(r)}" for r, sh in shares)
                     + f"; **{met} of {len(shares)}** at {100 * SKINNY_TARGET:.0f}% or more")
    return lines


# The decode target's rows: q_len 1, d 128, kv 8192 and 32768, 32 query
# heads over 32 and over 8 kv heads.
DECODE_TARGET_SHAPES = [f"h32_kvh{kvh}_d128_kv{n}" for kvh in (32, 8) for n in (8192, 32768)]
DECODE_TARGET = 0.85


def decode_summary(entries):
    """Bullets against the decode target, per thread count: attnkern's GB/s
    as a share of the adjacent streaming read on the target's rows."""
    threads = sorted({t for (k, _, t) in entries if k == "decode"})
    lines = []
    for t in threads:
        shares = []
        for shape in DECODE_TARGET_SHAPES:
            by_impl = entries.get(("decode", shape, t), {})
            _, va = cell(by_impl, "attnkern", "bytes", 1e9)
            r = ratio(va, adjacent_read(by_impl, "attnkern"))
            if r is not None:
                shares.append((r, shape))
        if not shares:
            continue
        lo, where = min(shares)
        met = sum(1 for r, _ in shares if r >= DECODE_TARGET)
        lines.append(f"- decode target, {t} thr (q_len 1, d 128, kv 8192 and 32768, 32 heads over "
                     f"32 and 8): attnkern at {', '.join(fmt_pct(r) for r, _ in shares)} of the "
                     f"adjacent read, min {fmt_pct(lo)} (`{where}`), **{met} of {len(shares)}** "
                     f"at {100 * DECODE_TARGET:.0f}% or more")
    return lines


def membw_table(entries, has_cv):
    """One row per (size, threads): the streaming read and the copy (bytes
    read + written); "—" where a JSON has only one of them."""
    impls = ["read", "copy"]
    head = ["benchmark", "thr", "read GB/s", "copy GB/s (read + written)", "copy/read"]
    if has_cv:
        head += ["read cv", "copy cv"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "membw":
            continue
        texts, vals = [], []
        for impl in impls:
            t, v = cell(by_impl, impl, "bytes", 1e9)
            texts.append(t)
            vals.append(v)
        cells = [f"membw/{{read,copy}}/{shape}", str(threads)] + texts
        cells.append(fmt(ratio(vals[1], vals[0]), 2))
        if has_cv:
            for impl in impls:
                e = by_impl.get(impl)
                cells.append("—" if e is None or e.cv is None else f"{100 * e.cv:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def convert_table(entries, has_cv):
    """One row per (shape, threads): attnkern's conversion or cache store and
    a memcpy moving the same bytes (read + written), and their ratio."""
    impls = ["attnkern", "memcpy"]
    head = ["benchmark", "thr", "attnkern GB/s", "memcpy GB/s", "attnkern/memcpy"]
    if has_cv:
        head += ["attnkern cv", "memcpy cv"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "convert":
            continue
        texts, vals = [], []
        for impl in impls:
            t, v = cell(by_impl, impl, "bytes", 1e9)
            texts.append(t)
            vals.append(v)
        cells = [f"convert/{shape}", str(threads)] + texts + [fmt(ratio(vals[0], vals[1]), 2)]
        if has_cv:
            for impl in impls:
                e = by_impl.get(impl)
                cells.append("—" if e is None or e.cv is None else f"{100 * e.cv:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ---------------------------------------------------------------- softmax

def softmax_table(entries, has_cv):
    """The three-way table (attnkern, oneDNN, scalar), in-cache shapes and
    the _cold (rotated, out-of-cache) rows; for the cold rows attnkern's and
    oneDNN's GB/s as a % of the membw copy at the same thread count. The
    geomean rows cover the shapes that are not _cold."""
    impls = SOFTMAX_IMPLS
    copy_bw = membw_by_threads(entries, "copy")
    has_cold = any(k == "softmax" and s.endswith(COLD_SUFFIX) for (k, s, _) in entries)
    head = ["shape", "thr"] + [f"{PRETTY[i]} GB/s" for i in impls]
    head += ["attnkern/oneDNN", "attnkern/scalar"]
    if has_cold:
        head += ["attnkern % of copy BW", "oneDNN % of copy BW"]
    if has_cv:
        head.append("max cv")
    lines = header(head, 2)
    rows = []
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "softmax" or not any(i in by_impl for i in impls):
            continue
        texts, vals = values(by_impl, impls, "bytes", 1e9)
        ratios = [ratio(vals[0], vals[1]), ratio(vals[0], vals[2])]
        cold = shape.endswith(COLD_SUFFIX)
        cells = [shape, str(threads)] + texts + [fmt(r, 2) for r in ratios]
        if has_cold:
            ref = copy_bw.get(threads) if cold else None
            cells += [fmt_pct(ratio(v, ref)) if cold else "" for v in vals[:2]]
        if has_cv:
            cells.append(noise(by_impl, impls))
        lines.append("| " + " | ".join(cells) + " |")
        rows.append({"cold": cold, "thr": threads, "vals": vals, "ratios": ratios})

    def summary(title, pick):
        sel = [r for r in rows if not r["cold"] and pick(r) and None not in r["vals"]]
        if not sel:
            return
        cells = [f"**{title}** ({len(sel)})", ""]
        cells += [fmt(geomean([r["vals"][j] for r in sel])) for j in range(len(impls))]
        cells += [fmt(geomean([r["ratios"][j] for r in sel]), 2) for j in range(2)]
        cells += ["", ""] if has_cold else []
        cells += [""] if has_cv else []
        lines.append("| " + " | ".join(cells) + " |")

    not_cold = " (not _cold)" if has_cold else ""
    for t in sorted({r["thr"] for r in rows}):
        summary(f"geomean {t} thr{not_cold}", lambda r, t=t: r["thr"] == t)
    summary(f"geomean all{not_cold}", lambda r: True)
    return lines


def softmax_summary(entries):
    """Bullets against the softmax targets, per thread count: attnkern/oneDNN
    over the target's in-cache shapes (geomean and minimum), and the cold
    shape's GB/s as a % of the membw copy."""
    copy_bw = membw_by_threads(entries, "copy")
    threads = sorted({t for (k, _, t) in entries if k == "softmax"})
    lines = []
    for t in threads:
        rs = []
        for shape in SOFTMAX_IN_CACHE:
            by_impl = entries.get(("softmax", shape, t), {})
            _, va = cell(by_impl, "attnkern", "bytes", 1e9)
            _, vo = cell(by_impl, "onednn", "bytes", 1e9)
            r = ratio(va, vo)
            if r is not None:
                rs.append((r, shape))
        parts = []
        if rs:
            lo, where = min(rs)
            parts.append(f"in cache ({', '.join(s for _, s in rs)}) attnkern/oneDNN geomean "
                         f"**{geomean([r for r, _ in rs]):.2f}**, min {lo:.2f} (`{where}`)")
        for (k, shape, tt), by_impl in entries.items():
            if k != "softmax" or tt != t or not shape.endswith(COLD_SUFFIX):
                continue
            _, va = cell(by_impl, "attnkern", "bytes", 1e9)
            _, vo = cell(by_impl, "onednn", "bytes", 1e9)
            ref = copy_bw.get(t)
            parts.append(f"`{shape}` attnkern {fmt(va)} GB/s = **{fmt_pct(ratio(va, ref))}** "
                         f"of the membw copy ({fmt(ref)} GB/s; oneDNN "
                         f"{fmt_pct(ratio(vo, ref))})")
        if parts:
            lines.append(f"- softmax targets, {t} thr: " + "; ".join(parts))
    return lines


def softmax_variants_table(entries, has_cv):
    """attnkern's log-softmax and softmax_axis against its softmax on the
    same shape and thread count: GB/s and their ratio to ak_softmax's."""
    impls = ["attnkern"] + SOFTMAX_VARIANTS
    head = ["shape", "thr", "softmax GB/s", "log-softmax GB/s", "softmax_axis GB/s",
            "log-softmax/softmax", "softmax_axis/softmax"]
    if has_cv:
        head.append("max cv")
    lines = header(head, 2)
    rows = []
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "softmax" or not any(v in by_impl for v in SOFTMAX_VARIANTS):
            continue
        texts, vals = values(by_impl, impls, "bytes", 1e9)
        ratios = [ratio(vals[1], vals[0]), ratio(vals[2], vals[0])]
        cells = [shape, str(threads)] + texts + [fmt(r, 2) for r in ratios]
        if has_cv:
            cells.append(noise(by_impl, impls))
        lines.append("| " + " | ".join(cells) + " |")
        rows.append({"shape": shape, "thr": threads, "vals": vals, "ratios": ratios})
    for t in sorted({r["thr"] for r in rows}):
        line = summary_row(f"geomean {t} thr", rows, lambda r, t=t: r["thr"] == t, 2, 3, 2,
                           has_cv)
        if line:
            lines.append(line)
    # Extremes of each ratio: the "within 20 %" reading.
    notes = []
    for j, name in enumerate(SOFTMAX_VARIANTS):
        rs = [(r["ratios"][j], f"{r['shape']} {r['thr']} thr") for r in rows
              if r["ratios"][j] is not None]
        if rs:
            lo, hi = min(rs), max(rs)
            below = sum(1 for r, _ in rs if r < 0.8)
            notes.append(f"- {PRETTY[name]}/softmax: min {lo[0]:.2f} ({lo[1]}), max {hi[0]:.2f} "
                         f"({hi[1]}); {below} of {len(rs)} rows below 0.80")
    if notes:
        lines += [""] + notes
    return lines


# ------------------------------------------------------------------ SGEMM

SGEMM_IMPLS = ["attnkern", "onednn", "openblas"]
TRANSPOSE_SHAPES = ["nn_1024", "nt_1024", "tn_1024", "tt_1024"]
SKINNY_RE = re.compile(r"^skinny_(nn|nt)_m(\d+)$")
BATCH_RE = re.compile(r"^b(\d+)_(\d+)x(\d+)x(\d+)$")
PLAIN_LOOP = "plain_loop"


def header(head, left):
    """A Markdown table header: the first `left` columns left-aligned, the
    rest right-aligned."""
    return ["| " + " | ".join(head) + " |",
            "|" + "|".join(["---"] * left + ["---:"] * (len(head) - left)) + "|"]


def fmt_pct(x, digits=0):
    return "—" if x is None else f"{100 * x:.{digits}f}%"


def fmt_x(x):
    return "—" if x is None else f"{x:.2f}×"


def peaks(entries):
    """(isa, threads) -> GFLOP/s of peak/fma/<isa>/threads:<t>."""
    pk = {}
    for (kind, shape, threads), by_impl in entries.items():
        if kind == "peak":
            e = by_impl.get("fma")
            v = e.value("flops") if e else None
            if v is not None:
                pk[(shape, threads)] = v / 1e9
    return pk


def best_peak(pk, threads):
    """(isa, GFLOP/s) of the best instruction set measured at `threads`: the
    yardstick of the "% of peak" columns."""
    for isa in ISA_ORDER:
        if (isa, threads) in pk:
            return isa, pk[(isa, threads)]
    return None, None


def values(by_impl, impls, counter, scale):
    """(cell texts, values) of a row's implementations."""
    texts, vals = [], []
    for i in impls:
        t, v = cell(by_impl, i, counter, scale)
        texts.append(t)
        vals.append(v)
    return texts, vals


def row_label(by_impl):
    return next((e.label for e in by_impl.values() if e.label), "")


def peak_table(entries, has_cv, context):
    pk = peaks(entries)
    mhz = context.get("mhz_per_cpu")
    mhz = mhz if isinstance(mhz, (int, float)) and mhz > 0 else None
    head = ["ISA", "thr", "GFLOP/s",
            f"FLOP/cycle/thread at {mhz} MHz" if mhz else "FLOP/cycle/thread",
            "× 1 thread", "loop"]
    if has_cv:
        head.append("cv")
    lines = ["| " + " | ".join(head) + " |",
             "|---|---:|---:|---:|---:|---|" + ("---:|" if has_cv else "")]
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "peak":
            continue
        e = by_impl.get("fma")
        if e is None:
            continue
        t, v = cell(by_impl, "fma", "flops", 1e9)
        per_cycle = v * 1e3 / mhz / threads if v is not None and mhz else None
        cells = [shape, str(threads), t, fmt(per_cycle), fmt_x(ratio(v, pk.get((shape, 1)))),
                 e.label]
        if has_cv:
            cells.append("—" if e.cv is None else f"{100 * e.cv:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def sgemm_table(entries, has_cv, pk):
    """The three-way table of the target shapes (squares, attention) and any
    other sgemm shape that has no table of its own; "% of peak" columns when
    the JSON has peak benchmarks."""
    impls = SGEMM_IMPLS
    show_peak = bool(pk)
    head = ["shape", "m×n×k", "op", "thr"] + [f"{PRETTY[i]} GFLOP/s" for i in impls]
    if show_peak:
        head += [f"{PRETTY[i]} % of peak" for i in impls]
    head += ["attnkern/oneDNN", "attnkern/OpenBLAS"]
    if has_cv:
        head.append("max cv")
    lines = header(head, 4)
    rows = []
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "sgemm" or sgemm_group(shape) in ("transposed", "skinny"):
            continue
        texts, vals = values(by_impl, impls, "flops", 1e9)
        _, peak = best_peak(pk, threads)
        pcts = [ratio(v, peak) for v in vals]
        ratios = [ratio(vals[0], vals[1]), ratio(vals[0], vals[2])]
        cells = [shape, *sgemm_shape_cols(shape, row_label(by_impl)), str(threads)] + texts
        if show_peak:
            cells += [fmt_pct(p) for p in pcts]
        cells += [fmt(r, 2) for r in ratios]
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
        rows.append({"group": sgemm_group(shape), "thr": threads, "vals": vals, "pcts": pcts,
                     "ratios": ratios})

    def summary(title, pick):
        sel = [r for r in rows if pick(r) and all(v is not None for v in r["vals"])]
        if not sel:
            return
        cells = [f"**{title}** ({len(sel)})", "", "", ""]
        cells += [fmt(geomean([r["vals"][j] for r in sel])) for j in range(len(impls))]
        if show_peak:
            cells += [fmt_pct(geomean([r["pcts"][j] for r in sel])) for j in range(len(impls))]
        cells += [fmt(geomean([r["ratios"][j] for r in sel]), 2) for j in range(2)]
        if has_cv:
            cells.append("")
        lines.append("| " + " | ".join(cells) + " |")

    thread_counts = sorted({r["thr"] for r in rows})
    for g in ("squares", "attention", "other"):
        for t in thread_counts:
            summary(f"geomean {g}, {t} thr", lambda r, g=g, t=t: r["group"] == g and r["thr"] == t)
    for t in thread_counts:
        summary(f"geomean {t} thr", lambda r, t=t: r["thr"] == t)
    summary("geomean all", lambda r: True)
    return lines


def target_summary(entries):
    """Bullets: geomean and minimum of attnkern/peer over the target shape set
    (squares NN and NT 64..2048, qk_ and pv_), per thread count."""
    per = {}  # threads -> peer -> [(ratio, shape)]
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "sgemm" or sgemm_group(shape) not in ("squares", "attention"):
            continue
        _, va = cell(by_impl, "attnkern", "flops", 1e9)
        for peer in ("onednn", "openblas"):
            _, vp = cell(by_impl, peer, "flops", 1e9)
            r = ratio(va, vp)
            if r is not None:
                per.setdefault(threads, {}).setdefault(peer, []).append((r, shape))
    lines = []
    for t in sorted(per):
        parts = []
        for peer in ("onednn", "openblas"):
            rs = per[t].get(peer)
            if not rs:
                continue
            lo, where = min(rs)
            gm = geomean([r for r, _ in rs])
            n = f"{len(rs)} shape" + ("s" if len(rs) != 1 else "")
            parts.append(f"attnkern/{PRETTY[peer]} geomean **{gm:.2f}** over {n}, "
                         f"min {lo:.2f} (`{where}`)")
        lines.append(f"- target shape set (nn_/nt_ 64–2048, qk_/pv_), {t} thr: "
                     + "; ".join(parts))
    return lines


def transposes_table(entries, has_cv, pk):
    impls = SGEMM_IMPLS
    show_peak = bool(pk)
    head = ["op", "shape", "thr"] + [f"{PRETTY[i]} GFLOP/s" for i in impls]
    if show_peak:
        head.append("attnkern % of peak")
    head += ["attnkern/oneDNN", "attnkern/OpenBLAS"]
    if has_cv:
        head.append("max cv")
    lines = header(head, 2)
    threads = sorted({t for (k, s, t) in entries if k == "sgemm" and s in TRANSPOSE_SHAPES})
    spreads = []
    for t in threads:
        got = {i: [] for i in impls}  # impl -> [(GFLOP/s, op)]
        for shape in TRANSPOSE_SHAPES:
            by_impl = entries.get(("sgemm", shape, t))
            if not by_impl:
                continue
            op = sgemm_shape_cols(shape, row_label(by_impl))[1]
            if op == "?":
                op = shape[:2].upper()
            texts, vals = values(by_impl, impls, "flops", 1e9)
            for i, v in zip(impls, vals):
                if v is not None:
                    got[i].append((v, op))
            cells = [op, shape, str(t)] + texts
            if show_peak:
                cells.append(fmt_pct(ratio(vals[0], best_peak(pk, t)[1])))
            cells += [fmt(ratio(vals[0], vals[1]), 2), fmt(ratio(vals[0], vals[2]), 2)]
            if has_cv:
                cells.append(noise(by_impl))
            lines.append("| " + " | ".join(cells) + " |")
        # Spread: fastest / slowest of the combinations each implementation has.
        cells = [f"**spread max/min, {t} thr**", "", ""]
        for i in impls:
            cells.append(fmt_x(max(got[i])[0] / min(got[i])[0]) if len(got[i]) > 1 else "—")
        cells += [""] * (len(head) - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
        a = got["attnkern"]
        if len(a) > 1:
            hi, lo = max(a), min(a)
            spreads.append(f"{t} thr {hi[0] / lo[0]:.2f}× (fastest {hi[1]} {hi[0]:.1f}, "
                           f"slowest {lo[1]} {lo[0]:.1f} GFLOP/s, over {len(a)} combinations)")
    if spreads:
        lines += ["", "- attnkern spread over the transpose combinations at 1024³: " +
                  "; ".join(spreads)]
    return lines


def skinny_table(entries, has_cv):
    impls = SGEMM_IMPLS
    bw = membw_by_threads(entries)
    head = ["shape", "m", "B stored", "thr"] + [f"{PRETTY[i]} GB/s" for i in impls]
    head += [f"{PRETTY[i]} % of read BW" for i in impls]
    head += [f"{PRETTY[i]} % of adjacent read" for i in impls]
    head += ["attnkern/oneDNN", "attnkern/OpenBLAS", "attnkern GFLOP/s"]
    if has_cv:
        head.append("max cv")
    lines = header(head, 3)
    rows = []
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "sgemm" or sgemm_group(shape) != "skinny":
            continue
        m = SKINNY_RE.match(shape)
        mnk = sgemm_mnk(row_label(by_impl))
        mm = m.group(2) if m else (str(mnk[0]) if mnk else "?")
        nt = m.group(1) == "nt" if m else sgemm_shape_cols(shape, row_label(by_impl))[1] == "NT"
        k_, n_ = (str(mnk[2]), str(mnk[1])) if mnk else ("k", "n")
        layout = f"{n_}×{k_} (NT)" if nt else f"{k_}×{n_} (NN)"
        texts, vals = values(by_impl, impls, "bytes", 1e9)
        ref = bw.get(threads)
        ratios = [ratio(vals[0], vals[1]), ratio(vals[0], vals[2])]
        fa, _ = cell(by_impl, "attnkern", "flops", 1e9)
        cells = [shape, mm, layout, str(threads)] + texts
        cells += [fmt_pct(ratio(v, ref)) for v in vals]
        cells += [fmt_pct(ratio(v, adjacent_read(by_impl, i))) for v, i in zip(vals, impls)]
        cells += [fmt(r, 2) for r in ratios] + [fa]
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
        rows.append({"thr": threads, "vals": vals, "ratios": ratios})
    for t in sorted({r["thr"] for r in rows}):
        sel = [r for r in rows if r["thr"] == t and None not in r["vals"]]
        if not sel:
            continue
        cells = [f"**geomean {t} thr** ({len(sel)})", "", "", ""]
        cells += [fmt(geomean([r["vals"][j] for r in sel])) for j in range(3)]
        cells += [fmt_pct(ratio(geomean([r["vals"][j] for r in sel]), bw.get(t)))
                  for j in range(3)]
        cells += ["", "", ""]
        cells += [fmt(geomean([r["ratios"][j] for r in sel]), 2) for j in range(2)] + [""]
        if has_cv:
            cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def isa_table(entries, has_cv, pk, context):
    """attnkern forced to each instruction set (sgemm_isa/<isa>), next to the
    automatic choice and the plain loop, each against the peak of its own
    instruction set (the plain loop: the baseline, sse2 on x86-64)."""
    keys = [(shape, threads) for (kind, shape, threads) in entries if kind == "sgemm_isa"]
    auto_isa = context.get("attnkern_isa", "auto")
    head = ["implementation", "ISA", "shape", "thr", "GFLOP/s", "that ISA's peak GFLOP/s",
            "% of that ISA's peak", "× plain loop"]
    if has_cv:
        head.append("cv")
    lines = header(head, 3)

    def order(impl):
        return ISA_ORDER.index(impl) if impl in ISA_ORDER else len(ISA_ORDER)

    for shape, t in keys:
        forced = entries[("sgemm_isa", shape, t)]
        plain = forced.get(PLAIN_LOOP)
        plain_v = plain.value("flops") / 1e9 if plain and plain.value("flops") else None
        rows = []
        auto = entries.get(("sgemm", shape, t), {}).get("attnkern")
        if auto is not None:
            rows.append(("attnkern (auto)", auto_isa, auto_isa, auto))
        for impl in sorted(forced, key=order):
            if impl == PLAIN_LOOP:
                base = "sse2" if any(i == "sse2" for i, _ in pk) else None
                rows.append(("plain i-p-j loop", "baseline", base, forced[impl]))
            else:
                rows.append((f"attnkern, ak_set_isa({impl})", impl, impl, forced[impl]))
        for name, isa, peak_isa, e in rows:
            v = None if e.error else e.value("flops")
            v = None if v is None else v / 1e9
            peak = pk.get((peak_isa, t)) if peak_isa else None
            cells = [name, isa, shape, str(t), "ERR" if e.error else fmt(v), fmt(peak),
                     fmt_pct(ratio(v, peak)),
                     fmt_x(ratio(v, plain_v)) if plain_v is not None else "—"]
            if has_cv:
                cells.append("—" if e.cv is None else f"{100 * e.cv:.1f}%")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def batched_table(entries, has_cv, pk):
    seen = {i for (k, _, _), by in entries.items() if k == "sgemm_batched" for i in by}
    impls = [i for i in SGEMM_IMPLS if i in seen] + sorted(seen - set(SGEMM_IMPLS))
    peers = [i for i in impls if i != "attnkern"]
    head = ["batch", "m×n×k", "thr"]
    head += [f"{PRETTY.get(i, i)}{' loop' if i != 'attnkern' else ''} GFLOP/s" for i in impls]
    head += [f"attnkern/{PRETTY.get(p, p)}" for p in peers]
    if pk:
        head.append("attnkern % of peak")
    if has_cv:
        head.append("max cv")
    lines = header(head, 2)
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "sgemm_batched":
            continue
        m = BATCH_RE.match(shape)
        batch, mnk = shape, "?"
        if m:
            batch, mnk = m.group(1), f"{m.group(2)}×{m.group(3)}×{m.group(4)}"
        texts, vals = values(by_impl, impls, "flops", 1e9)
        va = vals[impls.index("attnkern")] if "attnkern" in impls else None
        cells = [batch, mnk, str(threads)] + texts
        cells += [fmt(ratio(va, vals[impls.index(p)]), 2) for p in peers]
        if pk:
            cells.append(fmt_pct(ratio(va, best_peak(pk, threads)[1])))
        if has_cv:
            cells.append(noise(by_impl))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def scaling_table(entries):
    """GFLOP/s at t threads / at 1 thread per implementation, for every thread
    count t > 1 in the run, sgemm shapes with m·n·k >= 512³ (the skinny ones
    aside: they are bound by memory)."""
    impls = SGEMM_IMPLS
    counts = sorted({t for (k, _, t) in entries if k == "sgemm" and t > 1})
    if 1 not in {t for (k, _, t) in entries if k == "sgemm"} or not counts:
        return []
    head = ["shape", "m×n×k", "op"] + [f"{PRETTY[i]} {t} thr / 1 thr"
                                       for t in counts for i in impls]
    lines = header(head, 3)
    rows = []
    done = set()
    for (kind, shape, threads), by_impl in entries.items():
        if kind != "sgemm" or shape in done or sgemm_group(shape) == "skinny":
            continue
        done.add(shape)
        one = entries.get(("sgemm", shape, 1))
        many = [entries.get(("sgemm", shape, t)) for t in counts]
        if not one or not all(many):
            continue
        label = row_label(one)
        mnk = sgemm_mnk(label)
        if mnk is None or mnk[0] * mnk[1] * mnk[2] < 512 ** 3:
            continue
        _, v1 = values(one, impls, "flops", 1e9)
        rs = []
        for by_t in many:
            _, vt = values(by_t, impls, "flops", 1e9)
            rs += [ratio(b, a) for a, b in zip(v1, vt)]
        lines.append("| " + " | ".join([shape, *sgemm_shape_cols(shape, label)] +
                                       [fmt_x(r) for r in rs]) + " |")
        rows.append(rs)
    if not rows:
        return []
    # Each column over the rows that have it (a missing peer value drops
    # only its own column's entry); the row count in brackets where fewer.
    cells = []
    for j in range(len(counts) * len(impls)):
        col = [r[j] for r in rows if r[j] is not None]
        text = fmt_x(geomean(col)) if col else "—"
        cells.append(text if len(col) == len(rows) else f"{text} ({len(col)})")
    lines.append("| " + " | ".join([f"**geomean** ({len(rows)})", "", ""] + cells) + " |")
    return lines


# OpenBLAS cores without AVX kernels: what a DYNAMIC_ARCH build falls back to
# on a CPU model it does not know (0.3.21 on a 2023 Xeon: Prescott).
PRE_AVX_OPENBLAS_CORES = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom",
                          "katmai", "coppermine", "northwood", "banias", "opteron",
                          "opteron_sse3", "barcelona", "bobcat"}


def openblas_core_warning(context):
    """A note when OpenBLAS picked kernels older than the ISA attnkern runs:
    its figures would then say little about it (pin a core instead)."""
    core = str(context.get("openblas_corename", "")).strip().lower()
    isa = str(context.get("attnkern_isa", "")).strip().lower()
    if core not in PRE_AVX_OPENBLAS_CORES or isa not in ("avx2", "avx512"):
        return None
    pin = "SkylakeX" if isa == "avx512" else "Haswell"
    return (f"OpenBLAS runs its `{context.get('openblas_corename')}` kernels (no AVX) on a CPU "
            f"where attnkern runs {isa}: this OpenBLAS likely does not know the CPU model. "
            f"Pin its {isa.upper()} kernels with `AK_BENCH_OPENBLAS_CORETYPE={pin}` to compare "
            "against them.")


# ------------------------------------------------------------------ summary

# The families of the summary: (title, kind, row filter on the shape,
# counter, peers). The ratio attnkern/peer is the same on either counter of
# a row; the counter only has to exist for both.
def _is_cold(shape):
    return shape.endswith(COLD_SUFFIX)


SUMMARY_FAMILIES = [
    ("SGEMM", "sgemm", lambda s: sgemm_group(s) != "skinny", "flops", ["onednn", "openblas"]),
    ("SGEMM skinny (decode projections)", "sgemm", lambda s: sgemm_group(s) == "skinny", "bytes",
     ["onednn", "openblas"]),
    ("SGEMM batched", "sgemm_batched", lambda s: True, "flops", ["onednn"]),
    ("softmax, in cache", "softmax", lambda s: not _is_cold(s), "bytes", ["onednn", "scalar"]),
    ("softmax, out of cache", "softmax", _is_cold, "bytes", ["onednn", "scalar"]),
    ("prefill, no mask", "attention", lambda s: s.endswith("_nomask"), "flops", [UNFUSED]),
    ("prefill, causal", "attention", lambda s: s.endswith("_causal"), "flops", [UNFUSED]),
    ("encoder", "encoder", lambda s: True, "flops", [UNFUSED]),
    ("decode, q_len 1", "decode", lambda s: not re.search(r"_q\d+_", s), "bytes", [UNFUSED]),
    ("decode, a few queries", "decode", lambda s: bool(re.search(r"_q\d+_", s)), "bytes",
     [UNFUSED]),
]
SUMMARY_PEERS = ["onednn", "openblas", UNFUSED, "scalar"]
SUMMARY_PEER_TITLES = {"onednn": "vs oneDNN", "openblas": "vs OpenBLAS",
                       UNFUSED: "vs unfused oneDNN", "scalar": "vs scalar loop"}


def summary_rows(entries):
    """[(family, threads, rows, {peer: (geomean, (worst ratio, shape), n)})] in
    family order, thread counts ascending; families without rows left out."""
    result = []
    for title, kind, pick, counter, peers in SUMMARY_FAMILIES:
        per_t = {}
        for (k, shape, threads), by_impl in entries.items():
            if k != kind or not pick(shape):
                continue
            _, va = cell(by_impl, "attnkern", counter, 1.0)
            if va is None:
                continue
            slot = per_t.setdefault(threads, {"rows": 0, "ratios": {}})
            slot["rows"] += 1
            for peer in peers:
                _, vp = cell(by_impl, peer, counter, 1.0)
                r = ratio(va, vp)
                if r is not None:
                    slot["ratios"].setdefault(peer, []).append((r, shape))
        for t in sorted(per_t):
            slot = per_t[t]
            by_peer = {p: (geomean([r for r, _ in rs]), min(rs, key=lambda x: x[0]), len(rs))
                       for p, rs in slot["ratios"].items()}
            result.append((title, t, slot["rows"], by_peer))
    return result


def run_command(context, command=None):
    """The command of the run: given, else recorded by run.sh, else ak_bench's."""
    return command or context.get("run_command") or context.get("ak_bench_command") or ""


def machine_line(context):
    cpu = context.get("cpu_model", "unknown CPU")
    cpus = context.get("num_cpus")
    parts = [f"{cpu}" + (f", {cpus} logical CPUs" if cpus else "")]
    if context.get("attnkern_isa"):
        parts.append(f"attnkern ISA {context['attnkern_isa']}")
    if context.get("onednn_isa"):
        parts.append(f"oneDNN ISA {context['onednn_isa']}")
    if context.get("openblas_corename"):
        parts.append(f"OpenBLAS core {context['openblas_corename']}")
    return "; ".join(parts)


def render_summary(context, entries, reps, command=None):
    rows = summary_rows(entries)
    rep = max(reps) if reps else 1
    out = ["### Summary", ""]
    out.append(f"- machine: {machine_line(context)}")
    cmd = run_command(context, command)
    if cmd:
        out.append(f"- command: `{cmd}`")
    if context.get("date"):
        out.append(f"- date: {context['date']}")
    how = f"medians of {rep} repetitions" if rep > 1 else "single runs"
    out.append(f"- attnkern/peer per row ({how}), geometric mean over the family's rows, "
               "and the worst row; > 1: attnkern is faster")
    out.append("")
    kv = compare_kv.summary(entries)  # half-precision and paged caches against fp32
    kv += compare_mods.summary(entries)  # modifiers, packed batches, rope against targets
    if kv:
        out += kv + [""]
    if not rows:
        if not kv:
            out += ["(no benchmark with a peer in this file)", ""]
        return out
    peers = [p for p in SUMMARY_PEERS if any(p in r[3] for r in rows)]
    head = ["family", "thr", "rows"] + [SUMMARY_PEER_TITLES[p] for p in peers]
    out += header(head, 1)
    for title, t, n, by_peer in rows:
        cells = [title, str(t), str(n)]
        for p in peers:
            if p not in by_peer:
                cells.append("—")
                continue
            gm, (lo, where), count = by_peer[p]
            of = f", {count} of {n}" if count != n else ""
            cells.append(f"**{gm:.2f}** (worst {lo:.2f} `{where}`{of})")
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return out


def active_peaks(pk, context):
    """The peaks of the instruction set attnkern ran (AK_ISA=avx2 on an AVX-512
    machine: the AVX2 peak is the yardstick) and of the narrower ones."""
    isa = str(context.get("attnkern_isa", "")).strip().lower()
    if isa not in ISA_ORDER:
        return pk
    rank = ISA_ORDER.index(isa)
    return {k: v for k, v in pk.items() if k[0] in ISA_ORDER and ISA_ORDER.index(k[0]) >= rank}


def render(context, entries, reps, command=None):
    out = render_summary(context, entries, reps, command)
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
    warning = openblas_core_warning(context)
    if warning:
        out.append(f"- **warning**: {warning}")
    out.append("")
    kinds = [k for k in ALL_KINDS if any(key[0] == k for key in entries)]
    sgemm_shapes = {s for (k, s, _) in entries if k == "sgemm"}
    pk = active_peaks(peaks(entries), context)

    def section(title, lines):
        if len(lines) > 2:  # more than the header
            out.extend([title, ""] + lines + [""])

    if "peak" in kinds:
        section("### FMA peak (register-only loop per instruction set; GFLOP/s)",
                peak_table(entries, has_cv, context))
    if any(sgemm_group(s) not in ("transposed", "skinny") for s in sgemm_shapes):
        isa, _ = best_peak(pk, 1)
        note = (f"; % of peak = of the measured `peak/fma/{isa}` at the same thread count"
                if isa else "")
        section(f"### SGEMM (GFLOP/s = 2mnk / real time{note})", sgemm_table(entries, has_cv, pk))
        summ = target_summary(entries)
        if summ:
            out.extend(summ + [""])
    if any(sgemm_group(s) == "transposed" for s in sgemm_shapes):
        section("### SGEMM transposes at 1024³ (op = op(A) op(B); GFLOP/s)",
                transposes_table(entries, has_cv, pk))
    if any(sgemm_group(s) == "skinny" for s in sgemm_shapes):
        section("### SGEMM skinny (decode projections, m token rows × a 4096×4096 weight; "
                "GB/s = 4·(mk + kn + mn) bytes / real time; % of read BW = of the membw "
                f"streaming-read GB/s at the same thread count{ADJACENT_NOTE})",
                skinny_table(entries, has_cv))
        summ = skinny_summary(entries)
        if summ:
            out.extend(summ + [""])
    if "sgemm_isa" in kinds:
        section("### SGEMM per instruction set (1 thread; attnkern forced with ak_set_isa, "
                "and a plain i-p-j loop)", isa_table(entries, has_cv, pk, context))
    if "sgemm_batched" in kinds:
        section("### SGEMM batched (ak_sgemm_strided_batched vs a loop of single calls; "
                "GFLOP/s = batch·2mnk / real time)", batched_table(entries, has_cv, pk))
    if "sgemm" in kinds:
        section("### SGEMM thread scaling (GFLOP/s at t threads / at 1 thread, m·n·k ≥ 512³)",
                scaling_table(entries))
    if "softmax" in kinds:
        cold = any(k == "softmax" and s.endswith(COLD_SUFFIX) for (k, s, _) in entries)
        note = ("; `_cold`: 4096×4096 rotated over 4 buffer pairs, out of cache, % of copy BW "
                "= of the membw copy GB/s (read + written) at the same thread count"
                if cold else "")
        section(f"### Softmax (GB/s = 2·rows·cols·4 bytes / real time{note})",
                softmax_table(entries, has_cv))
        summ = softmax_summary(entries)
        if summ:
            out.extend(summ + [""])
        section("### log-softmax and softmax_axis vs softmax (attnkern: ak_log_softmax over "
                "the rows, ak_softmax_axis over axis 0, i.e. down the columns, of the same "
                "rows×cols matrix; GB/s = 2·rows·cols·4 bytes / real time; ratio = their GB/s "
                "/ ak_softmax's on the same shape and threads)",
                softmax_variants_table(entries, has_cv))
    if "attention" in kinds:
        section("### Attention prefill (batch 1, 8 heads, q_len = kv_len = L; "
                "GFLOP/s = useful FLOPs 8·2·L²·2d, halved for causal / real time)",
                attention_table(entries, has_cv))
    if "window" in kinds:
        section("### Sliding window (attnkern alone: causal, each query sees its w last keys; "
                "batch 1, 8 heads; GFLOP/s = useful FLOPs 8·2·2d per visible (query, key) "
                "pair / real time)",
                window_table(entries, has_cv))
    if "encoder" in kinds:
        section("### Encoder attention (short sequences over a batch and many heads, "
                "q_len = kv_len = L, no mask; GFLOP/s = batch·heads·2·L²·2d / real time)",
                encoder_table(entries, has_cv))
    if "decode" in kinds:
        section("### Attention decode (q_len 1, or a few queries per step with a causal "
                "bottom-right mask; 32 query heads; GB/s = K and V "
                "read once, 2·kv_heads·kv_len·d·4 bytes / real time; "
                "% of read BW = of the membw streaming-read GB/s at the same thread "
                f"count{ADJACENT_NOTE})", decode_table(entries, has_cv))
        summ = decode_summary(entries)
        if summ:
            out.extend(summ + [""])
    if "kvdecode" in kinds:
        section("### Decode over f16/bf16 and paged K/V caches (q_len 1, d 128, 32 query "
                "heads; GB/s = K and V at their stored size, 2·kv_heads·kv_len·d·(2 or 4) bytes "
                "/ real time; tokens/s vs fp32 = attnkern's fp32 time / this time, the median "
                "of per-call ratios, each call timed next to an fp32 call (paged rows: their "
                "ratio to the contiguous cache times that cache's to fp32); paged: shuffled "
                "page ids, against the contiguous cache of the same type, paired likewise"
                f"{ADJACENT_NOTE})", compare_kv.decode_table(entries))
    if "kvprefill" in kinds:
        section("### Prefill over f16/bf16 and paged K/V (batch 1, 8 heads, q_len = kv_len = L; "
                "GFLOP/s as in the prefill table; vs fp32 = of attnkern's fp32 GFLOP/s, paired "
                "per call as in the decode table)",
                compare_kv.prefill_table(entries))
    if "kvdecode" in kinds or "kvprefill" in kinds:
        summ = compare_kv.summary(entries)
        if summ:
            out.extend(summ + [""])
    if "mods" in kinds:
        section("### Score modifiers (prefill, batch 1, causal, q_len = kv_len = L; softcap "
                "30, BLOOM's ALiBi slopes, a sink per head; time vs plain = this time / the "
                "plain call's; peak RSS: the process's, after the run)",
                compare_mods.mods_table(entries))
    if "varlen" in kinds:
        section("### Packed variable-length batch (8 sequences of 64 to 2048 tokens, 8 heads, "
                "d 128; useful GFLOP/s = sum of 4·L²·d·heads, half with the causal mask; "
                "separate: one call per sequence; one sequence: the 2048-token one alone)",
                compare_mods.varlen_table(entries))
    if "rope" in kinds or "embedding" in kinds:
        section("### Rotary embeddings and embedding lookup (GB/s = bytes read + written / "
                "real time; % of copy: of membw/copy at the same thread count)",
                compare_mods.rope_table(entries))
    if "mods" in kinds or "varlen" in kinds or "rope" in kinds:
        summ = compare_mods.summary(entries)
        if summ:
            out.extend(summ + [""])
    if "membw" in kinds:
        section("### Memory bandwidth reference (streaming read; copy: bytes read + written; "
                "GB/s)",
                membw_table(entries, has_cv))
    if "convert" in kinds:
        section("### Conversions and cache stores (ak_convert, ak_kv_cache_store; GB/s = bytes "
                "read + written / real time; memcpy: a copy of the same byte count)",
                convert_table(entries, has_cv))
    # Agreement check and errors.
    worst = {}
    errors = []
    for (kind, shape, threads), by_impl in entries.items():
        for impl, e in by_impl.items():
            if e.error:
                errors.append(f"{kind}/{impl}/{shape}/threads:{threads}: {e.error}")
            elif e.relerr is not None:
                # log-softmax and softmax_axis are checked against a double
                # reference, not against a peer: reported on a line of their own.
                key = "softmax_variants" if impl in SOFTMAX_VARIANTS else kind
                cur = worst.get(key)
                if cur is None or e.relerr > cur[0]:
                    worst[key] = (e.relerr, f"{impl} {shape} threads:{threads}")
    for kind in kinds:
        if kind in worst:
            v, where = worst[kind]
            to = "oneDNN" if kind == "sgemm_isa" else "the closest peer"
            out.append(f"- {kind} agreement: largest max-rel-diff to {to} {v:.2g} ({where})")
        if kind == "softmax" and "softmax_variants" in worst:
            v, where = worst["softmax_variants"]
            out.append(f"- log-softmax/softmax_axis agreement: largest max-rel-diff to the "
                       f"double reference {v:.2g} ({where})")
    for kind in ("attention", "encoder", "decode"):
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
    if "window" in kinds:
        rd = [(e.refdiff, f"{shape} threads:{threads}")
              for (k, shape, threads), by in entries.items() if k == "window"
              for e in by.values() if e.refdiff is not None and not e.error]
        if rd:
            v, where = max(rd)
            out.append(f"- window agreement: largest max-abs-diff to rows computed in double "
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
        out.append("(no " + ", ".join(k + "/" for k in ALL_KINDS) + " benchmarks in this file)")
    return "\n".join(out) + "\n"


MARKER = "<!-- results:{}:{} -->"
SECTION_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def generated_line(context, command=None):
    cmd = run_command(context, command) or "unknown"
    date = context.get("date", "an unknown date")
    return (f"Generated by `bench/compare.py` from a run on {date}: {machine_line(context)}; "
            f"command `{cmd}`.")


def results_path(readme, section):
    """Where --update-readme puts a section's full tables: results/<section>.md
    beside the README."""
    return os.path.join(os.path.dirname(os.path.abspath(readme)), "results", f"{section}.md")


def results_page(context, entries, reps, section, command=None):
    """The full report of a run, as the page results/<section>.md."""
    body = render(context, entries, reps, command)
    return (f"# ak_bench results: {section}\n\n{generated_line(context, command)} "
            "How to read the tables: [../README.md](../README.md).\n\n" + body)


def readme_block(context, entries, reps, section, command=None):
    """The text that goes between a section's markers: the summary (which
    names the machine, ISAs, date and command) with its heading one level down (it sits under the README's own section heading), and a link
    to the full tables (results_path)."""
    body = []
    for line in render_summary(context, entries, reps, command):
        body.append("#" + line if line.startswith("#") else line)
    link = f"The full tables of this run: [results/{section}.md](results/{section}.md)."
    return "\n".join(body + [link]).rstrip("\n") + "\n"


def summary_block(context, entries, reps, command=None):
    """The summary table alone, without its heading, for the root README."""
    lines = render_summary(context, entries, reps, command)
    return "\n".join(lines[2:]).rstrip("\n") + "\n"


def update_readme(path, section, block):
    """Replaces the lines between the section's begin and end markers of the
    file with block; raises ValueError where the markers are missing."""
    begin, end = MARKER.format(section, "begin"), MARKER.format(section, "end")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    stripped = [line.strip() for line in lines]
    if stripped.count(begin) != 1 or stripped.count(end) != 1:
        raise ValueError(f"{path}: needs exactly one line {begin} and one line {end}")
    i, j = stripped.index(begin), stripped.index(end)
    if j < i:
        raise ValueError(f"{path}: {end} comes before {begin}")
    new = lines[:i + 1] + ["\n", block, "\n"] + lines[j:]
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(new))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="Google Benchmark JSON written by ak_bench")
    ap.add_argument("--out", metavar="FILE", help="also write the Markdown to FILE")
    ap.add_argument("--command", metavar="TEXT",
                    help="the command of the run, for the summary (default: the one "
                         "recorded in the JSON)")
    ap.add_argument("--update-readme", metavar="FILE",
                    help="replace FILE's results section (--section) with this report")
    ap.add_argument("--section", metavar="NAME",
                    help="the section of --update-readme: between <!-- results:NAME:begin --> "
                         "and <!-- results:NAME:end --> (e.g. avx512, avx2)")
    ap.add_argument("--update-summary", metavar="FILE",
                    help="replace FILE's summary section (between <!-- results:summary:begin --> "
                         "and <!-- results:summary:end -->, the root README's) with this run's "
                         "summary table")
    args = ap.parse_args(argv)
    if bool(args.update_readme) != bool(args.section):
        ap.error("--update-readme and --section go together")
    if args.section and not SECTION_RE.match(args.section):
        ap.error(f"--section: letters, digits, '_', '.' or '-', not {args.section!r}")
    context, entries, reps = load(args.json)
    text = render(context, entries, reps, args.command)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    if args.update_readme:
        try:
            update_readme(args.update_readme, args.section,
                          readme_block(context, entries, reps, args.section, args.command))
            page = results_path(args.update_readme, args.section)
            os.makedirs(os.path.dirname(page), exist_ok=True)
            with open(page, "w", encoding="utf-8") as f:
                f.write(results_page(context, entries, reps, args.section, args.command))
        except (OSError, ValueError) as e:
            print(f"compare.py: {e}", file=sys.stderr)
            return 2
        print(f"compare.py: wrote section {args.section} of {args.update_readme}",
              file=sys.stderr)
    if args.update_summary:
        try:
            update_readme(args.update_summary, "summary",
                          summary_block(context, entries, reps, args.command))
        except (OSError, ValueError) as e:
            print(f"compare.py: {e}", file=sys.stderr)
            return 2
        print(f"compare.py: wrote the summary of {args.update_summary}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

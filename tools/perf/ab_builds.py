#!/usr/bin/env python3
"""A/B of two libattnkern builds in one process: the same calls on the same
buffers, samples alternating between the builds, medians reported as B / A.

    python3 tools/perf/ab_builds.py A/libattnkern.so.1 B/libattnkern.so.1 --threads 1,2
    python3 tools/perf/ab_builds.py A.so B.so --cases skinny,decode --reps 9
    python3 tools/perf/ab_builds.py A.so B.so --markdown ab.md   # also a Markdown table

Each library file is loaded as its own copy (ctypes loads a path, and two
files are two objects even with the same soname), so a change can be timed
against the build before it without a second process and its drift. Give A
and B distinct files (copy the build before the change aside first). Run it
with A and B the same file to see the harness's own spread (an A/A run).

Cases (--cases, a comma list; default: every family):
  attention  ak_attention: encoder shapes (batch x heads x L, d 64: 8 x 12 x
             128, 8 x 12 x 197, 4 x 16 x 384) and prefill (8 heads, L 1024,
             d 64; d 128 causal). GFLOP/s count 2*L*L*2d per head, halved
             for causal.
  decode     ak_attention with q_len 1, d 128, 32 query heads over 32 and
             over 8 kv heads, kv_len 8192 and 32768, contiguous K and V.
             GB/s count K and V read once (2 * kv_heads * kv_len * d * 4).
  skinny     ak_sgemm NN, m = 4, 2, 8 rows x a 4096 x 4096 B, and NT (B
             stored n x k, the usual weight layout), m = 8, 16, 32 (decode
             projections). GB/s count B read once.
  sgemm      ak_sgemm on packed products: 1024^3 NN and NT, 512^3 NN, and
             the attention shapes Q.K^T (m = n = 1024, k = 64, NT) and P.V
             (m = 1024, n = 64, k = 1024, NN). GFLOP/s count 2mnk.
  softmax    ak_softmax rows: 1024 x 1024 and 16 x 32768 of unit normals, and
             1024 x 1024 masked as a causal score matrix (row i: -inf past
             column i). GB/s count x read and y written once.
  axis       ak_softmax_axis down the columns (axis 0) of 128 x 128, 256 x
             256, 128 x 1024, 1024 x 1024 and 16 x 32768. GB/s as softmax.

One line per case and thread count: label, A's and B's rate, B/A of the
median times (> 1: B is faster) and max |A - B| of the outputs (0 where a
change keeps the bits). --markdown FILE also writes them as a Markdown table
with the machine, ISA and command, ready for a closing note.

--isa picks the instruction set of both builds (ak_set_isa; default auto).
A sample is the mean time per call over >= --min-time seconds; --reps
samples of each build, A then B, with a short pause before each
(peer_common.py).
"""

import argparse
import os
import shlex
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from peer_common import (cpu_model, load_attnkern, parse_threads,  # noqa: E402
                         positive_int, time_sample)

PAUSE_S = 0.02


def attention_cases(np, attnkern, rng):
    shapes = [(8, 12, 128, 64, False), (8, 12, 197, 64, False), (4, 16, 384, 64, False),
              (1, 8, 1024, 64, False), (1, 8, 1024, 128, True)]
    for b, h, L, d, causal in shapes:
        q, k, v = (rng.standard_normal((b, h, L, d), dtype=np.float32) for _ in range(3))
        mask = attnkern.Mask.CAUSAL_TOP_LEFT if causal else attnkern.Mask.NONE
        flops = b * h * 2.0 * L * L * 2 * d * (0.5 if causal else 1.0)
        label = f"attention b{b} h{h} L{L} d{d}{' causal' if causal else ''}"

        def call(lib, out, q=q, k=k, v=v, mask=mask):
            return lib.attention(q, k, v, mask=mask, out=out)

        yield label, call, np.empty_like(q), flops, "GFLOP/s"


def decode_cases(np, attnkern, rng):
    heads, d = 32, 128
    for kv_len in (8192, 32768):
        # One 32-head K and V per kv_len; the 8-kv-head case reads a contiguous
        # copy of its first 8 heads (as ak_bench's decode rows do).
        k32, v32 = (rng.standard_normal((1, heads, kv_len, d), dtype=np.float32)
                    for _ in range(2))
        q = rng.standard_normal((1, heads, 1, d), dtype=np.float32)
        for kv_heads in (32, 8):
            k = k32 if kv_heads == heads else np.ascontiguousarray(k32[:, :kv_heads])
            v = v32 if kv_heads == heads else np.ascontiguousarray(v32[:, :kv_heads])

            def call(lib, out, k=k, v=v):
                return lib.attention(q, k, v, out=out)

            label = f"decode h{heads}/kvh{kv_heads} d{d} kv{kv_len}"
            yield label, call, np.empty_like(q), k.nbytes + v.nbytes, "GB/s"
        del k32, v32


def skinny_cases(np, attnkern, rng):
    w = rng.standard_normal((4096, 4096), dtype=np.float32)
    for m, trans_b in ((4, False), (2, False), (8, False), (8, True), (16, True), (32, True)):
        a = rng.standard_normal((m, 4096), dtype=np.float32)

        def call(lib, out, a=a, trans_b=trans_b):
            return lib.sgemm(a, w, out=out, trans_b=trans_b)

        op = "NT" if trans_b else "NN"
        yield f"skinny {op} m {m} x 4096 x 4096", call, np.empty((m, 4096), np.float32), \
            w.nbytes, "GB/s"


def sgemm_cases(np, attnkern, rng):
    # (m, n, k, B stored transposed), label
    shapes = [((1024, 1024, 1024, False), "sgemm NN 1024^3"),
              ((1024, 1024, 1024, True), "sgemm NT 1024^3"),
              ((512, 512, 512, False), "sgemm NN 512^3"),
              ((1024, 1024, 64, True), "sgemm Q.K^T 1024 x 1024 x 64 NT"),
              ((1024, 64, 1024, False), "sgemm P.V 1024 x 64 x 1024 NN")]
    for (m, n, k, trans_b), label in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((n, k) if trans_b else (k, n), dtype=np.float32)

        def call(lib, out, a=a, b=b, trans_b=trans_b):
            return lib.sgemm(a, b, out=out, trans_b=trans_b)

        yield label, call, np.empty((m, n), np.float32), 2.0 * m * n * k, "GFLOP/s"


def softmax_cases(np, attnkern, rng):
    for rows, cols, masked in ((1024, 1024, False), (1024, 1024, True), (16, 32768, False)):
        x = rng.standard_normal((rows, cols), dtype=np.float32)
        if masked:
            x[np.triu_indices(rows, 1, cols)] = -np.inf

        def call(lib, out, x=x):
            return lib.softmax(x, out=out)

        label = f"softmax {rows} x {cols}{' causal-masked' if masked else ''}"
        yield label, call, np.empty_like(x), 2.0 * x.nbytes, "GB/s"


def axis_cases(np, attnkern, rng):
    for rows, cols in ((128, 128), (256, 256), (128, 1024), (1024, 1024), (16, 32768)):
        x = rng.standard_normal((rows, cols), dtype=np.float32)

        def call(lib, out, x=x):
            return lib.softmax_axis(x, axis=0, out=out)

        yield f"softmax_axis 0 of {rows} x {cols}", call, np.empty_like(x), 2.0 * x.nbytes, "GB/s"


CASES = {"attention": attention_cases, "decode": decode_cases, "skinny": skinny_cases,
         "sgemm": sgemm_cases, "softmax": softmax_cases, "axis": axis_cases}


def fmt_diff(diff):
    return f"{diff:.2g}"


def markdown(rows, args, isa, argv):
    """The table of the run, with the machine, ISA and command above it."""
    command = " ".join(shlex.quote(a) for a in ["python3", "tools/perf/ab_builds.py"] + argv)
    lines = [f"A/B of two libattnkern builds, one process: A = `{args.lib_a}`, "
             f"B = `{args.lib_b}`.",
             "",
             f"- machine: {cpu_model()}, {os.cpu_count()} logical CPUs; ISA in use: {isa}",
             f"- command: `{command}`",
             f"- {args.reps} sample{'s' if args.reps > 1 else ''} of >= {args.min_time:g} s "
             "per build, alternating; "
             "B/A = median time of A / median time of B (> 1: B is faster)",
             "",
             "| case | thr | A | B | unit | B/A | max abs(A − B) |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['threads']} | {r['a']:.1f} | {r['b']:.1f} | "
                     f"{r['unit']} | {r['ratio']:.3f} | {fmt_diff(r['diff'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description="A/B of two libattnkern builds, one process.")
    p.add_argument("lib_a")
    p.add_argument("lib_b")
    p.add_argument("--threads", type=parse_threads, default=parse_threads("1"),
                   help="comma list of thread counts (default 1)")
    p.add_argument("--reps", type=positive_int, default=7,
                   help="samples per build; the median is reported (default 7)")
    p.add_argument("--min-time", type=float, default=0.15,
                   help="seconds of calls per sample (default 0.15)")
    p.add_argument("--cases", default=",".join(CASES),
                   help=f"comma list of {', '.join(CASES)} (default all)")
    p.add_argument("--isa", default="auto")
    p.add_argument("--markdown", metavar="FILE",
                   help="also write the results as a Markdown table to FILE")
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if not cases or set(cases) - set(CASES):
        p.error(f"--cases takes {', '.join(CASES)}")
    import numpy as np
    attnkern, lib_a = load_attnkern(args.lib_a, "ab_builds.py")
    _, lib_b = load_attnkern(args.lib_b, "ab_builds.py")
    for lib in (lib_a, lib_b):
        lib.set_isa(args.isa)
    isa = lib_a.get_isa()
    if lib_b.get_isa() != isa:
        isa = f"A {isa}, B {lib_b.get_isa()}"
    rng = np.random.default_rng(3)
    rows = []
    for name in cases:
        for label, call, out, work, unit in CASES[name](np, attnkern, rng):
            out_b = np.empty_like(out)
            for t in args.threads:
                lib_a.set_num_threads(t)
                lib_b.set_num_threads(t)
                fa, fb = (lambda: call(lib_a, out)), (lambda: call(lib_b, out_b))
                fa(), fb()
                diff = float(np.max(np.abs(out.astype(np.float64) - out_b)))
                sa, sb = [], []
                for _ in range(args.reps):
                    time.sleep(PAUSE_S)
                    sa.append(time_sample(fa, args.min_time))
                    time.sleep(PAUSE_S)
                    sb.append(time_sample(fb, args.min_time))
                ta, tb = statistics.median(sa), statistics.median(sb)
                row = {"label": label, "threads": t, "a": work / ta / 1e9,
                       "b": work / tb / 1e9, "unit": unit, "ratio": ta / tb, "diff": diff}
                rows.append(row)
                print(f"{label}, {t} thr: A {row['a']:7.1f} B {row['b']:7.1f} "
                      f"{unit}  B/A {row['ratio']:.3f}  max |A - B| {fmt_diff(diff)}",
                      flush=True)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(markdown(rows, args, isa, argv))
        print(f"ab_builds.py: wrote {args.markdown}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A/B of two libattnkern builds in one process: the same calls on the same
buffers, samples alternating between the builds, medians reported as B / A.

    python3 tools/perf/ab_builds.py A/libattnkern.so.1 B/libattnkern.so.1 --threads 1,2
    python3 tools/perf/ab_builds.py A.so B.so --cases skinny --reps 9

Each library file is loaded as its own copy (ctypes loads a path, and two
files are two objects even with the same soname), so a change can be timed
against the build before it without a second process and its drift. Give A
and B distinct files (copy the build before the change aside first). Run it
with A and B the same file to see the harness's own spread (an A/A run).

Cases (--cases, a comma list):
  attention  ak_attention: encoder shapes (batch x heads x L, d 64: 8 x 12 x
             128, 8 x 12 x 197, 4 x 16 x 384) and prefill (8 heads, L 1024,
             d 64; d 128 causal). GFLOP/s count 2*L*L*2d per head, halved
             for causal.
  skinny     ak_sgemm NN, m = 4, 2, 8 rows x a 4096 x 4096 B, and NT (B
             stored n x k, the usual weight layout), m = 8, 16, 32 (decode
             projections). GB/s count B read once.
  softmax    ak_softmax rows: 1024 x 1024 and 16 x 32768 of unit normals, and
             1024 x 1024 masked as a causal score matrix (row i: -inf past
             column i). GB/s count x read and y written once.
  axis       ak_softmax_axis down the columns (axis 0) of 128 x 128, 256 x
             256, 128 x 1024, 1024 x 1024 and 16 x 32768. GB/s as softmax.

--isa picks the instruction set of both builds (ak_set_isa; default auto).

The outputs of A and B are compared (max |A - B|, printed: 0 where a change
keeps the bits). A sample is the mean time per call over >= --min-time
seconds; --reps samples of each build, A then B, with a short pause before
each (peer_common.py).
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from peer_common import load_attnkern, parse_threads, positive_int, time_sample  # noqa: E402

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


def skinny_cases(np, attnkern, rng):
    w = rng.standard_normal((4096, 4096), dtype=np.float32)
    for m, trans_b in ((4, False), (2, False), (8, False), (8, True), (16, True), (32, True)):
        a = rng.standard_normal((m, 4096), dtype=np.float32)

        def call(lib, out, a=a, trans_b=trans_b):
            return lib.sgemm(a, w, out=out, trans_b=trans_b)

        op = "NT" if trans_b else "NN"
        yield f"skinny {op} m {m} x 4096 x 4096", call, np.empty((m, 4096), np.float32), \
            w.nbytes, "GB/s"


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


CASES = {"attention": attention_cases, "skinny": skinny_cases, "softmax": softmax_cases,
         "axis": axis_cases}


def main(argv=None):
    p = argparse.ArgumentParser(description="A/B of two libattnkern builds, one process.")
    p.add_argument("lib_a")
    p.add_argument("lib_b")
    p.add_argument("--threads", type=parse_threads, default=parse_threads("1"))
    p.add_argument("--reps", type=positive_int, default=7)
    p.add_argument("--min-time", type=float, default=0.15)
    p.add_argument("--cases", default="attention")
    p.add_argument("--isa", default="auto")
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if not cases or set(cases) - set(CASES):
        p.error(f"--cases takes {', '.join(CASES)}")
    import numpy as np
    attnkern, lib_a = load_attnkern(args.lib_a, "ab_builds.py")
    _, lib_b = load_attnkern(args.lib_b, "ab_builds.py")
    for lib in (lib_a, lib_b):
        lib.set_isa(args.isa)
    rng = np.random.default_rng(3)
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
                print(f"{label}, {t} thr: A {work / ta / 1e9:7.1f} B {work / tb / 1e9:7.1f} "
                      f"{unit}  B/A {ta / tb:.3f}  max |A - B| {diff:.2g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where a call's time goes, per thread and per phase, from a build of the
library instrumented with phase timers (rdtsc around the phases of
ak_attention's items and around each thread's share of a call to ak_softmax;
not part of the library).

The instrumented build must export three C functions: ak_trace_reset(void),
ak_trace_read(uint64_t *out) (64 threads x 16 phases of cycles, then as
many counts; phase order as PHASES below) and ak_trace_tsc(void). No patch
that adds them is kept in the tree: it would pin the text of the kernel
sources. Write the timers against the sources of the day, then:

    cmake -S . -B build-trace -DAK_BUILD_TESTS=OFF && cmake --build build-trace
    python3 tools/perf/trace_probe.py --lib build-trace/libattnkern.so.1 --threads 1,4,16

Per case and thread count it prints the call's time (and ONNX Runtime's for
the same operation on the same buffers, where onnxruntime and onnx import),
the threads' wait to enter their share (wake), their share's time (work:
mean, min, max over the threads), their wait for the join (tail), and the
item phases summed over the threads, as microseconds per call.
"""

import argparse
import ctypes
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))  # peer_common, ort_peer
from peer_common import load_attnkern, parse_threads  # noqa: E402

PHASES = ["wake", "work", "tail", "setup", "packQ", "packK", "QK", "softmax", "packV", "PV",
          "finish", "items"]
MAX_THREADS, N_PHASES = 64, 16


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", required=True)
    p.add_argument("--threads", type=parse_threads, default=parse_threads("1,4,16"))
    p.add_argument("--min-time", type=float, default=0.3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-ort", action="store_true")
    p.add_argument("--ort-spinning", default="default", choices=("default", "stop", "off"),
                   help="ORT's pool threads between runs (ort_peer.py's option)")
    args = p.parse_args(argv)
    import numpy as np
    attnkern, ak = load_attnkern(args.lib, "trace_probe.py")
    lib = ak.lib
    lib.ak_trace_tsc.restype = ctypes.c_uint64
    buf = (ctypes.c_uint64 * (2 * MAX_THREADS * N_PHASES))()
    ort = onnx = ort_peer = None
    if not args.no_ort:
        try:
            import onnx
            import onnxruntime as ort
            import ort_peer
        except ImportError as e:
            print(f"(no ONNX Runtime: {e})")
            ort = None
    t0, c0 = time.perf_counter(), lib.ak_trace_tsc()
    time.sleep(0.2)
    hz = (lib.ak_trace_tsc() - c0) / (time.perf_counter() - t0)
    print(f"TSC {hz / 1e9:.3f} GHz; CPU: {os.cpu_count()} logical", flush=True)
    rng = np.random.default_rng(1)

    def loop(fn, min_time, warm=True):
        if warm:
            fn()
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            t = time.perf_counter() - t0
            if t >= min_time:
                return t / n, n

    def traced(fn, threads):
        fn()  # warm-up, untraced
        lib.ak_trace_reset()
        per_call, n = loop(fn, args.min_time, warm=False)
        lib.ak_trace_read(buf)
        us = lambda c: c / hz * 1e6 / n  # noqa: E731
        cyc = [[buf[t * N_PHASES + q] for q in range(N_PHASES)] for t in range(threads)]
        cnt = [[buf[MAX_THREADS * N_PHASES + t * N_PHASES + q] for q in range(N_PHASES)]
               for t in range(threads)]
        work = [us(cyc[t][1]) for t in range(threads)]
        phases = {name: sum(us(cyc[t][q]) for t in range(threads))
                  for q, name in enumerate(PHASES) if name not in ("wake", "work", "tail", "items")}
        items = sum(cnt[t][11] for t in range(threads)) / n
        return {
            "call": per_call * 1e6,
            "wake": statistics.mean(us(cyc[t][0]) for t in range(threads)),
            "wake_max": max(us(cyc[t][0]) for t in range(threads)),
            "work": statistics.mean(work), "work_min": min(work), "work_max": max(work),
            "tail": statistics.mean(us(cyc[t][2]) for t in range(threads)),
            "phases": phases, "items": items,
        }

    def report(label, threads, fn, ort_fn):
        rs, ort_ts = [], []
        for _ in range(args.rounds):
            rs.append(traced(fn, threads))
            if ort_fn:
                ort_ts.append(loop(ort_fn, args.min_time)[0] * 1e6)
        r = sorted(rs, key=lambda x: x["call"])[len(rs) // 2]
        ort_s = f" ORT {statistics.median(ort_ts):7.1f} us" if ort_ts else ""
        calls = " ".join(f"{x['call']:.1f}" for x in rs)
        print(f"{label}, {threads} thr: call {r['call']:7.1f} us [{calls}]{ort_s} | "
              f"wake {r['wake']:.1f} (max {r['wake_max']:.1f}) work {r['work']:.1f} "
              f"({r['work_min']:.1f}-{r['work_max']:.1f}) tail {r['tail']:.1f}", flush=True)
        ph = r["phases"]
        tot = sum(ph.values())
        if tot > 0:
            print("    phases, us per call summed over threads: " +
                  " ".join(f"{k} {v:.1f}" for k, v in ph.items()) +
                  f" | items {r['items']:.0f}", flush=True)

    for t in args.threads:
        ak.set_num_threads(t)
        for rows, cols in ((16, 32768), (1024, 1024)):
            x = rng.standard_normal((rows, cols), dtype=np.float32)
            y, y_ort = np.empty_like(x), np.empty_like(x)
            fp = ctypes.POINTER(ctypes.c_float)
            px, py = x.ctypes.data_as(fp), y.ctypes.data_as(fp)
            ort_fn = (ort_peer.OrtCall(ort, ort_peer.softmax_graph(onnx, x), [x], y_ort, t,
                                       args.ort_spinning) if ort else None)
            report(f"softmax {rows}x{cols}", t,
                   lambda: lib.ak_softmax(rows, cols, px, cols, py, cols), ort_fn)
            del ort_fn
        for b, h, L, causal in ((8, 12, 128, False), (8, 12, 197, False), (4, 16, 384, False),
                                (1, 8, 1024, True)):
            d = 64
            q, k, v = (rng.standard_normal((b, h, L, d), dtype=np.float32) for _ in range(3))
            out, out_ort = np.empty_like(q), np.empty_like(q)
            mask = attnkern.Mask.CAUSAL_TOP_LEFT if causal else attnkern.Mask.NONE
            ort_fn = (ort_peer.OrtCall(ort, ort_peer.attention23(onnx, q, k, v, q, is_causal=causal),
                                       [q, k, v], out_ort, t, args.ort_spinning)
                      if ort else None)
            report(f"attention {b}x{h} L {L} d {d}{' causal' if causal else ''}", t,
                   lambda: ak.attention(q, k, v, mask=mask, out=out), ort_fn)
            del ort_fn
    return 0


if __name__ == "__main__":
    sys.exit(main())

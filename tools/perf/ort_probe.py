#!/usr/bin/env python3
"""Where attnkern trails ONNX Runtime: softmax and short encoder attention,
attnkern's variants beside ORT in one process (ort_peer.py's sessions).

    AK_LIBRARY=build-rel/libattnkern.so python3 tools/perf/ort_probe.py --threads 1,4,16

Softmax (1024 x 1024, 16 x 32768, 4096 x 4096; GB/s of one read and one
write): attnkern through the Python binding (numpy's buffers), the same
call on 64-byte-aligned copies, a bare ctypes call of ak_softmax with its
pointers made once (no binding checks), that bare call on AVX2
(ak_set_isa), and ORT's Softmax. Encoder attention (d 64, 8 x 12 heads at
L 128, 4 x 16 at L 384; GFLOP/s): attnkern, attnkern on AVX2, ORT's
Attention (opset 23). Medians of --reps samples of --min-time seconds each,
taken in turns. Needs numpy, onnx and onnxruntime.
"""

import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import ort_peer  # noqa: E402  (bench/, after the path is set)
from peer_common import median_times, parse_threads, positive_int  # noqa: E402


def aligned_copy(np, x):
    """x copied to a 64-byte-aligned buffer."""
    raw = np.empty(x.size + 16, np.float32)
    start = (-raw.ctypes.data // 4) % 16
    y = raw[start:start + x.size].reshape(x.shape)
    y[...] = x
    return y


def main(argv=None):
    p = argparse.ArgumentParser(description="attnkern variants beside ONNX Runtime.")
    p.add_argument("--threads", type=parse_threads, default=parse_threads("1,16"))
    p.add_argument("--reps", type=positive_int, default=7)
    p.add_argument("--min-time", type=float, default=0.15)
    p.add_argument("--lib", default=None)
    args = p.parse_args(argv)
    np, onnx, ort, attnkern, ak = ort_peer.import_peers(args.lib)
    fp = ctypes.POINTER(ctypes.c_float)
    rng = np.random.default_rng(1)
    fmt = lambda v: "   —" if v is None else f"{v:6.1f}"  # noqa: E731

    def timed(fns):
        """Median seconds of each fn, after a warm-up call of each (first touch of
        the outputs' pages)."""
        for fn in fns:
            fn()
        return median_times(fns, args.reps, args.min_time)

    def timed_avx2(fn):
        """Median seconds of fn with AVX2 forced; None where the CPU lacks it."""
        if not ak.isa_supported("avx2"):
            return None
        ak.set_isa("avx2")
        try:
            (seconds,) = timed([fn])
        finally:
            ak.set_isa("auto")
        return seconds

    for t in args.threads:
        ak.set_num_threads(t)
        for rows, cols in ((1024, 1024), (16, 32768), (4096, 4096)):
            x = rng.standard_normal((rows, cols), dtype=np.float32)
            y, y_ort = np.empty_like(x), np.empty_like(x)
            xa, ya = aligned_copy(np, x), aligned_copy(np, x)
            px, py = x.ctypes.data_as(fp), y.ctypes.data_as(fp)

            def bare():
                return ak.lib.ak_softmax(rows, cols, px, cols, py, cols)

            call = ort_peer.OrtCall(ort, ort_peer.softmax_graph(onnx, x), [x], y_ort, t)
            ts = timed([lambda: ak.softmax(x, out=y), lambda: ak.softmax(xa, out=ya), bare, call])
            t_avx2 = timed_avx2(bare)
            gbs = [2.0 * x.nbytes / s / 1e9 for s in ts]
            avx2 = None if t_avx2 is None else 2.0 * x.nbytes / t_avx2 / 1e9
            print(f"softmax {rows}x{cols}, {t} thr, GB/s: binding {gbs[0]:6.1f} aligned "
                  f"{gbs[1]:6.1f} bare {gbs[2]:6.1f} bare AVX2 {fmt(avx2)} | ORT {gbs[3]:6.1f} "
                  f"(a call: bare {ts[2] * 1e6:.0f} us, binding {ts[0] * 1e6:.0f} us, "
                  f"ORT {ts[3] * 1e6:.0f} us)", flush=True)
            del call
        for b, h, L in ((8, 12, 128), (4, 16, 384)):
            q, k, v = (rng.standard_normal((b, h, L, 64), dtype=np.float32) for _ in range(3))
            out, out_ort = np.empty_like(q), np.empty_like(q)
            call = ort_peer.OrtCall(ort, ort_peer.attention23(onnx, q, k, v, q), [q, k, v],
                                    out_ort, t)

            def ak_call():
                return ak.attention(q, k, v, out=out)

            ts = timed([ak_call, call])
            t_avx2 = timed_avx2(ak_call)
            flops = b * h * 2.0 * L * L * 128
            avx2 = None if t_avx2 is None else flops / t_avx2 / 1e9
            print(f"encoder {b}x{h} L {L}, {t} thr, GFLOP/s: attnkern {flops / ts[0] / 1e9:6.1f} "
                  f"AVX2 {fmt(avx2)} | ORT Attention {flops / ts[1] / 1e9:6.1f}", flush=True)
            del call
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""attnkern against ONNX Runtime's CPU kernels, in one process, on the same memory.

    AK_LIBRARY=build-rel/libattnkern.so python3 bench/ort_peer.py --threads 1,2 --out ort.md
    python3 bench/ort_peer.py --lib build-rel/libattnkern.so --quick --tables prefill,decode

ONNX Runtime (ORT) runs each operation as a one-node ONNX graph built here
with onnx.helper, in an InferenceSession on the CPU execution provider:

  Attention  ai.onnx Attention (opset 23), the standard op: q, k, v and the
             output as 4-D [batch, heads, seq, dim] (the layout attnkern
             takes, so both read the same buffers); is_causal=1 for causal
             prefill; GQA by giving k and v fewer heads; a few queries per
             step ("verify") with a boolean attn_mask [q_len, kv_len] that
             is True where query i sees key j <= i + kv_len - q_len.
  MHA        com.microsoft MultiHeadAttention, the contrib op that ORT's
             transformer optimizer fuses BERT-like graphs into, with q as
             [batch, seq, heads * dim] (its own layout: a copy of attnkern's
             q made once, untimed) and k, v as [batch, heads, seq, dim]
             (attnkern's buffers). Only where it applies: no mask, as many kv
             heads as query heads.
  Softmax    Softmax(axis=-1), opset 13.
  Gemm       Gemm(transB), opset 13, with B a graph input rather than a
             constant initializer, so ORT cannot pre-pack it (as for Q K^T
             and P V, whose operands change every call).

The shapes are torch_peer.py's (fp32; batch 1 but for encoder): prefill with
8 heads, d 64 and 128, L 1024 and 4096, no mask and causal; encoder (batch 8
x 12 heads at L 128 and 197, 4 x 16 at L 384, d 64); decode (q_len 1, 32 query
heads over 32 and 8 kv heads, d 128, kv_len 8192 and 32768); verify (q_len 4
and 8 over GQA 4, kv 4096, causal bottom-right); softmax 1024x1024,
4096x4096, 16x32768; sgemm 512^3, 1024^3 NN and NT, 2048^3, Q K^T 4096 x
4096 x 128 and P V 4096 x 128 x 4096. --quick keeps L 1024, kv 8192 and the
first three products. GFLOP/s count useful work (attention 2*L*L*(d+d) per
head, halved for causal), GB/s K and V read once (decode) or one read and one
write (softmax).

Every session gets intra_op_num_threads = t (one session per thread count),
inter_op_num_threads = 1, sequential execution and all graph optimizations;
inputs and the output are bound once as OrtValues over numpy buffers
(io_binding), so a timed call copies nothing. attnkern gets
ak_set_num_threads(t). Per case, op and thread count each side runs once as a
warm-up and the outputs are compared (max |attnkern - ORT| / max |ORT| <= 1e-4,
softmax 1e-5; else FAIL, and exit status 1 at the end), then --reps samples
of each, alternating, with a pause before each so the other side's threads
stop spinning (peer_common.py); the medians are reported. An op that ORT
refuses (an unknown op or attribute in this version) is reported as such and
not timed; that is not a failure.

Needs numpy, onnx and onnxruntime; attnkern is reached through the ctypes
binding in capi/examples/python/attnkern.py (--lib, else $AK_LIBRARY, else
the system's search path). Progress goes to stderr, the Markdown report to
stdout (and to --out).
"""

import argparse
import datetime
import os
import shlex
import sys
import time

from peer_common import (SWITCH_PAUSE_S, cpu_model, fmt_row, geomean, load_attnkern,
                         median_times, parse_threads, positive_int, progress, rel_diff,
                         usable_cpus)

ATTENTION_TOL = 1e-4
SOFTMAX_TOL = 1e-5
SEED = 20240611
MAX_IR_VERSION = 10

TABLES = {
    # table: (title, leading column names, unit)
    "prefill": ("Prefill (8 heads, batch 1): GFLOP/s of useful work",
                ["d", "L", "mask"], "GFLOP/s"),
    "encoder": ("Encoder (short sequences over a batch and many heads, no mask): GFLOP/s",
                ["batch", "heads", "d", "L"], "GFLOP/s"),
    "decode": ("Decode (q_len 1, head_dim 128, no mask): GB/s of K and V read once",
               ["heads/kv heads", "kv_len"], "GB/s"),
    "verify": ("A few queries per step (head_dim 128, causal bottom-right): GFLOP/s of "
               "useful work", ["heads/kv heads", "q_len", "kv_len"], "GFLOP/s"),
    "softmax": ("Softmax over the last axis: GB/s of one read and one write",
                ["shape"], "GB/s"),
    "sgemm": ("SGEMM (C = A B or A B^T): GFLOP/s, 2mnk per call",
              ["m×n×k", "op"], "GFLOP/s"),
}


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="attnkern vs ONNX Runtime's CPU kernels, same process.")
    p.add_argument("--threads", type=parse_threads, default=parse_threads("1,2"),
                   help="comma list of thread counts (default 1,2)")
    p.add_argument("--reps", type=positive_int, default=5,
                   help="timed samples per implementation; the median is reported "
                        "(default 5)")
    p.add_argument("--min-time", type=float, default=0.2,
                   help="seconds of calls per sample (default 0.2)")
    p.add_argument("--lib", default=None,
                   help="path to libattnkern (default: $AK_LIBRARY, else the system's)")
    p.add_argument("--out", default=None, help="also write the Markdown report here")
    p.add_argument("--quick", action="store_true",
                   help="fewer shapes: L = 1024 only, kv_len = 8192 only, three products")
    p.add_argument("--tables", default=",".join(TABLES),
                   help=f"comma list of the tables to run (default {','.join(TABLES)})")
    args = p.parse_args(argv)
    args.tables = set(t.strip() for t in args.tables.split(",") if t.strip())
    unknown = args.tables - set(TABLES)
    if unknown or not args.tables:
        p.error(f"--tables takes {', '.join(TABLES)}, not {sorted(unknown) or 'nothing'}")
    return args


def import_peers(lib_path):
    """numpy, onnx, onnxruntime and the loaded attnkern binding, or exit."""
    try:
        import numpy as np
    except ImportError:
        sys.exit("ort_peer.py needs numpy")
    try:
        import onnx
        import onnx.helper  # noqa: F401
    except ImportError:
        sys.exit("ort_peer.py needs onnx (to build the one-node graphs)")
    try:
        import onnxruntime as ort
    except ImportError:
        sys.exit("ort_peer.py needs onnxruntime")
    attnkern, ak = load_attnkern(lib_path, "ort_peer.py")
    return np, onnx, ort, attnkern, ak


# -------------------------------------------------------------------- graphs
class Graph:
    """A one-node ONNX model: its serialized bytes, the input names in order
    and the output name. inputs: (name, elem_type, shape) triples."""

    def __init__(self, onnx, op, inputs, output_shape, opsets, domain="", **attrs):
        helper, tp = onnx.helper, onnx.TensorProto
        node = helper.make_node(op, [n for n, _, _ in inputs], ["Y"], domain=domain, **attrs)
        graph = helper.make_graph(
            [node], op.lower(),
            [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs],
            [helper.make_tensor_value_info("Y", tp.FLOAT, list(output_shape))])
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
        # A newer onnx than the onnxruntime writes an IR version that runtime
        # refuses (onnx 1.23 beside onnxruntime 1.30); opset 23 needs IR 10.
        model.ir_version = min(model.ir_version, MAX_IR_VERSION)
        self.bytes = model.SerializeToString()
        self.input_names = [n for n, _, _ in inputs]
        self.op = f"{op} (contrib)" if domain else op


def f32(onnx, name, array):
    return (name, onnx.TensorProto.FLOAT, array.shape)


def attention23(onnx, q, k, v, out, is_causal=False, mask=None):
    inputs = [f32(onnx, "Q", q), f32(onnx, "K", k), f32(onnx, "V", v)]
    if mask is not None:
        inputs.append(("M", onnx.TensorProto.BOOL, mask.shape))
    return Graph(onnx, "Attention", inputs, out.shape, [("", 23)], is_causal=int(is_causal))


def multihead_attention(onnx, q3, k, v, out3, heads):
    # The contrib op comes with the default domain's opset beside it.
    return Graph(onnx, "MultiHeadAttention",
                 [f32(onnx, "Q", q3), f32(onnx, "K", k), f32(onnx, "V", v)],
                 out3.shape, [("", 17), ("com.microsoft", 1)], domain="com.microsoft",
                 num_heads=heads)


def softmax_graph(onnx, x):
    return Graph(onnx, "Softmax", [f32(onnx, "X", x)], x.shape, [("", 13)], axis=-1)


def gemm_graph(onnx, a, b, c, trans_b):
    return Graph(onnx, "Gemm", [f32(onnx, "A", a), f32(onnx, "B", b)], c.shape,
                 [("", 13)], transB=int(trans_b))


class OrtCall:
    """A session of one graph at t threads, its inputs and output bound over
    numpy buffers; calling it runs the graph once."""

    def __init__(self, ort, graph, inputs, out, threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3  # errors only
        self.session = ort.InferenceSession(graph.bytes, sess_options=so,
                                            providers=["CPUExecutionProvider"])
        self.binding = self.session.io_binding()
        # The OrtValues hold the numpy buffers: keep them alive with the binding.
        self.values = [ort.OrtValue.ortvalue_from_numpy(a) for a in inputs]
        for name, value in zip(graph.input_names, self.values):
            self.binding.bind_ortvalue_input(name, value)
        self.out_value = ort.OrtValue.ortvalue_from_numpy(out)
        self.binding.bind_ortvalue_output("Y", self.out_value)

    def __call__(self):
        self.session.run_with_iobinding(self.binding)

    def output(self):
        return self.binding.get_outputs()[0].numpy()


# --------------------------------------------------------------------- cases
class Peer:
    """One ORT implementation of a case: the graph, its inputs, its output
    buffer, and how to view that output in attnkern's layout."""

    def __init__(self, graph, inputs, out, to_ak_layout=None):
        self.graph = graph
        self.inputs = inputs
        self.out = out
        self.to_ak_layout = to_ak_layout or (lambda y: y)


class Case:
    """One shape: its row cells, the work per call, attnkern's call (returning
    its output), the ORT implementations and the tolerance."""

    def __init__(self, table, cells, work, run_ak, peers, tol):
        self.table = table
        self.cells = cells
        self.work = work
        self.run_ak = run_ak
        self.peers = peers
        self.tol = tol

    @property
    def label(self):
        return f"{self.table} " + " ".join(str(c) for c in self.cells)


def randn(np, rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def bsnh(np, x):
    """[b, h, s, d] -> a contiguous [b, s, h*d] copy (MultiHeadAttention's q)."""
    b, h, s, d = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, s, h * d)


def from_bsnh(y, heads):
    """[b, s, h*d] -> a [b, h, s, d] view."""
    b, s, hd = y.shape
    return y.reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)


def attention_peers(np, onnx, q, k, v, causal=False, mask=None, mha=True):
    """Attention-23 on attnkern's buffers, and MultiHeadAttention where it
    applies (no mask, equal head counts)."""
    peers = [Peer(attention23(onnx, q, k, v, q, causal, mask),
                  [q, k, v] + ([mask] if mask is not None else []), np.empty_like(q))]
    heads = q.shape[1]
    if mha and not causal and mask is None and k.shape[1] == heads:
        q3 = bsnh(np, q)
        out3 = np.empty_like(q3)
        peers.append(Peer(multihead_attention(onnx, q3, k, v, out3, heads), [q3, k, v],
                          out3, lambda y, h=heads: from_bsnh(y, h)))
    return peers


def prefill_case(np, onnx, ak, attnkern, rng, d, L, causal):
    heads = 8
    q, k, v = (randn(np, rng, (1, heads, L, d)) for _ in range(3))
    out = np.empty_like(q)
    mask = attnkern.Mask.CAUSAL_TOP_LEFT if causal else attnkern.Mask.NONE
    flops = heads * 2.0 * L * L * (d + d) * (0.5 if causal else 1.0)
    return Case("prefill", [d, L, "causal" if causal else "none"], flops,
                lambda: ak.attention(q, k, v, mask=mask, out=out),
                attention_peers(np, onnx, q, k, v, causal=causal), ATTENTION_TOL)


def encoder_case(np, onnx, ak, rng, batch, heads, L, d=64):
    q, k, v = (randn(np, rng, (batch, heads, L, d)) for _ in range(3))
    out = np.empty_like(q)
    return Case("encoder", [batch, heads, d, L], batch * heads * 2.0 * L * L * (d + d),
                lambda: ak.attention(q, k, v, out=out),
                attention_peers(np, onnx, q, k, v), ATTENTION_TOL)


def decode_case(np, onnx, ak, rng, kv_len, kv_heads):
    heads, d = 32, 128
    q = randn(np, rng, (1, heads, 1, d))
    k = randn(np, rng, (1, kv_heads, kv_len, d))
    v = randn(np, rng, (1, kv_heads, kv_len, d))
    out = np.empty_like(q)
    return Case("decode", [f"{heads}/{kv_heads}", kv_len], kv_heads * kv_len * d * 4 * 2.0,
                lambda: ak.attention(q, k, v, num_kv_heads=kv_heads, out=out),
                attention_peers(np, onnx, q, k, v), ATTENTION_TOL)


def verify_case(np, onnx, ak, attnkern, rng, q_len, kv_len):
    heads, kv_heads, d = 32, 8, 128
    q = randn(np, rng, (1, heads, q_len, d))
    k = randn(np, rng, (1, kv_heads, kv_len, d))
    v = randn(np, rng, (1, kv_heads, kv_len, d))
    out = np.empty_like(q)
    visible = (np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + (kv_len - q_len))
    return Case("verify", [f"{heads}/{kv_heads}", q_len, kv_len],
                heads * 2.0 * (d + d) * float(visible.sum()),
                lambda: ak.attention(q, k, v, num_kv_heads=kv_heads,
                                     mask=attnkern.Mask.CAUSAL_BOTTOM_RIGHT, out=out),
                attention_peers(np, onnx, q, k, v, mask=visible), ATTENTION_TOL)


def softmax_case(np, onnx, ak, rng, rows, cols):
    x = randn(np, rng, (rows, cols))
    y = np.empty_like(x)
    return Case("softmax", [f"{rows}x{cols}"], 2.0 * rows * cols * 4,
                lambda: ak.softmax(x, out=y),
                [Peer(softmax_graph(onnx, x), [x], np.empty_like(x))], SOFTMAX_TOL)


def sgemm_case(np, onnx, ak, rng, m, n, k, trans_b):
    a = randn(np, rng, (m, k))
    b = randn(np, rng, (n, k) if trans_b else (k, n))
    c = np.empty((m, n), dtype=np.float32)
    return Case("sgemm", [f"{m}×{n}×{k}", "NT" if trans_b else "NN"], 2.0 * m * n * k,
                lambda: ak.sgemm(a, b, out=c, trans_b=trans_b),
                [Peer(gemm_graph(onnx, a, b, c, trans_b), [a, b], np.empty_like(c))],
                ATTENTION_TOL)


def case_builders(np, onnx, ak, attnkern, quick):
    """(table, build()) per case in report order; build() allocates the inputs,
    so only one case's buffers (up to ~1 GiB for decode at 32768) live at once."""
    rng = np.random.default_rng(SEED)
    lengths = [1024] if quick else [1024, 4096]
    kv_lengths = [8192] if quick else [8192, 32768]
    builders = []
    for d in (64, 128):
        for L in lengths:
            for causal in (False, True):
                builders.append(("prefill", lambda d=d, L=L, c=causal:
                                 prefill_case(np, onnx, ak, attnkern, rng, d, L, c)))
    for batch, heads, L in ((8, 12, 128), (8, 12, 197), (4, 16, 384)):
        builders.append(("encoder", lambda b=batch, h=heads, L=L:
                         encoder_case(np, onnx, ak, rng, b, h, L)))
    for kv_len in kv_lengths:
        for kv_heads in (32, 8):
            builders.append(("decode", lambda n=kv_len, h=kv_heads:
                             decode_case(np, onnx, ak, rng, n, h)))
    for q_len in (4, 8):
        builders.append(("verify", lambda q=q_len:
                         verify_case(np, onnx, ak, attnkern, rng, q, 4096)))
    for rows, cols in ((1024, 1024), (4096, 4096), (16, 32768)):
        builders.append(("softmax", lambda r=rows, c=cols:
                         softmax_case(np, onnx, ak, rng, r, c)))
    gemms = [(512, 512, 512, False), (1024, 1024, 1024, False), (1024, 1024, 1024, True)]
    if not quick:
        gemms += [(2048, 2048, 2048, False), (4096, 4096, 128, True), (4096, 128, 4096, False)]
    for m, n, k, tb in gemms:
        builders.append(("sgemm", lambda m=m, n=n, k=k, tb=tb:
                         sgemm_case(np, onnx, ak, rng, m, n, k, tb)))
    return builders


# ------------------------------------------------------------------ measuring
def short_error(e):
    """The last line of ORT's message, from its end (which says what is wrong;
    the start is a source path)."""
    text = str(e).strip().splitlines()
    text = text[-1] if text else type(e).__name__
    return text if len(text) <= 200 else "..." + text[-197:]


def measure(np, ort, ak, case, peer, t, reps, min_time):
    """One row: the session, warm-up calls that double as the agreement check,
    then the alternating samples."""
    row = {"table": case.table, "cells": case.cells, "threads": t, "op": peer.graph.op,
           "ok": True, "err": float("nan"), "error": None}
    try:
        call = OrtCall(ort, peer.graph, peer.inputs, peer.out, t)
        call()
    except Exception as e:  # ORT lacks the op, an attribute or this shape
        row["error"] = short_error(e)
        progress(f"{case.label} [{peer.graph.op}] threads {t}: ORT refused: {row['error']}")
        return row
    ak.set_num_threads(t)
    got = case.run_ak()
    time.sleep(SWITCH_PAUSE_S)
    err = rel_diff(np, got, peer.to_ak_layout(call.output()))
    ok = err <= case.tol  # False for NaN too
    t_ak, t_ort = median_times([case.run_ak, call], reps, min_time)
    del call
    row.update(ak=case.work / t_ak, ort=case.work / t_ort, ratio=t_ort / t_ak, err=err, ok=ok)
    unit = TABLES[case.table][2]
    progress(f"{case.label} [{peer.graph.op}] threads {t}: attnkern "
             f"{row['ak'] / 1e9:.1f} {unit}, ORT {row['ort'] / 1e9:.1f} {unit}, "
             f"ratio {row['ratio']:.2f}, rel diff {err:.2g}{'' if ok else ' FAIL'}")
    return row


def run_all(np, onnx, ort, ak, attnkern, args):
    rows = []
    for table, build in case_builders(np, onnx, ak, attnkern, args.quick):
        if table not in args.tables:
            continue
        case = build()
        for peer in case.peers:
            for t in args.threads:
                rows.append(measure(np, ort, ak, case, peer, t, args.reps, args.min_time))
        del case  # free this case's buffers before the next allocates
    return rows


# -------------------------------------------------------------------- report
def table_lines(name, rows, thread_counts):
    title, lead, unit = TABLES[name]
    rows = [r for r in rows if r["table"] == name]
    if not rows:
        return []
    head = lead + ["ORT op", "threads", f"attnkern {unit}", f"ORT {unit}",
                   "attnkern/ORT", "max rel diff"]
    lines = [f"## {title}", "", fmt_row(head), fmt_row(["---"] * len(head))]
    for r in rows:
        if r["error"]:
            cells = ["", "", f"ORT refused: {r['error']}", ""]
        else:
            cells = [f"{r['ak'] / 1e9:.1f}", f"{r['ort'] / 1e9:.1f}", f"{r['ratio']:.2f}",
                     f"{r['err']:.1e}" + ("" if r["ok"] else " **FAIL**")]
        lines.append(fmt_row(r["cells"] + [r["op"], r["threads"]] + cells))
    for op in dict.fromkeys(r["op"] for r in rows):
        for t in thread_counts:
            sel = [r for r in rows if r["op"] == op and r["threads"] == t and not r["error"]]
            if not sel:
                continue
            cells = [f"**geomean** ({len(sel)})"] + [""] * (len(lead) - 1)
            cells += [op, t, f"{geomean([r['ak'] for r in sel]) / 1e9:.1f}",
                      f"{geomean([r['ort'] for r in sel]) / 1e9:.1f}",
                      f"**{geomean([r['ratio'] for r in sel]):.2f}**", ""]
            lines.append(fmt_row(cells))
    lines.append("")
    return lines


def header_lines(np, onnx, ort, ak, args_line):
    return [
        "# attnkern vs ONNX Runtime (CPU execution provider, fp32, same process)",
        "",
        f"- date (UTC): {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}",
        f"- CPU: {cpu_model()}; os.cpu_count() = {os.cpu_count()}, "
        f"usable by this process = {usable_cpus()}",
        f"- onnxruntime {ort.__version__} (providers {', '.join(ort.get_available_providers())}); "
        f"onnx {onnx.__version__}",
        f"- attnkern {ak.version}, ISA {ak.get_isa()}, library {ak.path}",
        f"- numpy {np.__version__}; Python {sys.version.split()[0]}",
        f"- command: `{args_line}`",
    ]


def report(header, rows, thread_counts):
    lines = header + [""]
    for name in TABLES:
        lines += table_lines(name, rows, thread_counts)
    failed = [r for r in rows if not r["ok"]]
    refused = [r for r in rows if r["error"]]
    if refused:
        lines.append(f"ORT refused {len(refused)} row(s) (an op or attribute this version "
                     "lacks); they are not timed.")
    if failed:
        lines.append(f"**FAIL**: {len(failed)} row(s) disagree beyond tolerance "
                     f"(attention and sgemm {ATTENTION_TOL:g}, softmax {SOFTMAX_TOL:g}).")
    else:
        lines.append(f"All timed outputs agree (max |attnkern - ORT| / max |ORT| <= "
                     f"{ATTENTION_TOL:g} attention and sgemm, {SOFTMAX_TOL:g} softmax).")
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    np, onnx, ort, attnkern, ak = import_peers(args.lib)
    args_line = " ".join(shlex.quote(a) for a in [sys.executable, sys.argv[0]] + argv)
    if os.environ.get("AK_LIBRARY"):
        args_line = f"AK_LIBRARY={shlex.quote(os.environ['AK_LIBRARY'])} {args_line}"
    header = header_lines(np, onnx, ort, ak, args_line)
    progress("\n".join(header))
    rows = run_all(np, onnx, ort, ak, attnkern, args)
    text = report(header, rows, args.threads)
    print(text, end="", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        progress(f"wrote {args.out}")
    return 1 if any(not r["ok"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

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
binding in capi/python/attnkern/, imported from the source tree (--lib, else
$AK_LIBRARY, else the installed libattnkern.so.1). Progress goes to stderr, the Markdown report to
stdout (and to --out).
"""

import datetime
import os
import sys
import time

from peer_common import (ATTENTION_TOL, SEED, CaseBase, SOFTMAX_TOL, SWITCH_PAUSE_S, TABLES,
                         agreement_lines, command_line, cpu_model, emit_report, fmt_row,
                         geomean, load_attnkern, median_times, parse_peer_args, peer_shapes,
                         progress, randn, rel_diff, usable_cpus)

MAX_IR_VERSION = 10

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


# What ORT's pool threads do between runs (--ort-spinning). Its default: they
# spin on after a run, which steals cores from attnkern's OpenMP team in the
# next sample (its start waits for the team). "stop": they spin during a run
# and stop when it returns (session.force_spinning_stop), so that neither
# library's samples run beside the other's spinning threads.
SPINNING = {
    "default": [],
    "stop": [("session.force_spinning_stop", "1")],
    "off": [("session.intra_op.allow_spinning", "0")],
}


class OrtCall:
    """A session of one graph at t threads, its inputs and output bound over
    numpy buffers; calling it runs the graph once."""

    def __init__(self, ort, graph, inputs, out, threads, spinning="default"):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        for key, value in SPINNING[spinning]:
            so.add_session_config_entry(key, value)
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


class Case(CaseBase):
    """A shape (CaseBase) and its ORT implementations (Peer)."""

    def __init__(self, table, cells, work, run_ak, peers, tol):
        super().__init__(table, cells, work, run_ak, tol)
        self.peers = peers


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


def case_builders(np, onnx, ak, attnkern, quick, tiny=False):
    """(table, build()) per case in report order; build() allocates the inputs,
    so only one case's buffers (up to ~1 GiB for decode at 32768) live at once."""
    rng = np.random.default_rng(SEED)
    shapes = peer_shapes(quick, tiny)
    build = {
        "prefill": lambda d, L, causal: prefill_case(np, onnx, ak, attnkern, rng, d, L, causal),
        "encoder": lambda b, h, L: encoder_case(np, onnx, ak, rng, b, h, L),
        "decode": lambda kv_len, kv_heads: decode_case(np, onnx, ak, rng, kv_len, kv_heads),
        "verify": lambda q_len, kv_len: verify_case(np, onnx, ak, attnkern, rng, q_len,
                                                      kv_len),
        "softmax": lambda rows, cols: softmax_case(np, onnx, ak, rng, rows, cols),
        "sgemm": lambda m, n, k, tb: sgemm_case(np, onnx, ak, rng, m, n, k, tb),
    }
    return [(table, lambda t=table, c=case: build[t](*c))
            for table in TABLES for case in shapes[table]]


# ------------------------------------------------------------------ measuring
def short_error(e):
    """The last line of ORT's message, from its end (which says what is wrong;
    the start is a source path)."""
    text = str(e).strip().splitlines()
    text = text[-1] if text else type(e).__name__
    return text if len(text) <= 200 else "..." + text[-197:]


def measure(np, ort, ak, case, peer, t, reps, min_time, spinning):
    """One row: the session, warm-up calls that double as the agreement check,
    then the alternating samples."""
    row = {"table": case.table, "cells": case.cells, "threads": t, "op": peer.graph.op,
           "ok": True, "err": float("nan"), "error": None}
    try:
        call = OrtCall(ort, peer.graph, peer.inputs, peer.out, t, spinning)
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
    for table, build in case_builders(np, onnx, ak, attnkern, args.quick, args.tiny):
        if table not in args.tables:
            continue
        case = build()
        for peer in case.peers:
            for t in args.threads:
                rows.append(measure(np, ort, ak, case, peer, t, args.reps, args.min_time,
                                    args.ort_spinning))
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


def header_lines(np, onnx, ort, ak, args_line, spinning="default"):
    return [
        "# attnkern vs ONNX Runtime (CPU execution provider, fp32, same process)",
        "",
        f"- date (UTC): {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}",
        f"- CPU: {cpu_model()}; os.cpu_count() = {os.cpu_count()}, "
        f"usable by this process = {usable_cpus()}",
        f"- onnxruntime {ort.__version__} (providers {', '.join(ort.get_available_providers())}); "
        f"onnx {onnx.__version__}; ORT's pool threads between runs: {spinning} "
        f"({', '.join(f'{k}={v}' for k, v in SPINNING[spinning]) or 'ORT defaults'})",
        f"- attnkern {ak.version}, ISA {ak.get_isa()}, library {ak.path}",
        f"- numpy {np.__version__}; Python {sys.version.split()[0]}",
        f"- command: `{args_line}`",
    ]


def report(header, rows, thread_counts):
    lines = header + [""]
    for name in TABLES:
        lines += table_lines(name, rows, thread_counts)
    refused = [r for r in rows if r["error"]]
    if refused:
        lines.append(f"ORT refused {len(refused)} row(s) (an op or attribute this version "
                     "lacks); they are not timed.")
    return "\n".join(lines + agreement_lines(rows, "ORT")) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_peer_args(
        argv, "attnkern vs ONNX Runtime's CPU kernels, same process.",
        extra=lambda p: p.add_argument(
            "--ort-spinning", choices=sorted(SPINNING), default="default",
            help="what ORT's pool threads do between runs: default (ORT's own: spin on), "
                 "stop (spin during a run only), off (never spin)"))
    np, onnx, ort, attnkern, ak = import_peers(args.lib)
    header = header_lines(np, onnx, ort, ak, command_line(argv), args.ort_spinning)
    progress("\n".join(header))
    rows = run_all(np, onnx, ort, ak, attnkern, args)
    emit_report(report(header, rows, args.threads), args.out)
    return 1 if any(not r["ok"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

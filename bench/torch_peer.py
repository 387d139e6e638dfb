#!/usr/bin/env python3
"""attnkern against PyTorch's CPU kernels, in one process, on the same memory.

    AK_LIBRARY=build-rel/libattnkern.so python3 bench/torch_peer.py --threads 1,2,4,8,16
    python3 bench/torch_peer.py --lib build-rel/libattnkern.so --quick --out torch.md
    python3 bench/torch_peer.py --tables softmax --threads 1,4,16 --reps 7

What it measures (fp32, contiguous [batch, heads, seq, dim], batch 1 but for
encoder):

  prefill  torch.nn.functional.scaled_dot_product_attention against
           ak_attention, 8 heads, head_dim 64 and 128, L = 1024 and 4096,
           no mask and causal (top-left, which is what SDPA's is_causal means).
           GFLOP/s count 2*L*L*(d+d) per head (q k^T and p v), halved for
           causal: the useful work, the same count for both libraries.
  encoder  the same call on many short sequences (an encoder's self-attention):
           batch 8 x 12 heads at L 128 (BERT-base) and 197 (ViT-B/16), batch
           4 x 16 heads at L 384 (BERT-large, SQuAD), head_dim 64, no mask.
  decode   q_len 1, 32 query heads, head_dim 128, kv_len 8192 and 32768, 32 kv
           heads (MHA) and 8 (GQA). GB/s count K and V read once:
           kv_heads*kv_len*128*4*2 bytes. GQA uses SDPA's enable_gqa=True
           (torch >= 2.5); an older torch gets K and V repeat_interleave'd to 32
           heads outside the timed region (it then reads 4x the bytes counted,
           and the table says so).
  verify   a few queries per step over a kv cache (speculative decoding
           verifying its drafted tokens): q_len 4 and 8, 32 query heads over 8
           kv heads, head_dim 128, kv_len 4096, causal bottom-right (query i
           sees keys j <= i + kv_len - q_len: attnkern's
           Mask.CAUSAL_BOTTOM_RIGHT, torch a boolean attn_mask, with
           enable_gqa=True where it has it). GFLOP/s count 2*(d+d) per
           visible (query, key) pair and query head.
  softmax  rows x cols 1024x1024, 4096x4096, 16x32768, over the last axis.
           GB/s count one read and one write: 2*rows*cols*4 bytes. torch runs
           torch.softmax(x, -1, out=y) so that neither side allocates (and page
           faults) its output per call; a torch that refuses out= falls back to
           the allocating torch.softmax(x, -1), noted under the table.
  sgemm    ak_sgemm against torch.matmul(a, b, out=c) (MKL or oneDNN, as this
           torch was built): 512^3, 1024^3 NN and NT, 2048^3, Q K^T 4096 x
           4096 x 128 and P V 4096 x 128 x 4096 (--quick: the first three).
           NT means B stored n x k; torch gets its transposed view.

Both libraries are handed the very same input buffers (torch.from_numpy shares
the numpy memory), so the inputs are identical. Per case and thread count each
side is called once as a warm-up and the two outputs are compared: max |ak -
torch| / max |torch| must be <= 1e-4 (attention, sgemm) or 1e-5 (softmax), else the
case is reported as FAIL and the script exits 1 at the end (the timings are
still taken and printed). Then `--reps` samples are taken of each, alternating
attnkern, torch, attnkern, torch... so that drift in the machine's speed hits
both alike, with a 50 ms pause before each sample because both OpenMP runtimes
(attnkern's libgomp and the one torch ships) keep their threads spinning for a
while after a parallel region and would steal cores from the other. A sample
is the mean time per call over as many calls as last >= --min-time (0.2 s);
the median of the samples is reported. Both libraries are called through
Python, each paying its per-call overhead (the attnkern binding's argument
checks and descriptor, ~10 us; torch's dispatcher, similar): noise for
attention, but visible for softmax 1024x1024 at high thread counts, where a
call takes well under a millisecond.

The 50 ms pause covers libgomp (what attnkern and torch's pip wheels use),
whose threads spin well under that. A torch linked to Intel's libiomp5 (some
conda builds) spins for KMP_BLOCKTIME = 200 ms by default: run those with
KMP_BLOCKTIME=0.

Thread counts are set on both sides for each run: torch.set_num_threads(t) and
attnkern's ak_set_num_threads(t) (attnkern passes its count to every parallel
region itself, so torch's omp_set_num_threads does not change it).

Needs numpy and torch (CPU build is enough); attnkern is reached through the
ctypes binding in capi/python/attnkern/, imported from the source tree, which
finds the library from --lib, else $AK_LIBRARY, else the installed
libattnkern.so.1. Progress goes to
stderr, the Markdown report to stdout (and to --out).
"""

import datetime
import os
import sys
import time

from peer_common import (ATTENTION_TOL, SEED, CaseBase, SOFTMAX_TOL, SWITCH_PAUSE_S, TABLES,
                         agreement_lines, command_line, cpu_model, emit_report, fmt_row,
                         geomean, load_attnkern, median_times, parse_peer_args, peer_shapes,
                         progress, randn, rel_diff, usable_cpus)


# ------------------------------------------------------------------- imports
def import_peers(lib_path):
    """numpy, torch and the loaded attnkern binding, or exit with the reason."""
    try:
        import numpy as np
    except ImportError:
        sys.exit("torch_peer.py needs numpy")
    # torch before libattnkern: torch's wheels bring their own libgomp (and
    # MKL/oneDNN), attnkern links the system's; importing torch first is the
    # usual order for a native extension loaded beside it.
    try:
        import torch
        import torch.nn.functional  # noqa: F401  (the SDPA entry point)
    except ImportError:
        sys.exit("torch_peer.py needs torch (a CPU build is enough)")
    attnkern, ak = load_attnkern(lib_path, "torch_peer.py")
    return np, torch, attnkern, ak


# --------------------------------------------------------------- environment
def parallel_summary(torch):
    """The top-level lines of torch.__config__.parallel_info() (OpenMP, MKL,
    oneDNN versions, the ATen backend) plus the thread variables that are set;
    the per-library thread counts under them describe the state at start-up
    only, so they are left out."""
    try:
        info = torch.__config__.parallel_info()
    except Exception as e:  # pragma: no cover - depends on the torch build
        return [f"(parallel_info failed: {e})"]
    keep = []
    for line in info.splitlines():
        if not line.strip() or line.strip() in ("ATen/Parallel:", "Environment variables:"):
            continue
        if line[0].isspace():
            # "\tOMP_NUM_THREADS : [not set]": keep only the variables that are set.
            if "_THREADS" in line and "[not set]" not in line:
                keep.append(line.strip())
            continue
        keep.append(line.strip())
    return keep


def flag(fn):
    """Call a torch.backends probe; 'n/a' where this torch lacks it."""
    try:
        return str(fn())
    except Exception:
        return "n/a"


def header_lines(np, torch, ak, args_line):
    backends = torch.backends
    cpu_cap = getattr(getattr(backends, "cpu", None), "get_cpu_capability", None)
    affinity = usable_cpus()
    lines = [
        "# attnkern vs PyTorch (CPU, fp32, same process)",
        "",
        f"- date (UTC): {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}",
        f"- CPU: {cpu_model()}; os.cpu_count() = {os.cpu_count()}, "
        f"usable by this process = {affinity}",
        f"- torch {torch.__version__}; mkldnn (oneDNN) available: "
        f"{flag(lambda: backends.mkldnn.is_available())}; MKL available: "
        f"{flag(lambda: backends.mkl.is_available())}; CPU capability: "
        f"{flag(cpu_cap) if cpu_cap else 'n/a'}",
        f"- torch parallel_info: {'; '.join(parallel_summary(torch))}",
        f"- attnkern {ak.version}, ISA {ak.get_isa()}, library {ak.path}",
        f"- numpy {np.__version__}; Python {sys.version.split()[0]}",
        f"- command: `{args_line}`",
    ]
    return lines


# --------------------------------------------------------------------- cases
class Case(CaseBase):
    """A shape (CaseBase), torch's call (returning its output) and which torch
    call that is, for the report."""

    def __init__(self, table, cells, work, run_ak, run_torch, tol, torch_call=""):
        super().__init__(table, cells, work, run_ak, tol)
        self.run_torch = run_torch
        self.torch_call = torch_call


def prefill_case(np, torch, ak, attnkern, rng, d, L, causal):
    heads = 8
    q, k, v = (randn(np, rng, (1, heads, L, d)) for _ in range(3))
    out = np.empty_like(q)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    mask = attnkern.Mask.CAUSAL_TOP_LEFT if causal else attnkern.Mask.NONE
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run_ak():
        return ak.attention(q, k, v, mask=mask, out=out)

    def run_torch():
        return sdpa(tq, tk, tv, is_causal=causal)

    flops = heads * 2.0 * L * L * (d + d) * (0.5 if causal else 1.0)
    return Case("prefill", [d, L, "causal" if causal else "none"], flops,
                run_ak, run_torch, ATTENTION_TOL,
                "sdpa(q, k, v, is_causal=...) against attention(q, k, v, "
                "mask=Mask.CAUSAL_TOP_LEFT or Mask.NONE)")


def encoder_case(np, torch, ak, rng, batch, heads, L, d=64):
    q, k, v = (randn(np, rng, (batch, heads, L, d)) for _ in range(3))
    out = np.empty_like(q)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run_ak():
        return ak.attention(q, k, v, out=out)

    def run_torch():
        return sdpa(tq, tk, tv)

    flops = batch * heads * 2.0 * L * L * (d + d)
    return Case("encoder", [batch, heads, d, L], flops, run_ak, run_torch, ATTENTION_TOL,
                "sdpa(q, k, v) against attention(q, k, v)")


def sdpa_has_enable_gqa(torch):
    """Whether this torch's SDPA takes enable_gqa (added in torch 2.5)."""
    q = torch.zeros(1, 4, 1, 8)
    kv = torch.zeros(1, 2, 3, 8)
    try:
        torch.nn.functional.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    except TypeError:
        return False
    return True


def decode_case(np, torch, ak, rng, kv_len, kv_heads, has_gqa):
    heads, d = 32, 128
    q = randn(np, rng, (1, heads, 1, d))
    k = randn(np, rng, (1, kv_heads, kv_len, d))
    v = randn(np, rng, (1, kv_heads, kv_len, d))
    out = np.empty_like(q)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    group = heads // kv_heads

    def run_ak():
        return ak.attention(q, k, v, num_kv_heads=kv_heads, out=out)

    if group == 1:
        torch_call = "sdpa"

        def run_torch():
            return sdpa(tq, tk, tv)
    elif has_gqa:
        torch_call = "sdpa(enable_gqa=True)"

        def run_torch():
            return sdpa(tq, tk, tv, enable_gqa=True)
    else:
        # Query head h reads kv head h // group in attnkern; repeat_interleave
        # lays the copies out in that same order. Done here, untimed.
        rk = tk.repeat_interleave(group, dim=1)
        rv = tv.repeat_interleave(group, dim=1)
        torch_call = f"sdpa on K/V repeat_interleave'd x{group} (untimed; reads {group}x)"

        def run_torch():
            return sdpa(tq, rk, rv)

    kv_bytes = kv_heads * kv_len * d * 4 * 2
    return Case("decode", [f"{heads}/{kv_heads}", kv_len], kv_bytes,
                run_ak, run_torch, ATTENTION_TOL, torch_call)


def verify_case(np, torch, ak, attnkern, rng, q_len, kv_len, has_gqa):
    heads, kv_heads, d = 32, 8, 128
    group = heads // kv_heads
    q = randn(np, rng, (1, heads, q_len, d))
    k = randn(np, rng, (1, kv_heads, kv_len, d))
    v = randn(np, rng, (1, kv_heads, kv_len, d))
    out = np.empty_like(q)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    # True where query i sees key j: j <= i + kv_len - q_len.
    shift = kv_len - q_len
    visible = (np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + shift)
    tmask = torch.from_numpy(visible)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run_ak():
        return ak.attention(q, k, v, num_kv_heads=kv_heads,
                            mask=attnkern.Mask.CAUSAL_BOTTOM_RIGHT, out=out)

    if has_gqa:
        torch_call = "sdpa(attn_mask=bool bottom-right, enable_gqa=True)"

        def run_torch():
            return sdpa(tq, tk, tv, attn_mask=tmask, enable_gqa=True)
    else:
        rk = tk.repeat_interleave(group, dim=1)
        rv = tv.repeat_interleave(group, dim=1)
        torch_call = (f"sdpa(attn_mask=bool bottom-right) on K/V repeat_interleave'd "
                      f"x{group} (untimed)")

        def run_torch():
            return sdpa(tq, rk, rv, attn_mask=tmask)

    flops = heads * 2.0 * (d + d) * float(visible.sum())
    return Case("verify", [f"{heads}/{kv_heads}", q_len, kv_len], flops,
                run_ak, run_torch, ATTENTION_TOL, torch_call)


def softmax_out_works(torch):
    """Whether torch.softmax takes out= (aten::softmax.int_out)."""
    x = torch.zeros(2, 3)
    y = torch.empty(2, 3)
    try:
        torch.softmax(x, -1, out=y)
    except (TypeError, RuntimeError):
        return False
    return True


def softmax_case(np, torch, ak, rng, rows, cols, use_out):
    x = randn(np, rng, (rows, cols))
    y = np.empty_like(x)
    tx = torch.from_numpy(x)
    ty = torch.empty(rows, cols, dtype=torch.float32)

    def run_ak():
        return ak.softmax(x, out=y)

    if use_out:
        torch_call = "torch.softmax(x, -1, out=y)"

        def run_torch():
            return torch.softmax(tx, -1, out=ty)
    else:
        torch_call = "torch.softmax(x, -1), allocating (this torch refuses out=)"

        def run_torch():
            return torch.softmax(tx, -1)

    return Case("softmax", [f"{rows}x{cols}"], 2.0 * rows * cols * 4,
                run_ak, run_torch, SOFTMAX_TOL, torch_call)


def sgemm_case(np, torch, ak, rng, m, n, k, trans_b):
    """ak_sgemm against torch.matmul(out=), both into a preallocated C. With
    trans_b, B is stored n x k (the weight layout, Q K^T) and torch gets the
    transposed view, which its BLAS takes without a copy."""
    a = randn(np, rng, (m, k))
    b = randn(np, rng, (n, k) if trans_b else (k, n))
    c = np.empty((m, n), dtype=np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    tbo = tb.t() if trans_b else tb
    tc = torch.empty(m, n, dtype=torch.float32)

    def run_ak():
        return ak.sgemm(a, b, out=c, trans_b=trans_b)

    def run_torch():
        return torch.matmul(ta, tbo, out=tc)

    return Case("sgemm", [f"{m}×{n}×{k}", "NT" if trans_b else "NN"], 2.0 * m * n * k,
                run_ak, run_torch, ATTENTION_TOL, "torch.matmul(a, b, out=c)")


def case_builders(np, torch, ak, attnkern, quick, tiny=False):
    """One (table, build()) per case, in report order; build() allocates the inputs,
    so only one case's buffers (up to ~1 GiB for decode at 32768) live at a
    time."""
    rng = np.random.default_rng(SEED)
    shapes = peer_shapes(quick, tiny)
    has_gqa = sdpa_has_enable_gqa(torch)
    use_out = softmax_out_works(torch)
    build = {
        "prefill": lambda d, L, causal: prefill_case(np, torch, ak, attnkern, rng, d, L, causal),
        "encoder": lambda b, h, L: encoder_case(np, torch, ak, rng, b, h, L),
        "decode": lambda kv_len, kv_heads: decode_case(np, torch, ak, rng, kv_len, kv_heads,
                                                       has_gqa),
        "verify": lambda q_len, kv_len: verify_case(np, torch, ak, attnkern, rng, q_len,
                                                      kv_len, has_gqa),
        "softmax": lambda rows, cols: softmax_case(np, torch, ak, rng, rows, cols, use_out),
        "sgemm": lambda m, n, k, tb: sgemm_case(np, torch, ak, rng, m, n, k, tb),
    }
    return [(table, lambda t=table, c=case: build[t](*c))
            for table in TABLES for case in shapes[table]]


# ------------------------------------------------------------------ measuring
def set_threads(torch, ak, t):
    torch.set_num_threads(t)
    ak.set_num_threads(t)
    got = (torch.get_num_threads(), ak.get_num_threads())
    if got != (t, t):
        progress(f"warning: asked for {t} threads, torch has {got[0]}, attnkern {got[1]}")


def measure(np, torch, ak, case, t, reps, min_time):
    """One row: warm-up calls that double as the agreement check, then the
    alternating samples. Returns a dict for the report."""
    set_threads(torch, ak, t)
    got = case.run_ak()
    time.sleep(SWITCH_PAUSE_S)
    ref = case.run_torch()
    err = rel_diff(np, got, ref.numpy())
    ok = err <= case.tol  # False for NaN too
    if not ok:
        progress(f"FAIL {case.label} threads {t}: max rel diff {err:.3g} > {case.tol:g}")
    t_ak, t_torch = median_times([case.run_ak, case.run_torch], reps, min_time)
    row = {"table": case.table, "cells": case.cells, "threads": t,
           "ak": case.work / t_ak, "torch": case.work / t_torch,
           "ratio": t_torch / t_ak, "err": err, "ok": ok,
           "torch_call": case.torch_call}
    unit = "GFLOP/s" if case.table in ("prefill", "encoder", "verify", "sgemm") else "GB/s"
    progress(f"{case.label} threads {t}: attnkern {row['ak'] / 1e9:.1f} {unit}, "
             f"torch {row['torch'] / 1e9:.1f} {unit}, ratio {row['ratio']:.2f}, "
             f"rel diff {err:.2g}{'' if ok else ' FAIL'}")
    return row


def run_all(np, torch, ak, attnkern, args):
    rows = []
    with torch.no_grad():
        for table, build in case_builders(np, torch, ak, attnkern, args.quick, args.tiny):
            if table not in args.tables:
                continue
            case = build()
            for t in args.threads:
                rows.append(measure(np, torch, ak, case, t, args.reps, args.min_time))
            del case  # free this case's buffers before the next allocates
    return rows


# -------------------------------------------------------------------- report
def table_lines(name, rows, thread_counts):
    title, lead, unit = TABLES[name]
    rows = [r for r in rows if r["table"] == name]
    if not rows:
        return []
    # A column for the torch call only where it differs between rows.
    calls = sorted({r["torch_call"] for r in rows})
    call_col = len(calls) > 1
    head = lead + ["threads", f"attnkern {unit}", f"torch {unit}",
                   "attnkern/torch", "max rel diff"] + (["torch call"] if call_col else [])
    lines = [f"## {title}", "", fmt_row(head), fmt_row(["---"] * len(head))]
    for r in rows:
        cells = r["cells"] + [r["threads"], f"{r['ak'] / 1e9:.1f}",
                              f"{r['torch'] / 1e9:.1f}", f"{r['ratio']:.2f}",
                              f"{r['err']:.1e}" + ("" if r["ok"] else " **FAIL**")]
        lines.append(fmt_row(cells + ([r["torch_call"]] if call_col else [])))
    for t in thread_counts:
        sel = [r for r in rows if r["threads"] == t]
        if not sel:
            continue
        cells = [f"**geomean {t} thr** ({len(sel)})"] + [""] * (len(lead) - 1)
        cells += [t, f"{geomean([r['ak'] for r in sel]) / 1e9:.1f}",
                  f"{geomean([r['torch'] for r in sel]) / 1e9:.1f}",
                  f"**{geomean([r['ratio'] for r in sel]):.2f}**", ""]
        lines.append(fmt_row(cells + ([""] if call_col else [])))
    if not call_col and calls[0]:
        lines += ["", f"torch call: {calls[0]}"]
    if name in ("prefill", "encoder", "decode", "verify"):
        lines += ["", "sdpa = torch.nn.functional.scaled_dot_product_attention"]
    lines.append("")
    return lines


def report(header, rows, thread_counts):
    lines = header + [""]
    for name in TABLES:
        lines += table_lines(name, rows, thread_counts)
    return "\n".join(lines + agreement_lines(rows, "torch")) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_peer_args(argv, "attnkern vs PyTorch CPU attention and softmax, same process.")
    np, torch, attnkern, ak = import_peers(args.lib)
    header = header_lines(np, torch, ak, command_line(argv))
    progress("\n".join(header))
    rows = run_all(np, torch, ak, attnkern, args)
    emit_report(report(header, rows, args.threads), args.out)
    failed = [r for r in rows if not r["ok"]]
    for r in failed:
        progress(f"FAIL {r['table']} {' '.join(map(str, r['cells']))} "
                 f"threads {r['threads']}: max rel diff {r['err']:.3g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

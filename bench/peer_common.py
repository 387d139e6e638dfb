"""What the same-process peer scripts (torch_peer.py, ort_peer.py) share:
argument types, the alternating timer, the agreement measure and the Markdown
helpers. Each script pairs attnkern with one peer library; both sides are
timed in turns in one process, on the same input buffers."""

import argparse
import math
import os
import shlex
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BINDING_DIR = os.path.join(HERE, "..", "capi", "python")

ATTENTION_TOL = 1e-4  # max |attnkern - peer| / max |peer|, attention and sgemm
SOFTMAX_TOL = 1e-5
SEED = 20240611

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

# The pause before each sample, letting the other runtime's spinning threads
# go to sleep (libgomp's default spin is well under this; so is ONNX Runtime's
# thread pool; Intel's libiomp5 spins for KMP_BLOCKTIME = 200 ms by default:
# run those with KMP_BLOCKTIME=0).
SWITCH_PAUSE_S = 0.05


# ----------------------------------------------------------------- arguments
def parse_threads(text):
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}")
    if not counts or any(t < 1 for t in counts):
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1: {text!r}")
    return list(dict.fromkeys(counts))  # in order, each once


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def parse_peer_args(argv, description, extra=None):
    """The options both scripts take (and a script's own, added by extra(parser));
    args.tables becomes a set of TABLES' keys."""
    p = argparse.ArgumentParser(description=description)
    if extra:
        extra(p)
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
    p.add_argument("--tiny", action="store_true",
                   help="odd small shapes in every table, for tests of the script itself")
    p.add_argument("--tables", default=",".join(TABLES),
                   help=f"comma list of the tables to run (default {','.join(TABLES)})")
    args = p.parse_args(argv)
    args.tables = set(t.strip() for t in args.tables.split(",") if t.strip())
    unknown = args.tables - set(TABLES)
    if unknown or not args.tables:
        p.error(f"--tables takes {', '.join(TABLES)}, not {sorted(unknown) or 'nothing'}")
    return args


def peer_shapes(quick, tiny=False):
    """The cases both scripts run, per table, in report order. tiny: a few odd
    small shapes per table (a test's: seconds, not minutes)."""
    if tiny:
        return {
            "prefill": [(64, 77, False), (128, 77, True)],
            "encoder": [(2, 3, 33)],
            "decode": [(300, 32), (300, 8)],
            "verify": [(4, 300)],
            "softmax": [(33, 65), (3, 1000)],
            "sgemm": [(65, 33, 17, False), (65, 33, 17, True)],
        }
    lengths = [1024] if quick else [1024, 4096]
    kv_lengths = [8192] if quick else [8192, 32768]
    gemms = [(512, 512, 512, False), (1024, 1024, 1024, False), (1024, 1024, 1024, True)]
    if not quick:
        gemms += [(2048, 2048, 2048, False), (4096, 4096, 128, True), (4096, 128, 4096, False)]
    return {
        "prefill": [(d, L, causal) for d in (64, 128) for L in lengths for causal in (False, True)],
        "encoder": [(8, 12, 128), (8, 12, 197), (4, 16, 384)],  # batch, heads, L (d 64)
        "decode": [(kv_len, kv_heads) for kv_len in kv_lengths for kv_heads in (32, 8)],
        "verify": [(4, 4096), (8, 4096)],  # q_len, kv_len
        "softmax": [(1024, 1024), (4096, 4096), (16, 32768)],
        "sgemm": gemms,  # m, n, k, trans_b
    }


def command_line(argv):
    """How this run was started, for the report's header."""
    line = " ".join(shlex.quote(a) for a in [sys.executable, sys.argv[0]] + argv)
    if os.environ.get("AK_LIBRARY"):
        line = f"AK_LIBRARY={shlex.quote(os.environ['AK_LIBRARY'])} {line}"
    return line


def agreement_lines(rows, peer):
    """The report's closing line on the agreement checks (rows with 'ok')."""
    failed = [r for r in rows if not r["ok"]]
    if failed:
        return [f"**FAIL**: {len(failed)} row(s) disagree beyond tolerance "
                f"(attention and sgemm {ATTENTION_TOL:g}, softmax {SOFTMAX_TOL:g})."]
    return [f"All timed outputs agree (max |attnkern - {peer}| / max |{peer}| <= "
            f"{ATTENTION_TOL:g} attention and sgemm, {SOFTMAX_TOL:g} softmax)."]


def emit_report(text, out):
    print(text, end="", flush=True)
    if out:
        with open(out, "w") as f:
            f.write(text)
        progress(f"wrote {out}")


def load_attnkern(lib_path, script):
    """The ctypes binding module (from the source tree, so that it matches the
    library being measured) and the loaded library, or exit with the reason."""
    sys.path.insert(0, BINDING_DIR)
    import attnkern
    try:
        return attnkern, attnkern.load(lib_path)
    except OSError as e:
        sys.exit(f"{script}: cannot load libattnkern: {e}\n"
                 "pass --lib build-rel/libattnkern.so or set AK_LIBRARY")


# --------------------------------------------------------------- environment
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "unknown"


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return "n/a"


# --------------------------------------------------------------------- cases
class CaseBase:
    """One shape: its table, the row's leading cells, the work per call (flops
    or bytes), attnkern's call (returning its output; its closure holds the
    input buffers) and the agreement tolerance."""

    def __init__(self, table, cells, work, run_ak, tol):
        self.table = table
        self.cells = cells
        self.work = work
        self.run_ak = run_ak
        self.tol = tol

    @property
    def label(self):
        return f"{self.table} " + " ".join(str(c) for c in self.cells)


def randn(np, rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


# -------------------------------------------------------------------- timing
def time_sample(fn, min_time):
    """Mean seconds per call over as many calls as last >= min_time."""
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls


def median_times(fns, reps, min_time):
    """Median seconds per call of each fn, sampled in turn (A, B, A, B, ...);
    each sample follows a pause so the previous runtime's threads stop spinning."""
    samples = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            time.sleep(SWITCH_PAUSE_S)
            samples[i].append(time_sample(fn, min_time))
    return [statistics.median(s) for s in samples]


def rel_diff(np, got, ref):
    """max |got - ref| / max |ref| (NaN anywhere gives NaN, which fails)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    diff = float(np.max(np.abs(got - ref)))
    scale = float(np.max(np.abs(ref)))
    return diff / scale if scale > 0 else diff


def progress(text):
    print(text, file=sys.stderr, flush=True)


# -------------------------------------------------------------------- report
def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def fmt_row(cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"

"""What the same-process peer scripts (torch_peer.py, ort_peer.py) share:
argument types, the alternating timer, the agreement measure and the Markdown
helpers. Each script pairs attnkern with one peer library; both sides are
timed in turns in one process, on the same input buffers."""

import argparse
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BINDING_DIR = os.path.join(HERE, "..", "capi", "examples", "python")

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


def load_attnkern(lib_path, script):
    """The ctypes binding module and the loaded library, or exit with the reason."""
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

"""What the three walkthrough examples share: the library, the printing of a
step (the same layout as the C examples, which check_c_output.py parses) and
the check of a step against its float64 value."""

import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The attnkern package from its source directory, capi/python (installed with
# pip it would be found without this).
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import attnkern  # noqa: E402

# fp32 results against float64 ones of unit scale: a few ulps of 1.0, with
# room for sums of a few dozen products (the design's attention bound).
TOLERANCE = 1e-5


def load():
    """The library named by $AK_LIBRARY, else the system's."""
    return attnkern.load()


def ptr(x):
    """A float32 array's address, for the C functions that have no wrapper."""
    assert x.dtype == np.float32 and x.flags.c_contiguous
    return x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def show(title, matrix, labels=None):
    """Prints a step as '-- title [rows x cols]', then one labelled row a line."""
    matrix = np.atleast_2d(matrix)
    rows, cols = matrix.shape
    print(f"-- {title} [{rows} x {cols}]")
    for r in range(rows):
        label = labels[r] if labels is not None else str(r)
        print(f"{label:<12}" + "".join(f"{x:11.6f}" for x in matrix[r]))


def check(title, got, want, tolerance=TOLERANCE):
    """Fails unless the library's fp32 step equals the float64 one."""
    err = float(np.max(np.abs(np.asarray(got, np.float64) - want)))
    if not err <= tolerance:
        raise AssertionError(f"{title}: max |attnkern - float64| = {err:.3g} > {tolerance:g}")
    print(f"   max |attnkern - numpy float64| = {err:.1e}")


def softmax64(scores):
    """Row softmax in float64, the maximum subtracted first as the library does."""
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)

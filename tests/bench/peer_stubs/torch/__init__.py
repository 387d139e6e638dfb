"""A stand-in for the torch calls bench/torch_peer.py makes, on numpy arrays
(stub_math), so that the script's cases, agreement check and report run
without torch."""

import contextlib
import types

import numpy as np

import stub_math

__version__ = "stand-in"
float32 = np.float32
no_grad = contextlib.nullcontext
__config__ = types.SimpleNamespace(
    parallel_info=lambda: "ATen/Parallel:\n\tOMP_NUM_THREADS : [not set]\nstand-in backend")
_threads = [1]


class Tensor:
    def __init__(self, array):
        self.array = array

    def numpy(self):
        return self.array

    def t(self):
        return Tensor(self.array.T)

    def repeat_interleave(self, repeats, dim):
        return Tensor(np.repeat(self.array, repeats, axis=dim))


def from_numpy(array):
    return Tensor(array)


def zeros(*shape):
    return Tensor(np.zeros(shape, dtype=np.float32))


def empty(*shape, dtype=None):
    return Tensor(np.empty(shape, dtype=np.float32))


def softmax(x, dim, out=None):
    y = stub_math.softmax(x.array, dim)
    if out is None:
        return Tensor(y)
    out.array[...] = y
    return out


def matmul(a, b, out=None):
    out.array[...] = stub_math.matmul(a.array, b.array)
    return out


def set_num_threads(n):
    _threads[0] = n


def get_num_threads():
    return _threads[0]


from . import backends, nn  # noqa: E402,F401

"""ctypes binding for attnkern, attention kernels behind a flat C ABI.

    import numpy as np, attnkern
    ak = attnkern.load()                       # $AK_LIBRARY, else the installed one
    c = ak.sgemm(a, b)                         # a, b: float32, C-contiguous
    p = ak.softmax(c)
    q = ak.softmax_axis(c, axis=0)             # down the columns

Arrays must be numpy float32 and C-contiguous (``np.ascontiguousarray(x,
dtype=np.float32)`` makes one); anything else is a TypeError or ValueError
raised here, before the library is called. A non-OK status from the library
raises AttnkernError carrying the status and ak_last_error()'s text.

K/V caches may be stored in half precision: ``ak.convert(x, attnkern.BF16)``
rounds float32 to bf16 (numpy uint16 bit patterns; f16 is numpy float16),
``ak.kv_cache_store`` writes new keys or values into a paged pool, and
``ak.attention`` takes f16/bf16 K/V and block tables, softcap, ALiBi slopes,
sink logits and packed variable-length batches (see attnkern_kv.py).
``ak.rope`` rotates q or k in place and ``ak.embedding`` looks tokens up
(see attnkern_rope.py).

numpy is needed only by the array wrappers: ``load()``, the version, ISA and
thread calls, and the raw functions on ``Library.lib`` work without it.
"""

import contextlib
import ctypes

# abi.py holds the declarations, kv.py storage types, caches and attention,
# rope.py rotary and token embeddings, blocks.py the batched products and the
# worked examples' building blocks, _loader.py the search for the library.
from ._loader import SONAME, open_library
from .abi import (ABI_VERSION, ATTENTION_DESC_SIZE_0_1, BF16, F16, F32,  # noqa: F401
                  OPTIONAL_PROTOTYPES, PROTOTYPES, AttentionDesc, AttnkernError, DType, Mask,
                  RopeStyle, SgemmBlocking, Status, Trans)
from .blocks import BlocksMixin
from .kv import KVMixin, _numpy
from .rope import RopeMixin

__all__ = ["Status", "Trans", "Mask", "DType", "RopeStyle", "F32", "F16", "BF16",
           "AttnkernError", "AttentionDesc", "ATTENTION_DESC_SIZE_0_1", "SgemmBlocking", "Library",
           "load", "ISAS", "ABI_VERSION", "SONAME"]

# Every name ak_set_isa knows, best first; which of them work depends on the CPU.
ISAS = ("avx512", "avx2", "sse2", "neon", "scalar")

_fp = ctypes.POINTER(ctypes.c_float)


def _ld(cols):
    # Like BLAS, a leading dimension must be >= max(1, row length), even for an
    # empty matrix whose rows have length 0.
    return max(1, cols)


class Library(KVMixin, RopeMixin, BlocksMixin):
    """One loaded libattnkern. ``lib`` is the raw ctypes CDLL, prototypes set.
    The storage-type, cache and attention wrappers come from KVMixin, the
    rotary and token embeddings from RopeMixin, the batched products and the
    worked examples' building blocks from BlocksMixin."""

    def __init__(self, path=None):
        self.path, self.lib = open_library(path)
        self.missing = set()  # 0.2 functions a 0.1 library lacks
        for name, (restype, argtypes) in {**PROTOTYPES, **OPTIONAL_PROTOTYPES}.items():
            try:
                fn = getattr(self.lib, name)
            except AttributeError:
                if name not in OPTIONAL_PROTOTYPES:
                    raise
                self.missing.add(name)
                continue
            fn.restype = restype
            fn.argtypes = argtypes
        abi = self.lib.ak_abi_version()
        if abi != ABI_VERSION:
            raise OSError(f"{self.path} has attnkern ABI {abi}; this module "
                          f"speaks ABI {ABI_VERSION}")

    # ------------------------------------------------------------ errors
    def check(self, status, function="attnkern"):
        """Raise AttnkernError unless status is AK_OK. Must run on the thread
        that made the call: ak_last_error() is per thread."""
        if status != Status.OK:
            detail = self.lib.ak_last_error().decode("utf-8", "replace")
            text = self.lib.ak_status_string(status).decode("utf-8", "replace")
            raise AttnkernError(function, status, text, detail)

    def has(self, name):
        """Whether the loaded library defines the C function name (the 0.2
        functions are missing from a 0.1 library)."""
        return name not in self.missing and hasattr(self.lib, name)

    def status_string(self, status):
        return self.lib.ak_status_string(int(status)).decode()

    # ----------------------------------------------------- configuration
    @property
    def version(self):
        return self.lib.ak_version().decode()

    @property
    def abi_version(self):
        return self.lib.ak_abi_version()

    def get_isa(self):
        return self.lib.ak_get_isa().decode()

    def set_isa(self, name=None):
        """Force an instruction set; None or "auto" picks the best one."""
        arg = None if name is None else name.encode()
        self.check(self.lib.ak_set_isa(arg), "ak_set_isa")

    def isa_supported(self, name):
        """Whether set_isa(name) would succeed here; changes nothing."""
        return self.lib.ak_isa_supported(None if name is None else name.encode()) == 1

    def available_isas(self):
        """The names in ISAS that set_isa accepts on this machine, best first.
        Changes nothing: the instruction set in use stays as it is (also for
        other threads running kernels meanwhile)."""
        return [name for name in ISAS if self.isa_supported(name)]

    def set_num_threads(self, n):
        self.check(self.lib.ak_set_num_threads(n), "ak_set_num_threads")

    def get_num_threads(self):
        """The thread count a call from this thread would use now."""
        return self.lib.ak_get_num_threads()

    def set_num_threads_local(self, n):
        """Threads per call for calls from the calling thread only (0 = follow
        set_num_threads again): worker threads of an engine's own set 1."""
        self.check(self.lib.ak_set_num_threads_local(n), "ak_set_num_threads_local")

    def get_num_threads_local(self):
        """The calling thread's own count (0 if it follows the process's)."""
        return self.lib.ak_get_num_threads_local()

    @contextlib.contextmanager
    def threads_local(self, n):
        """`with ak.threads_local(1): ...` runs the block's calls from this
        thread on n threads, then puts back the count this thread had
        before (also when the block raises)."""
        before = self.get_num_threads_local()
        self.set_num_threads_local(n)
        try:
            yield
        finally:
            self.set_num_threads_local(before)

    def release_scratch(self):
        """Frees the scratch buffers every thread keeps between calls."""
        self.lib.ak_release_scratch()

    # ------------------------------------------------------------ arrays
    @staticmethod
    def _array(x, name, ndim=None, writable=False, dtype="float32", contiguous=True):
        """x checked as an argument: a numpy array of dtype (None: the caller
        checks it), C-contiguous, or with contiguous=False its last axis only
        (a strided view, its strides passed on in elements)."""
        np = _numpy()
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a numpy.ndarray, not {type(x).__name__}")
        if dtype is not None and x.dtype != np.dtype(dtype):
            raise TypeError(f"{name} must have dtype {dtype}, not {x.dtype}")
        if ndim is not None and x.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D, got shape {x.shape}")
        if contiguous and not x.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous "
                             "(use numpy.ascontiguousarray)")
        if not contiguous and x.ndim and x.shape[-1] > 1 and x.strides[-1] != x.itemsize:
            raise ValueError(f"{name}'s last axis must be contiguous")
        if not x.flags.aligned:
            # A float at an address not a multiple of 4 is undefined
            # behaviour in C (numpy.frombuffer at an odd offset makes one).
            raise ValueError(f"{name} is not aligned to {x.itemsize} bytes (pass a copy)")
        if writable and not x.flags.writeable:
            raise ValueError(f"{name} must be writable")
        return x

    @staticmethod
    def _ptr(x):
        return x.ctypes.data_as(_fp)

    @staticmethod
    def _disjoint(out, **inputs):
        """Raises ValueError where out shares memory with an input: the C
        API does not detect aliasing, and would compute garbage. (All are
        C-contiguous, so overlapping bounds mean shared elements.)"""
        np = _numpy()
        for name, x in inputs.items():
            if np.may_share_memory(out, x):
                raise ValueError(f"out overlaps {name}")

    def sgemm(self, a, b, out=None, *, trans_a=False, trans_b=False,
              alpha=1.0, beta=0.0):
        """alpha * op(a) @ op(b) + beta * out, into out (allocated when None)."""
        np = _numpy()
        a = self._array(a, "a", 2)
        b = self._array(b, "b", 2)
        m, k = a.shape[::-1] if trans_a else a.shape
        kb, n = b.shape[::-1] if trans_b else b.shape
        if k != kb:
            raise ValueError(f"inner dimensions differ: op(a) is {m}x{k}, "
                             f"op(b) is {kb}x{n}")
        if out is None:
            if beta != 0.0:
                raise ValueError("beta != 0 needs an out array to accumulate into")
            out = np.empty((m, n), dtype=np.float32)
        out = self._array(out, "out", 2, writable=True)
        if out.shape != (m, n):
            raise ValueError(f"out has shape {out.shape}, expected {(m, n)}")
        self._disjoint(out, a=a, b=b)
        st = self.lib.ak_sgemm(int(bool(trans_a)), int(bool(trans_b)), m, n, k,
                               alpha, self._ptr(a), _ld(a.shape[1]), self._ptr(b),
                               _ld(b.shape[1]), beta, self._ptr(out), _ld(n))
        self.check(st, "ak_sgemm")
        return out

    def _rowwise(self, fn, name, x, out):
        np = _numpy()
        x = self._array(x, "x")
        if x.ndim == 0:
            raise ValueError("x must have at least one axis")
        if out is None:
            out = np.empty_like(x)
        out = self._array(out, "out", writable=True)
        if out.shape != x.shape:
            raise ValueError(f"out has shape {out.shape}, x has {x.shape}")
        if out.ctypes.data != x.ctypes.data:  # in place is fine, a partial overlap is not
            self._disjoint(out, x=x)
        cols = x.shape[-1]
        rows = x.size // cols if cols else 0
        ld = _ld(cols)
        self.check(fn(rows, cols, self._ptr(x), ld, self._ptr(out), ld), name)
        return out

    def softmax(self, x, out=None):
        """Softmax over the last axis; out may be x (in place)."""
        return self._rowwise(self.lib.ak_softmax, "ak_softmax", x, out)

    def log_softmax(self, x, out=None):
        """log(softmax(x)) over the last axis; out may be x."""
        return self._rowwise(self.lib.ak_log_softmax, "ak_log_softmax", x, out)

    def softmax_axis(self, x, axis=-1, out=None):
        """Softmax along one axis of a contiguous array (ak_softmax_axis, as
        torch.softmax(x, dim) does); out may be x (in place)."""
        np = _numpy()
        x = self._array(x, "x")
        if x.ndim == 0:
            raise ValueError("x must have at least one axis")
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"axis {axis} is out of range for {x.ndim} dimensions")
        axis %= x.ndim
        if out is None:
            out = np.empty_like(x)
        out = self._array(out, "out", writable=True)
        if out.shape != x.shape:
            raise ValueError(f"out has shape {out.shape}, x has {x.shape}")
        if out.ctypes.data != x.ctypes.data:
            self._disjoint(out, x=x)
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
        st = self.lib.ak_softmax_axis(outer, x.shape[axis], inner, self._ptr(x), self._ptr(out))
        self.check(st, "ak_softmax_axis")
        return out


def load(path=None):
    """Load libattnkern from path, else $AK_LIBRARY, else the copy inside this
    package, else the system loader's libattnkern.so.1, else pkg-config's
    libdir; OSError saying what was tried when none loads."""
    return Library(path)

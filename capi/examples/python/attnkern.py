"""ctypes binding for attnkern, the fp32 attention kernels behind a flat C ABI.

    import numpy as np, attnkern
    ak = attnkern.load()                       # $AK_LIBRARY, else the system's
    c = ak.sgemm(a, b)                         # a, b: float32, C-contiguous
    p = ak.softmax(c)
    q = ak.softmax_axis(c, axis=0)             # down the columns

Arrays must be numpy float32 and C-contiguous (``np.ascontiguousarray(x,
dtype=np.float32)`` makes one); anything else is a TypeError or ValueError
raised here, before the library is called. A non-OK status from the library
raises AttnkernError carrying the status and ak_last_error()'s text.

numpy is needed only by the array wrappers: ``load()``, the version, ISA and
thread calls, and the raw functions on ``Library.lib`` work without it.
"""

import contextlib
import ctypes
import ctypes.util
import enum
import os

__all__ = ["Status", "Trans", "Mask", "AttnkernError", "AttentionDesc",
           "Library", "load", "ISAS", "ABI_VERSION"]

# The AK_ABI_VERSION this module was written against.
ABI_VERSION = 1
# Every name ak_set_isa knows, best first; which of them work depends on the CPU.
ISAS = ("avx512", "avx2", "sse2", "neon", "scalar")


class Status(enum.IntEnum):
    OK = 0
    ERR_NULL_POINTER = 1
    ERR_BAD_SHAPE = 2
    ERR_BAD_STRIDE = 3
    ERR_BAD_ARGUMENT = 4
    ERR_OVERFLOW = 5
    ERR_OUT_OF_MEMORY = 6
    ERR_UNSUPPORTED = 7
    ERR_INTERNAL = 8


class Trans(enum.IntEnum):
    NO_TRANS = 0
    TRANS = 1


class Mask(enum.IntEnum):
    NONE = 0
    CAUSAL_TOP_LEFT = 1
    CAUSAL_BOTTOM_RIGHT = 2


class AttnkernError(RuntimeError):
    """A call returned a status other than AK_OK.

    ``status`` is the Status (or the raw int for a value this module does not
    know), ``detail`` the library's ak_last_error() text."""

    def __init__(self, function, status, status_text, detail):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.function = function
        self.status = status
        self.detail = detail
        super().__init__(f"{function}: {status_text} ({detail})" if detail
                         else f"{function}: {status_text}")


_i64 = ctypes.c_int64
_f32 = ctypes.c_float
_fp = ctypes.POINTER(ctypes.c_float)
# C enums are passed as int (4 bytes on every platform attnkern targets).
_enum = ctypes.c_int


class AttentionDesc(ctypes.Structure):
    """ak_attention_desc; fill it after Library.attention_desc() initialised it."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("batch", _i64), ("num_heads", _i64), ("num_kv_heads", _i64),
        ("q_len", _i64), ("kv_len", _i64),
        ("head_dim", _i64), ("head_dim_v", _i64),
        ("scale", ctypes.c_float),
        ("mask", ctypes.c_int32),
        ("window_left", _i64), ("window_right", _i64),
        ("bias", _fp), ("bias_strides", _i64 * 3),
        ("kv_lens", ctypes.POINTER(ctypes.c_int32)),
        ("q_strides", _i64 * 3), ("k_strides", _i64 * 3),
        ("v_strides", _i64 * 3), ("o_strides", _i64 * 3),
        ("lse", _fp), ("probs", _fp),
    ]


# name: (restype, argtypes). Every argument type is spelled out: without
# argtypes ctypes would pass Python floats as double and ints as C int.
_PROTOTYPES = {
    "ak_status_string": (ctypes.c_char_p, [_enum]),
    "ak_last_error": (ctypes.c_char_p, []),
    "ak_version": (ctypes.c_char_p, []),
    "ak_abi_version": (ctypes.c_int, []),
    "ak_get_isa": (ctypes.c_char_p, []),
    "ak_isa_supported": (ctypes.c_int, [ctypes.c_char_p]),
    "ak_set_isa": (_enum, [ctypes.c_char_p]),
    "ak_set_num_threads": (_enum, [ctypes.c_int]),
    "ak_get_num_threads": (ctypes.c_int, []),
    "ak_set_num_threads_local": (_enum, [ctypes.c_int]),
    "ak_get_num_threads_local": (ctypes.c_int, []),
    "ak_release_scratch": (None, []),
    "ak_sgemm": (_enum, [_enum, _enum, _i64, _i64, _i64, _f32, _fp, _i64,
                         _fp, _i64, _f32, _fp, _i64]),
    "ak_sgemm_strided_batched": (_enum, [_enum, _enum, _i64, _i64, _i64, _f32,
                                         _fp, _i64, _i64, _fp, _i64, _i64,
                                         _f32, _fp, _i64, _i64, _i64]),
    "ak_softmax": (_enum, [_i64, _i64, _fp, _i64, _fp, _i64]),
    "ak_log_softmax": (_enum, [_i64, _i64, _fp, _i64, _fp, _i64]),
    "ak_softmax_axis": (_enum, [_i64, _i64, _i64, _fp, _fp]),
    "ak_attention_desc_init": (None, [ctypes.POINTER(AttentionDesc)]),
    "ak_attention": (_enum, [ctypes.POINTER(AttentionDesc), _fp, _fp, _fp, _fp]),
    "ak_position_encoding": (_enum, [_i64, _i64, _f32, _fp]),
    "ak_mha_self_attention": (_enum, [_i64, _i64, _i64, _i64, _i64, _fp, _fp,
                                      _fp, _fp, _enum, _fp]),
}


def _numpy():
    try:
        import numpy
    except ImportError as e:  # pragma: no cover - depends on the interpreter
        raise ImportError("attnkern's array wrappers need numpy") from e
    return numpy


def _ld(cols):
    # Like BLAS, a leading dimension must be >= max(1, row length), even for an
    # empty matrix whose rows have length 0.
    return max(1, cols)


def _find_library(path=None):
    if path:
        return str(path)
    env = os.environ.get("AK_LIBRARY")
    if env:
        return env
    found = ctypes.util.find_library("attnkern")
    if found:
        return found
    raise OSError("libattnkern not found: pass its path to attnkern.load() or "
                  "set AK_LIBRARY=/path/to/libattnkern.so")


class Library:
    """One loaded libattnkern. ``lib`` is the raw ctypes CDLL, prototypes set."""

    def __init__(self, path=None):
        self.path = _find_library(path)
        self.lib = ctypes.CDLL(self.path)
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(self.lib, name)
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
    def _array(x, name, ndim=None, writable=False):
        np = _numpy()
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a numpy.ndarray, not {type(x).__name__}")
        if x.dtype != np.float32:
            raise TypeError(f"{name} must have dtype float32, not {x.dtype}")
        if ndim is not None and x.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D, got shape {x.shape}")
        if not x.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous "
                             "(use numpy.ascontiguousarray)")
        if not x.flags.aligned:
            # A float at an address not a multiple of 4 is undefined
            # behaviour in C (numpy.frombuffer at an odd offset makes one).
            raise ValueError(f"{name} is not aligned to 4 bytes (pass a copy)")
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

    def attention_desc(self, **fields):
        """A fresh ak_attention_desc (ak_attention_desc_init), fields set.
        Pointer fields (bias, kv_lens, lse, probs) hold raw addresses: keep the
        arrays they point into alive (and unmoved) until ak_attention returns."""
        d = AttentionDesc()
        self.lib.ak_attention_desc_init(ctypes.byref(d))
        for key, value in fields.items():
            if key not in AttentionDesc._fields_names:
                raise TypeError(f"ak_attention_desc has no field {key!r}")
            setattr(d, key, value)
        return d

    def attention(self, q, k, v, *, num_kv_heads=None, mask=Mask.NONE,
                  scale=0.0, out=None):
        """softmax(scale * q k^T, masked) v for contiguous q [b, h, q_len, d],
        k [b, hk, kv_len, d], v [b, hk, kv_len, dv]."""
        np = _numpy()
        q = self._array(q, "q", 4)
        k = self._array(k, "k", 4)
        v = self._array(v, "v", 4)
        b, h, q_len, d = q.shape
        hk = k.shape[1] if num_kv_heads is None else num_kv_heads
        kv_len, dv = k.shape[2], v.shape[3]
        if k.shape != (b, hk, kv_len, d):
            raise ValueError(f"k has shape {k.shape}, expected {(b, hk, kv_len, d)}")
        if v.shape != (b, hk, kv_len, dv):
            raise ValueError(f"v has shape {v.shape}, expected {(b, hk, kv_len, dv)}")
        if out is None:
            out = np.empty((b, h, q_len, dv), dtype=np.float32)
        out = self._array(out, "out", 4, writable=True)
        if out.shape != (b, h, q_len, dv):
            raise ValueError(f"out has shape {out.shape}, expected {(b, h, q_len, dv)}")
        self._disjoint(out, q=q, k=k, v=v)
        desc = self.attention_desc(batch=b, num_heads=h, num_kv_heads=hk,
                                   q_len=q_len, kv_len=kv_len, head_dim=d,
                                   head_dim_v=dv, scale=scale, mask=int(mask))
        st = self.lib.ak_attention(ctypes.byref(desc), self._ptr(q), self._ptr(k),
                                   self._ptr(v), self._ptr(out))
        self.check(st, "ak_attention")
        return out


AttentionDesc._fields_names = frozenset(name for name, _ in AttentionDesc._fields_)


def load(path=None):
    """Load libattnkern from path, else $AK_LIBRARY, else find_library."""
    return Library(path)

"""Rotary position embeddings and token embedding lookup for the ctypes
binding: the part of attnkern.Library that knows ak_rope_style, ak_rope and
ak_embedding.

ak_rope rotates x in place: x is a float32 [batch, seq_len, num_heads,
head_dim] array whose last axis is contiguous, so a strided view works (say
q = qkv[:, :, 0] of a fused [batch, seq, 3, heads, head_dim] projection
output); its strides become ak_rope's [batch, seq, head] strides.
"""

import ctypes

from .abi import RopeStyle
from .kv import _elem_strides, _numpy

_i32p = ctypes.POINTER(ctypes.c_int32)


def _row_stride(ld, rows, dim):
    """The leading dimension to pass for a [rows, dim] view whose row stride
    is ld elements: numpy's own, except for a view of at most one row, whose
    stride is meaningless (the library checks ld >= dim, so a broadcast or
    overlapping view of several rows is refused there, not passed on)."""
    return ld if rows > 1 else max(dim, 1)


class RopeMixin:
    """ak_rope and ak_embedding for attnkern.Library."""

    def rope(self, x, positions=None, *, style=RopeStyle.NEOX, rotary_dim=0, theta=10000.0,
             inv_freq=None):
        """Rotates the first rotary_dim entries (0: all) of each of x's head
        rows in place by positions[b, s] * inv_freq[i] (inv_freq None:
        theta^(-2i/rotary_dim)); positions is int32 [batch, seq_len] or None
        (0 .. seq_len-1). Returns x."""
        x = self._array(x, "x", 4, writable=True, contiguous=False)
        b, s, h, d = x.shape
        strides = _elem_strides(x, "x", 3)
        if not any(strides) and b * s * h > 1:
            raise ValueError("x repeats one row along every axis: it cannot be written")
        pos = None
        if positions is not None:
            pos = self._array(positions, "positions", 2, dtype="int32")
            if pos.shape != (b, s):
                raise ValueError(f"positions has shape {pos.shape}, expected {(b, s)}")
        freq = None
        if inv_freq is not None:
            freq = self._array(inv_freq, "inv_freq", 1)
            half = (rotary_dim or d) // 2
            if freq.shape[0] < half:
                raise ValueError(f"inv_freq has {freq.shape[0]} entries; {half} are needed")
        self._require("ak_rope")
        status = self.lib.ak_rope(
            b, s, h, d, int(rotary_dim), int(RopeStyle(style)),
            None if pos is None else pos.ctypes.data_as(_i32p), float(theta),
            None if freq is None else self._ptr(freq), self._ptr(x),
            (ctypes.c_int64 * 3)(*strides))
        self.check(status, "ak_rope")
        return x

    def embedding(self, ids, table, out=None):
        """table[ids[t]] for each id (int32, 1-D), a zero row where an id is
        negative (an unknown token), into out [len(ids), dim] (allocated when
        None; its rows may be strided). table is float32 [vocab_size, dim]
        with contiguous rows. An id >= vocab_size raises AttnkernError and
        writes nothing."""
        np = _numpy()
        ids = self._array(ids, "ids", 1, dtype="int32")
        table = self._array(table, "table", 2, contiguous=False)
        vocab, dim = table.shape
        if out is None:
            out = np.empty((ids.shape[0], dim), dtype=np.float32)
        out = self._array(out, "out", 2, writable=True, contiguous=False)
        if out.shape != (ids.shape[0], dim):
            raise ValueError(f"out has shape {out.shape}, expected {(ids.shape[0], dim)}")
        self._disjoint(out, ids=ids, table=table)
        (ld_table,) = _elem_strides(table, "table", 1)
        (ld_out,) = _elem_strides(out, "out", 1)
        self._require("ak_embedding")
        status = self.lib.ak_embedding(ids.shape[0], ids.ctypes.data_as(_i32p), vocab, dim,
                                       self._ptr(table), _row_stride(ld_table, vocab, dim),
                                       self._ptr(out), _row_stride(ld_out, ids.shape[0], dim))
        self.check(status, "ak_embedding")
        return out

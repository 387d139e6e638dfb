"""Batched products, the SGEMM blocking and the worked examples' building
blocks (position encoding, multi-head self-attention) for the ctypes
binding: the part of attnkern.Library that wraps ak_sgemm_strided_batched,
ak_sgemm_get_blocking, ak_position_encoding and ak_mha_self_attention."""

import ctypes

from .abi import Mask, SgemmBlocking
from .kv import _numpy

_fp = ctypes.POINTER(ctypes.c_float)


class BlocksMixin:
    """Needs self._array, self._ptr, self._disjoint, self.check and self.lib
    (attnkern.Library)."""

    def sgemm_batched(self, a, b, out=None, *, trans_a=False, trans_b=False,
                      alpha=1.0, beta=0.0):
        """alpha * op(a[i]) @ op(b[i]) + beta * out[i] for every i, in one
        ak_sgemm_strided_batched call. a and b are 3-D [batch, rows, cols],
        or 2-D to use one matrix for every product (stride 0); out is
        [batch, m, n] (allocated when None)."""
        np = _numpy()
        a = self._array(a, "a")
        b = self._array(b, "b")
        if a.ndim not in (2, 3) or b.ndim not in (2, 3):
            raise ValueError(f"a and b must be 2-D or 3-D, got {a.shape} and {b.shape}")
        batches = {x.shape[0] for x in (a, b) if x.ndim == 3}
        if len(batches) > 1:
            raise ValueError(f"a and b have different batch sizes: {a.shape}, {b.shape}")
        batch = batches.pop() if batches else 1
        am, ak_ = a.shape[-2:]
        bk, bn = b.shape[-2:]
        m, k = (ak_, am) if trans_a else (am, ak_)
        kb, n = (bn, bk) if trans_b else (bk, bn)
        if k != kb:
            raise ValueError(f"inner dimensions differ: op(a) is {m}x{k}, op(b) is {kb}x{n}")
        if out is None:
            if beta != 0.0:
                raise ValueError("beta != 0 needs an out array to accumulate into")
            out = np.empty((batch, m, n), dtype=np.float32)
        out = self._array(out, "out", 3, writable=True)
        if out.shape != (batch, m, n):
            raise ValueError(f"out has shape {out.shape}, expected {(batch, m, n)}")
        self._disjoint(out, a=a, b=b)

        def stride(x):
            return x.shape[1] * x.shape[2] if x.ndim == 3 else 0

        st = self.lib.ak_sgemm_strided_batched(
            int(bool(trans_a)), int(bool(trans_b)), m, n, k, alpha,
            self._ptr(a), max(1, a.shape[-1]), stride(a),
            self._ptr(b), max(1, b.shape[-1]), stride(b),
            beta, self._ptr(out), max(1, n), m * n, batch)
        self.check(st, "ak_sgemm_strided_batched")
        return out

    def sgemm_blocking(self):
        """The SGEMM blocking of the instruction set in use, as a dict
        (mr, nr, mc, kc, nc, skinny_m, kc_narrow, narrow_n)."""
        blk = SgemmBlocking()
        self.check(self.lib.ak_sgemm_get_blocking(ctypes.byref(blk)), "ak_sgemm_get_blocking")
        return {name: getattr(blk, name) for name, _ in SgemmBlocking._fields_}

    def position_encoding(self, max_len, dim, base=10000.0):
        """The sinusoidal position encoding, float32 [max_len, dim]:
        out[k, 2i] = sin(k / base^(2i/dim)), out[k, 2i+1] = cos(...)."""
        np = _numpy()
        out = np.empty((max_len, dim), dtype=np.float32)
        self.check(self.lib.ak_position_encoding(max_len, dim, base, self._ptr(out)),
                   "ak_position_encoding")
        return out

    def mha_self_attention(self, x, w_q, w_k, w_v, mask=Mask.NONE):
        """Multi-head self-attention with per-head projections: x [n_tokens,
        d_model], w_q and w_k [num_heads, d_model, d_k], w_v [num_heads,
        d_model, d_v]; returns [num_heads, n_tokens, d_v]."""
        np = _numpy()
        x = self._array(x, "x", 2)
        w_q = self._array(w_q, "w_q", 3)
        w_k = self._array(w_k, "w_k", 3)
        w_v = self._array(w_v, "w_v", 3)
        n_tokens, d_model = x.shape
        heads, _, d_k = w_q.shape
        d_v = w_v.shape[2]
        for name, w, width in (("w_q", w_q, d_k), ("w_k", w_k, d_k), ("w_v", w_v, d_v)):
            if w.shape != (heads, d_model, width):
                raise ValueError(f"{name} has shape {w.shape}, expected "
                                 f"{(heads, d_model, width)}")
        out = np.empty((heads, n_tokens, d_v), dtype=np.float32)
        st = self.lib.ak_mha_self_attention(n_tokens, d_model, heads, d_k, d_v, self._ptr(x),
                                            self._ptr(w_q), self._ptr(w_k), self._ptr(w_v),
                                            int(mask), self._ptr(out))
        self.check(st, "ak_mha_self_attention")
        return out

"""Storage types, K/V caches and attention for the ctypes binding: the part of
attnkern.Library that knows ak_dtype, ak_convert, ak_kv_cache_store and
ak_attention (fp32, f16 or bf16 K/V, contiguous or paged).

numpy has no bfloat16, so bf16 values travel as np.uint16 bit patterns; a
uint16 array can as well hold f16 bits, so wherever one is passed its DType
must be given (``k_type=attnkern.BF16``). float32 arrays are F32, float16
arrays F16.

A pool of paged K/V (or a cache ak_kv_cache_store writes into) is a 4-D array
[num_pages, num_kv_heads, page_size, dim]; a strided view is fine (say k =
kv[:, 0] of a [num_pages, 2, heads, page_size, dim] pool): its strides become
the page strides. With page strides given explicitly the pool is instead a
C-contiguous buffer of any shape, and page_size, num_pages and num_kv_heads
must be given too.
"""

import ctypes

from .abi import AttentionDesc, AttnkernError, DType, Mask, Status

_fp = ctypes.POINTER(ctypes.c_float)
_i32p = ctypes.POINTER(ctypes.c_int32)
_i64p = ctypes.POINTER(ctypes.c_int64)

# The numpy dtype an array of each storage type has when this module makes one.
_NUMPY_OF = {DType.F32: "float32", DType.F16: "float16", DType.BF16: "uint16"}


def _numpy():
    try:
        import numpy
    except ImportError as e:  # pragma: no cover - depends on the interpreter
        raise ImportError("attnkern's array wrappers need numpy") from e
    return numpy


def _storage_type(x, name, dtype):
    """The DType of array x (dtype, when given, must fit x's numpy dtype)."""
    np = _numpy()
    if x.dtype == np.float32:
        allowed = (DType.F32,)
    elif x.dtype == np.float16:
        allowed = (DType.F16,)
    elif x.dtype == np.uint16:
        allowed = (DType.F16, DType.BF16)
    else:
        raise TypeError(f"{name} must be float32, float16 or uint16 (bf16 or f16 bits), "
                        f"not {x.dtype}")
    if dtype is None:
        if len(allowed) > 1:
            raise TypeError(f"{name} is uint16, which holds bf16 or f16 bits: "
                            "say which (attnkern.BF16 or attnkern.F16)")
        return allowed[0]
    dtype = DType(dtype)
    if dtype not in allowed:
        raise TypeError(f"{name} has dtype {x.dtype}, which does not hold {dtype.name}")
    return dtype


def _elem_strides(x, name, axes):
    """The strides of x's first axes in elements, for the C API."""
    out = []
    for s in x.strides[:axes]:
        if s < 0 or s % x.itemsize:
            raise ValueError(f"{name} has a stride of {s} bytes: strides must be "
                             f"non-negative multiples of {x.itemsize}")
        out.append(s // x.itemsize)
    return tuple(out)


def _not_all_zero(x, name, axes, writable):
    """(x, strides) where the strides are not all 0: the C API reads all 0 as
    "contiguous", so a view broadcast along every such axis is copied (or,
    being an output, refused)."""
    strides = _elem_strides(x, name, axes)
    if any(strides) or all(n <= 1 for n in x.shape[:axes]):
        return x, strides
    if writable:
        raise ValueError(f"{name} repeats one row along every axis: it cannot be written")
    x = _numpy().ascontiguousarray(x)
    return x, _elem_strides(x, name, axes)


def _expect(name, shape, what, got, want):
    if want is not None and int(want) != got:
        raise ValueError(f"{name} has shape {shape}: {what} is {got}, expected {want}")


class KVMixin:
    """ak_attention, ak_convert and ak_kv_cache_store for attnkern.Library."""

    def _require(self, name):
        if not self.has(name):
            raise AttnkernError(name, Status.ERR_UNSUPPORTED,
                                self.status_string(Status.ERR_UNSUPPORTED),
                                f"{self.path} has no {name} (it predates attnkern 0.2)")

    def _pool(self, x, name, dtype, heads, dim, page_size, num_pages, strides, writable):
        """A K/V pool checked: (x, DType, heads, dim, num_pages, page_size,
        [page, head, slot] strides in elements)."""
        if strides is None:
            x = self._array(x, name, 4, writable, dtype=None, contiguous=False)
            t = _storage_type(x, name, dtype)
            n, hk, ps, dd = x.shape
            for what, got, want in (("num_pages", n, num_pages), ("num_kv_heads", hk, heads),
                                    ("page_size", ps, page_size), ("dim", dd, dim)):
                _expect(name, x.shape, what, got, want)
            x, st = _not_all_zero(x, name, 3, writable)
            return x, t, hk, dd, n, ps, st
        x = self._array(x, name, None, writable, dtype=None)
        t = _storage_type(x, name, dtype)
        if None in (heads, dim, page_size, num_pages):
            raise TypeError(f"{name}: with explicit page strides give num_kv_heads, "
                            "page_size and num_pages too")
        st = tuple(int(s) for s in strides)
        if len(st) != 3 or min(st) < 0:
            raise ValueError(f"{name}'s page strides {strides} must be 3 values >= 0")
        extents = (int(num_pages), int(heads), int(page_size))
        walk = st if any(st) else (heads * page_size * dim, page_size * dim, dim)
        need = 0 if 0 in extents or dim == 0 else (
            sum((e - 1) * s for e, s in zip(extents, walk)) + dim)
        if x.size < need:
            raise ValueError(f"{name} has {x.size} elements; its pages need {need}")
        return x, t, int(heads), int(dim), int(num_pages), int(page_size), st

    def attention_desc(self, **fields):
        """A fresh ak_attention_desc (ak_attention_desc_init), fields set.
        Pointer fields (bias, kv_lens, lse, probs, block_table, ...) hold raw
        addresses: keep the arrays they point into alive (and unmoved) until
        ak_attention returns."""
        d = AttentionDesc()
        self.lib.ak_attention_desc_init_sized(ctypes.byref(d), ctypes.sizeof(d))
        for key, value in fields.items():
            if key not in AttentionDesc._fields_names:
                raise TypeError(f"ak_attention_desc has no field {key!r}")
            setattr(d, key, value)
        return d

    def attention(self, q, k, v, *, num_kv_heads=None, mask=Mask.NONE, scale=0.0, out=None,
                  k_type=None, v_type=None, head_dim_v=None, block_table=None, kv_len=None,
                  page_size=None, num_pages=None, k_page_strides=None, v_page_strides=None,
                  softcap=0.0, alibi_slopes=None, sinks=None, cu_seqlens_q=None,
                  cu_seqlens_k=None, token_major=True, lse=None):
        """softmax(scale * q k^T, masked) v for q [b, h, q_len, d] (float32).

        Without block_table, k [b, hk, kv_len, d] and v [b, hk, kv_len, dv]
        are C-contiguous, each float32, float16 or uint16 with k_type /
        v_type saying BF16 or F16. With block_table (int32 [b, pages per
        sequence], its row length the block_table_stride), k and v are pools
        (see the module's text) and kv_len must be given; key j of sequence b
        is slot j % page_size of page block_table[b, j // page_size].

        Score modifiers: softcap > 0 maps each scaled score s to softcap *
        tanh(s / softcap); alibi_slopes (float32 [h]) adds slopes[h] * (j -
        d(i)), d(i) the query's aligned diagonal; sinks (float32 [h]) are
        logits that join each row's softmax normalizer with no value.

        Packed variable-length batch: with cu_seqlens_q (int32 [b + 1],
        cu_seqlens_q[0] = 0, non-decreasing) q is 3-D, sequence s's queries
        its rows cu_seqlens_q[s] .. cu_seqlens_q[s+1] - 1: [total_q, h, d]
        with token_major (the default), else [h, total_q, d]; out has q's
        layout. k and v are then [b, hk, kv_len, dv] as above, or, with
        cu_seqlens_k, packed like q ([total_k, hk, d] or [hk, total_k, d]).
        q_len and kv_len are the longest sequences.

        lse, when given, is a float32 array that receives the log-sum-exps of
        the scores: [b, h, q_len], or [h, total_q] for a packed batch."""
        np = _numpy()
        packed_q = cu_seqlens_q is not None
        packed_k = cu_seqlens_k is not None
        extra = {}  # arrays the descriptor points into, for the overlap check

        def seqlens(cu, name, rows):
            cu = self._array(cu, name, 1, dtype="int32")
            if cu.shape[0] < 1:
                raise ValueError(f"{name} needs batch + 1 >= 1 entries")
            if int(cu[-1]) != rows:
                raise ValueError(f"{name} ends at {int(cu[-1])}, but the tensor has {rows} rows")
            extra[name] = cu
            longest = int(np.diff(cu.astype(np.int64)).max()) if cu.shape[0] > 1 else 0
            return cu, max(longest, 0)

        def packed_shape(x, name, heads, dim):
            """(rows, heads, dim) of a packed 3-D tensor, and its C strides."""
            x = self._array(x, name, 3, dtype=None)
            rows, hh, dd = x.shape if token_major else (x.shape[1], x.shape[0], x.shape[2])
            if heads is not None and hh != heads:
                raise ValueError(f"{name} has shape {x.shape}: {hh} heads, expected {heads}")
            if dim is not None and dd != dim:
                raise ValueError(f"{name} has shape {x.shape}: dim {dd}, expected {dim}")
            return x, rows, hh, dd, ((0, dd, hh * dd) if token_major else (0, 0, 0))

        def layout(rows, heads, dim):
            return (rows, heads, dim) if token_major else (heads, rows, dim)

        if packed_q:
            q, total_q, h, d, q_strides = packed_shape(q, "q", None, None)
            cu_q, q_len = seqlens(cu_seqlens_q, "cu_seqlens_q", total_q)
            b = cu_q.shape[0] - 1
        else:
            if packed_k:
                raise TypeError("cu_seqlens_k goes with cu_seqlens_q")
            q = self._array(q, "q", 4)
            b, h, q_len, d = q.shape
        if q.dtype != np.float32:
            raise TypeError(f"q must have dtype float32, not {q.dtype}")
        bt = None
        kv_strides = {}
        if block_table is None:
            if any(a is not None for a in (kv_len, page_size, num_pages, k_page_strides,
                                           v_page_strides)):
                raise TypeError("kv_len, page_size, num_pages and page strides go with "
                                "block_table")
            if packed_k:
                k, total_k, hk, _, kst = packed_shape(k, "k", num_kv_heads, d)
                v, total_v, _, dv, vst = packed_shape(v, "v", hk, head_dim_v)
                if total_v != total_k:
                    raise ValueError(f"v has {total_v} rows, k has {total_k}")
                cu_k, kv_len = seqlens(cu_seqlens_k, "cu_seqlens_k", total_k)
                if cu_k.shape != cu_q.shape:
                    raise ValueError(f"cu_seqlens_k has {cu_k.shape[0]} entries, "
                                     f"cu_seqlens_q {cu_q.shape[0]}")
                kv_strides = dict(k_strides=kst, v_strides=vst,
                                  cu_seqlens_k=cu_k.ctypes.data_as(_i32p))
            else:
                k = self._array(k, "k", 4, dtype=None)
                v = self._array(v, "v", 4, dtype=None)
                hk = k.shape[1] if num_kv_heads is None else num_kv_heads
                kv_len, dv = k.shape[2], v.shape[3]
                if k.shape != (b, hk, kv_len, d):
                    raise ValueError(f"k has shape {k.shape}, expected {(b, hk, kv_len, d)}")
                if v.shape != (b, hk, kv_len, dv):
                    raise ValueError(f"v has shape {v.shape}, expected {(b, hk, kv_len, dv)}")
                _expect("v", v.shape, "dv", dv, head_dim_v)
            kt, vt = _storage_type(k, "k", k_type), _storage_type(v, "v", v_type)
            paged = {}
        else:
            bt = self._array(block_table, "block_table", 2, dtype="int32")
            if bt.shape[0] != b:
                raise ValueError(f"block_table has {bt.shape[0]} rows for a batch of {b}")
            if kv_len is None:
                raise TypeError("a paged call needs kv_len (the pools do not say it)")
            k, kt, hk, _, n_pages, ps, kst = self._pool(
                k, "k", k_type, num_kv_heads, d, page_size, num_pages, k_page_strides, False)
            dv_want = head_dim_v if head_dim_v is not None or v_page_strides is None else d
            v, vt, _, dv, _, _, vst = self._pool(
                v, "v", v_type, hk, dv_want, ps, n_pages, v_page_strides, False)
            paged = dict(block_table=bt.ctypes.data_as(_i32p), block_table_stride=bt.shape[1],
                         page_size=ps, num_pages=n_pages, k_page_strides=kst,
                         v_page_strides=vst)
            extra["block_table"] = bt
            if packed_k:  # the library says why not
                kv_strides = dict(cu_seqlens_k=self._array(
                    cu_seqlens_k, "cu_seqlens_k", 1, dtype="int32").ctypes.data_as(_i32p))
        out_shape = layout(total_q, h, dv) if packed_q else (b, h, q_len, dv)
        if out is None:
            out = np.empty(out_shape, dtype=np.float32)
        out = self._array(out, "out", len(out_shape), writable=True)
        if out.shape != out_shape:
            raise ValueError(f"out has shape {out.shape}, expected {out_shape}")
        optional = {}
        for name, x in (("alibi_slopes", alibi_slopes), ("sinks", sinks)):
            if x is not None:
                x = self._array(x, name, 1)
                if x.shape[0] != h:
                    raise ValueError(f"{name} has {x.shape[0]} entries for {h} heads")
                extra[name] = x
                optional[name] = self._ptr(x)
        if lse is not None:
            lse_shape = (h, total_q) if packed_q else (b, h, q_len)
            lse = self._array(lse, "lse", len(lse_shape), writable=True)
            if lse.shape != lse_shape:
                raise ValueError(f"lse has shape {lse.shape}, expected {lse_shape}")
            self._disjoint(lse, q=q, k=k, v=v, **extra)
            if np.may_share_memory(lse, out):
                raise ValueError("lse overlaps out")
            optional["lse"] = self._ptr(lse)
        self._disjoint(out, q=q, k=k, v=v, **extra)
        if packed_q:
            optional.update(cu_seqlens_q=cu_q.ctypes.data_as(_i32p), q_strides=q_strides,
                            o_strides=(0, dv, h * dv) if token_major else (0, 0, 0))
        desc = self.attention_desc(batch=b, num_heads=h, num_kv_heads=hk, q_len=q_len,
                                   kv_len=kv_len, head_dim=d, head_dim_v=dv, scale=scale,
                                   mask=int(mask), k_type=int(kt), v_type=int(vt),
                                   softcap=softcap, **paged, **kv_strides, **optional)
        st = self.lib.ak_attention(ctypes.byref(desc), self._ptr(q), self._ptr(k),
                                   self._ptr(v), self._ptr(out))
        self.check(st, "ak_attention")
        return out

    def convert(self, src, dst_type, *, src_type=None, out=None):
        """src (C-contiguous) converted to dst_type by ak_convert: rounded to
        nearest even when narrowing, exact when widening. Returns out, or a
        new array (float32, float16, or uint16 for BF16) of src's shape. out
        may be src itself when both types have the same size."""
        np = _numpy()
        src = self._array(src, "src", dtype=None)
        st = _storage_type(src, "src", src_type)
        dt = DType(dst_type)
        if out is None:
            out = np.empty(src.shape, dtype=_NUMPY_OF[dt])
        out = self._array(out, "out", writable=True, dtype=None)
        _storage_type(out, "out", dt)
        if out.shape != src.shape:
            raise ValueError(f"out has shape {out.shape}, src has {src.shape}")
        if not (out.ctypes.data == src.ctypes.data and out.itemsize == src.itemsize):
            self._disjoint(out, src=src)
        self._require("ak_convert")  # after the checks: they hold for any library
        status = self.lib.ak_convert(int(dt), out.ctypes.data, int(st), src.ctypes.data,
                                     src.size)
        self.check(status, "ak_convert")
        return out

    def kv_cache_store(self, src, slots, pool, *, dst_type=None, page_size=None,
                       num_pages=None, page_strides=None):
        """Writes the keys (or values) src [n_tokens, num_kv_heads, head_dim]
        (float32; a view whose last axis is contiguous is fine) into pool:
        token t to slot slots[t] = page * page_size + offset (int64; -1
        skips the token), rounded to the pool's type. Returns pool."""
        src = self._array(src, "src", 3, contiguous=False)
        n, hk, d = src.shape
        src, sst = _not_all_zero(src, "src", 2, False)
        slots = self._array(slots, "slots", 1, dtype="int64")
        if slots.shape[0] != n:
            raise ValueError(f"slots has {slots.shape[0]} entries for {n} tokens")
        pool, t, _, _, n_pages, ps, pst = self._pool(
            pool, "pool", dst_type, hk, d, page_size, num_pages, page_strides, True)
        self._disjoint(pool, src=src, slots=slots)
        self._require("ak_kv_cache_store")
        status = self.lib.ak_kv_cache_store(
            n, hk, d, self._ptr(src), (ctypes.c_int64 * 2)(*sst), slots.ctypes.data_as(_i64p),
            int(t), pool.ctypes.data, n_pages, ps, (ctypes.c_int64 * 3)(*pst))
        self.check(status, "ak_kv_cache_store")
        return pool

"""Tests of the storage-type, cache and paged-attention wrappers (attnkern_kv)
against numpy; run by test_attnkern.py, which loads the library and hands it
to use() before unittest collects these classes.

The f16/bf16 and paged attention tests need a library whose ak_attention
reads k_type, v_type and block_table (0.2); ConvertTest and KVCacheStoreTest
need ak_convert and ak_kv_cache_store and skip, saying so, without them.
"""
import ctypes
import unittest

import attnkern
from attnkern import BF16, F16, F32, AttnkernError, Mask, Status

try:
    import numpy as np
except ImportError:
    np = None

ak = None


def use(library):
    global ak
    ak = library


def bf16_bits(x):
    """float32 -> bf16 bit patterns, rounded to nearest even (finite x)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_widen(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def in_double_buffer(x):
    """x copied into the first half of a buffer twice its size: a library that
    ignored k_type would read 4-byte floats from it and must not run past the
    allocation while this test reports the mismatch."""
    buf = np.zeros(2 * x.size, dtype=x.dtype)
    view = buf[:x.size].reshape(x.shape)
    view[...] = x
    return view


def needs(function):
    """Skips a test where the loaded library lacks function (a 0.1 library)."""
    def decorate(test):
        def run(self):
            if not ak.has(function):
                self.skipTest(f"{ak.path} has no {function}")
            test(self)
        run.__name__ = test.__name__
        return run
    return decorate


@unittest.skipIf(np is None, "numpy is not installed")
class ConvertTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(7)
        self.x = np.concatenate([
            rng.standard_normal(200).astype(np.float32) * 100,
            np.array([0.0, -0.0, 1e-6, -3e-7, 65504.0, 65520.0, 1e5, -1e9, 3.4e38,
                      np.inf, -np.inf], dtype=np.float32)])

    @needs("ak_convert")
    def test_f16_matches_numpy(self):
        h = ak.convert(self.x, F16)
        self.assertEqual(h.dtype, np.float16)
        with np.errstate(over="ignore"):
            want = self.x.astype(np.float16)  # round to nearest even, subnormals kept
        np.testing.assert_array_equal(h.view(np.uint16), want.view(np.uint16))
        np.testing.assert_array_equal(ak.convert(h, F32), want.astype(np.float32))
        bits = ak.convert(self.x, F16, out=np.empty(self.x.shape, np.uint16))
        np.testing.assert_array_equal(bits, want.view(np.uint16))

    @needs("ak_convert")
    def test_bf16_rounds_to_nearest_even(self):
        finite = self.x[np.isfinite(self.x) & (np.abs(self.x) < 3e38)]
        bits = ak.convert(finite, BF16)
        self.assertEqual(bits.dtype, np.uint16)
        np.testing.assert_array_equal(bits, bf16_bits(finite))
        np.testing.assert_array_equal(ak.convert(bits, F32, src_type=BF16), bf16_widen(bits))
        ties = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8], dtype=np.float32)
        np.testing.assert_array_equal(bf16_widen(ak.convert(ties, BF16)), [1.0, 1.0 + 2.0 ** -6])
        nan = ak.convert(np.array([np.nan, -np.nan], np.float32), BF16)
        self.assertTrue(np.isnan(bf16_widen(nan)).all(), "NaN must stay NaN, never inf")

    @needs("ak_convert")
    def test_half_to_half_and_in_place(self):
        h = self.x[:200].astype(np.float16)
        b = ak.convert(h, BF16)
        np.testing.assert_array_equal(b, bf16_bits(h.astype(np.float32)))
        same = h.view(np.uint16).copy()
        self.assertIs(ak.convert(same, BF16, src_type=F16, out=same), same)
        np.testing.assert_array_equal(same, b)

    def test_refused_before_the_call(self):
        bits = np.zeros(4, np.uint16)
        with self.assertRaisesRegex(TypeError, "uint16"):
            ak.convert(bits, F32)  # bf16 or f16 bits? must be said
        with self.assertRaises(TypeError):
            ak.convert(np.zeros(4, np.float64), F16)
        with self.assertRaises(TypeError):
            ak.convert(np.zeros(4, np.float32), BF16, out=np.zeros(4, np.float16))
        if ak.has("ak_convert"):
            buf = np.zeros(8, np.float32)
            with self.assertRaisesRegex(ValueError, "overlaps"):
                ak.convert(buf[:4], F32, out=buf[2:6])
        else:
            with self.assertRaises(AttnkernError) as cm:
                ak.convert(np.zeros(4, np.float32), F16)
            self.assertEqual(cm.exception.status, Status.ERR_UNSUPPORTED)


@unittest.skipIf(np is None, "numpy is not installed")
class KVCacheStoreTest(unittest.TestCase):
    n, hk, d, pages, ps = 6, 2, 8, 5, 4

    def setUp(self):
        rng = np.random.default_rng(11)
        # Keys as the middle third of a fused [n, 3, heads, d] projection.
        self.qkv = rng.standard_normal((self.n, 3, self.hk, self.d)).astype(np.float32)
        self.src = self.qkv[:, 1]
        self.slots = np.array([13, 2, -1, 19, 4, 8], dtype=np.int64)

    def expected(self, fill, convert):
        want = np.full((self.pages, self.hk, self.ps, self.d), fill, np.float64)  # exact for every type here
        for t, slot in enumerate(self.slots):
            if slot >= 0:
                want[slot // self.ps, :, slot % self.ps, :] = convert(self.src[t])
        return want

    @needs("ak_kv_cache_store")
    def test_bf16_pool_from_a_strided_view(self):
        pool = np.full((self.pages, self.hk, self.ps, self.d), 0x7FC0, np.uint16)
        self.assertIs(ak.kv_cache_store(self.src, self.slots, pool, dst_type=BF16), pool)
        np.testing.assert_array_equal(pool, self.expected(0x7FC0, bf16_bits))

    @needs("ak_kv_cache_store")
    def test_f16_pool_and_explicit_page_strides(self):
        pool = np.full((self.pages, self.hk, self.ps, self.d), -1, np.float16)
        ak.kv_cache_store(self.src, self.slots, pool)
        np.testing.assert_array_equal(pool, self.expected(-1, lambda x: x.astype(np.float16)))
        # fp32 pages 3 floats apart in a flat buffer: strides from the caller.
        page = self.hk * self.ps * self.d + 3
        flat = np.full(self.pages * page, -5, np.float32)
        ak.kv_cache_store(self.src, self.slots, flat, num_pages=self.pages, page_size=self.ps,
                          page_strides=(page, self.ps * self.d, self.d))
        got = np.stack([flat[p * page:p * page + page - 3] for p in range(self.pages)])
        want = self.expected(-5, lambda x: x).reshape(self.pages, -1)
        np.testing.assert_array_equal(got, want)

    @needs("ak_kv_cache_store")
    def test_duplicate_slot_writes_nothing(self):
        pool = np.zeros((self.pages, self.hk, self.ps, self.d), np.float32)
        slots = self.slots.copy()
        slots[5] = slots[0]
        with self.assertRaises(AttnkernError) as cm:
            ak.kv_cache_store(self.src, slots, pool)
        self.assertEqual(cm.exception.status, Status.ERR_BAD_ARGUMENT)
        self.assertFalse(pool.any(), "a refused store must not write")

    def test_refused_before_the_call(self):
        pool = np.zeros((self.pages, self.hk, self.ps, self.d), np.uint16)
        with self.assertRaisesRegex(TypeError, "uint16"):
            ak.kv_cache_store(self.src, self.slots, pool)
        with self.assertRaises(TypeError):
            ak.kv_cache_store(self.src, self.slots.astype(np.int32), pool, dst_type=BF16)
        with self.assertRaisesRegex(ValueError, "num_kv_heads"):
            ak.kv_cache_store(self.src, self.slots, pool[:, :1], dst_type=BF16)


@unittest.skipIf(np is None, "numpy is not installed")
class HalfAndPagedAttentionTest(unittest.TestCase):
    """Against the header's contract: f16/bf16 K/V give the fp32 computation
    on the widened stored values; a paged call gives the contiguous one."""
    b, h, hk, q_len, kv_len, d = 2, 4, 2, 3, 13, 8

    def setUp(self):
        rng = np.random.default_rng(5)
        self.q = rng.standard_normal((self.b, self.h, self.q_len, self.d)).astype(np.float32)
        shape = (self.b, self.hk, self.kv_len, self.d)
        self.k = rng.standard_normal(shape).astype(np.float32)
        self.v = rng.standard_normal(shape).astype(np.float32)
        self.rng = rng

    def fp32(self, k, v):
        return ak.attention(self.q, k, v, mask=Mask.CAUSAL_BOTTOM_RIGHT)

    def assert_same(self, got, want):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)

    def test_bf16_kv(self):
        kb, vb = in_double_buffer(bf16_bits(self.k)), in_double_buffer(bf16_bits(self.v))
        got = ak.attention(self.q, kb, vb, k_type=BF16, v_type=BF16,
                           mask=Mask.CAUSAL_BOTTOM_RIGHT)
        self.assert_same(got, self.fp32(bf16_widen(kb), bf16_widen(vb)))

    def test_f16_kv_and_mixed_types(self):
        kh = in_double_buffer(self.k.astype(np.float16))
        vh = in_double_buffer(self.v.astype(np.float16))
        got = ak.attention(self.q, kh, vh, mask=Mask.CAUSAL_BOTTOM_RIGHT)
        self.assert_same(got, self.fp32(kh.astype(np.float32), vh.astype(np.float32)))
        vb = in_double_buffer(bf16_bits(self.v))
        got = ak.attention(self.q, kh, vb, v_type=BF16, mask=Mask.CAUSAL_BOTTOM_RIGHT)
        self.assert_same(got, self.fp32(kh.astype(np.float32), bf16_widen(vb)))

    def paged(self, ps=4, spare=3):
        """A [pages, 2, hk, ps, d] pool holding k and v under shuffled page ids
        (spare pages NaN: never read), and its block table (-1 past the end)."""
        per_seq = -(-self.kv_len // ps)
        pages = self.b * per_seq + spare
        ids = self.rng.permutation(pages)[:self.b * per_seq].reshape(self.b, per_seq)
        table = np.full((self.b, per_seq + 1), -1, np.int32)
        table[:, :per_seq] = ids
        pool = np.full((pages, 2, self.hk, ps, self.d), np.nan, np.float32)
        for bi in range(self.b):
            for j in range(self.kv_len):
                pool[ids[bi, j // ps], 0, :, j % ps] = self.k[bi, :, j]
                pool[ids[bi, j // ps], 1, :, j % ps] = self.v[bi, :, j]
        return pool, table

    def test_paged_matches_contiguous(self):
        pool, table = self.paged()
        k, v = np.ascontiguousarray(pool[:, 0]), np.ascontiguousarray(pool[:, 1])
        got = ak.attention(self.q, k, v, block_table=table, kv_len=self.kv_len,
                           mask=Mask.CAUSAL_BOTTOM_RIGHT)
        self.assert_same(got, self.fp32(self.k, self.v))

    def test_paged_bf16_strided_pools(self):
        pool, table = self.paged()
        bits = bf16_bits(np.nan_to_num(pool, nan=1e30))
        bits[np.isnan(pool)] = 0x7FC0  # spare pages stay NaN
        got = ak.attention(self.q, bits[:, 0], bits[:, 1], k_type=BF16, v_type=BF16,
                           block_table=table, kv_len=self.kv_len, page_size=4,
                           mask=Mask.CAUSAL_BOTTOM_RIGHT)
        self.assert_same(got, self.fp32(bf16_widen(bf16_bits(self.k)),
                                        bf16_widen(bf16_bits(self.v))))

    def test_paged_arguments_checked(self):
        pool, table = self.paged()
        with self.assertRaisesRegex(TypeError, "kv_len"):
            ak.attention(self.q, pool[:, 0], pool[:, 1], block_table=table)
        with self.assertRaisesRegex(TypeError, "block_table"):
            ak.attention(self.q, self.k, self.v, page_size=4)
        with self.assertRaisesRegex(ValueError, "page_size"):
            ak.attention(self.q, pool[:, 0], pool[:, 1], block_table=table,
                         kv_len=self.kv_len, page_size=8)
        with self.assertRaises(TypeError):
            ak.attention(self.q, pool[:, 0], pool[:, 1], block_table=table.astype(np.int64),
                         kv_len=self.kv_len)

    def test_0_1_descriptor_size_is_accepted(self):
        q = np.ascontiguousarray(self.q[:1, :2])
        k, v = np.ascontiguousarray(self.k[:1, :2]), np.ascontiguousarray(self.v[:1, :2])
        want = ak.attention(q, k, v)
        d = ak.attention_desc(struct_size=attnkern.ATTENTION_DESC_SIZE_0_1, batch=1,
                              num_heads=2, num_kv_heads=2, q_len=self.q_len,
                              kv_len=self.kv_len, head_dim=self.d)
        d.k_type = 99  # past a 0.1 struct_size: must not be read
        out = np.empty_like(want)
        ak.check(ak.lib.ak_attention(ctypes.byref(d), ak._ptr(q), ak._ptr(k), ak._ptr(v), ak._ptr(out)),
                 "ak_attention")
        np.testing.assert_array_equal(out, want)


def reference(q, k, v, mask=Mask.NONE, softcap=0.0, alibi_slopes=None, sinks=None):
    """out and lse of ak_attention in float64 for contiguous [b, h, seq, d]
    q, k, v (kv heads repeated for grouped queries), by the header's text."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    b, h, q_len, d = q.shape
    hk, kv_len = k.shape[1], k.shape[2]
    k, v = np.repeat(k, h // hk, axis=1), np.repeat(v, h // hk, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    i, j = np.arange(q_len)[:, None], np.arange(kv_len)[None, :]
    diag = i + (kv_len - q_len) if mask == Mask.CAUSAL_BOTTOM_RIGHT else i
    if alibi_slopes is not None:
        s = s + np.asarray(alibi_slopes, np.float64)[None, :, None, None] * (j - diag)
    if mask != Mask.NONE:
        s = np.where(j <= diag, s, -np.inf)
    sink = np.full(h, -np.inf) if sinks is None else np.asarray(sinks, np.float64)
    sink = np.broadcast_to(sink[None, :, None, None], (b, h, q_len, 1))
    m = np.maximum(s.max(axis=-1, keepdims=True), sink)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True) + np.exp(sink - m)
    return (e / z) @ v, (m + np.log(z))[..., 0]


@unittest.skipIf(np is None, "numpy is not installed")
class ScoreModifiersTest(unittest.TestCase):
    """softcap, ALiBi slopes and sink logits against the float64 reference."""
    b, h, hk, q_len, kv_len, d = 2, 4, 2, 3, 7, 8

    def setUp(self):
        rng = np.random.default_rng(17)
        self.q = rng.standard_normal((self.b, self.h, self.q_len, self.d)).astype(np.float32)
        self.k = rng.standard_normal((self.b, self.hk, self.kv_len, self.d)).astype(np.float32)
        self.v = rng.standard_normal((self.b, self.hk, self.kv_len, self.d)).astype(np.float32)
        self.q *= 2  # scores past the softcap's linear range

    def check(self, mask=Mask.NONE, **modifiers):
        lse = np.empty((self.b, self.h, self.q_len), np.float32)
        out = ak.attention(self.q, self.k, self.v, mask=mask, lse=lse, **modifiers)
        want, want_lse = reference(self.q, self.k, self.v, mask, **modifiers)
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-5)
        np.testing.assert_allclose(lse, want_lse, rtol=0, atol=1e-5)
        return out

    def test_softcap(self):
        capped = self.check(Mask.CAUSAL_TOP_LEFT, softcap=1.5)
        plain = ak.attention(self.q, self.k, self.v, mask=Mask.CAUSAL_TOP_LEFT)
        self.assertGreater(np.abs(capped - plain).max(), 1e-3, "softcap changed nothing")

    def test_alibi(self):
        slopes = np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
        self.check(alibi_slopes=slopes)
        self.check(Mask.CAUSAL_BOTTOM_RIGHT, alibi_slopes=slopes)

    def test_sinks(self):
        sinks = np.array([0.3, -1.0, 2.0, 0.0], np.float32)
        self.check(sinks=sinks)
        self.check(Mask.CAUSAL_BOTTOM_RIGHT, softcap=3.0, sinks=sinks,
                   alibi_slopes=np.full(self.h, 0.1, np.float32))

    def test_per_head_arrays_checked(self):
        with self.assertRaisesRegex(ValueError, "sinks"):
            ak.attention(self.q, self.k, self.v, sinks=np.zeros(self.h - 1, np.float32))
        with self.assertRaises(TypeError):
            ak.attention(self.q, self.k, self.v, alibi_slopes=np.zeros(self.h, np.float64))


@unittest.skipIf(np is None, "numpy is not installed")
class PackedBatchTest(unittest.TestCase):
    """A packed variable-length batch gives what each sequence gives alone."""
    h, hk, d = 4, 2, 8
    q_lens, kv_lens = (3, 1, 4), (5, 2, 4)

    def setUp(self):
        rng = np.random.default_rng(23)
        self.cu_q = np.concatenate([[0], np.cumsum(self.q_lens)]).astype(np.int32)
        self.cu_k = np.concatenate([[0], np.cumsum(self.kv_lens)]).astype(np.int32)
        # token-major [total, heads, dim], as most engines keep them
        self.q = rng.standard_normal((self.cu_q[-1], self.h, self.d)).astype(np.float32)
        self.k = rng.standard_normal((self.cu_k[-1], self.hk, self.d)).astype(np.float32)
        self.v = rng.standard_normal((self.cu_k[-1], self.hk, self.d)).astype(np.float32)
        self.modifiers = dict(mask=Mask.CAUSAL_BOTTOM_RIGHT, softcap=4.0,
                              alibi_slopes=np.array([0.5, 0.25, 0.125, 0.0625], np.float32),
                              sinks=np.array([0.3, -1.0, 2.0, 0.0], np.float32))

    @staticmethod
    def one(x, cu, s):
        """Sequence s of a token-major packed tensor as [1, heads, len, dim]."""
        return np.ascontiguousarray(x[cu[s]:cu[s + 1]].transpose(1, 0, 2)[None])

    def separately(self, k_of):
        """(out [total_q, h, d], lse [h, total_q]) sequence by sequence."""
        outs, lses = [], []
        for s, n in enumerate(self.q_lens):
            k, v = k_of(s)
            lse = np.empty((1, self.h, n), np.float32)
            out = ak.attention(self.one(self.q, self.cu_q, s), k, v, lse=lse, **self.modifiers)
            outs.append(out[0].transpose(1, 0, 2))
            lses.append(lse[0])
        return np.concatenate(outs), np.concatenate(lses, axis=1)

    def test_packed_q_and_k_match_each_sequence(self):
        want, want_lse = self.separately(
            lambda s: (self.one(self.k, self.cu_k, s), self.one(self.v, self.cu_k, s)))
        lse = np.empty((self.h, self.cu_q[-1]), np.float32)
        out = ak.attention(self.q, self.k, self.v, cu_seqlens_q=self.cu_q,
                           cu_seqlens_k=self.cu_k, lse=lse, **self.modifiers)
        self.assertEqual(out.shape, self.q.shape)
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-6)
        np.testing.assert_allclose(lse, want_lse, rtol=0, atol=1e-6)
        # The same batch head-major, [heads, total, dim].
        hm = [np.ascontiguousarray(x.transpose(1, 0, 2)) for x in (self.q, self.k, self.v)]
        out = ak.attention(*hm, cu_seqlens_q=self.cu_q, cu_seqlens_k=self.cu_k,
                           token_major=False, lse=lse, **self.modifiers)
        np.testing.assert_allclose(out.transpose(1, 0, 2), want, rtol=0, atol=1e-6)
        np.testing.assert_allclose(lse, want_lse, rtol=0, atol=1e-6)

    def test_packed_q_with_batched_k(self):
        # Every sequence's queries against its own [hk, kv_len, d] keys.
        rng = np.random.default_rng(29)
        shape = (len(self.q_lens), self.hk, 6, self.d)
        k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        want, want_lse = self.separately(lambda s: (k[s:s + 1], v[s:s + 1]))
        lse = np.empty((self.h, self.cu_q[-1]), np.float32)
        out = ak.attention(self.q, k, v, cu_seqlens_q=self.cu_q, lse=lse, **self.modifiers)
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-6)
        np.testing.assert_allclose(lse, want_lse, rtol=0, atol=1e-6)

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "cu_seqlens_q"):  # before the call
            ak.attention(self.q[1:], self.k, self.v, cu_seqlens_q=self.cu_q,
                         cu_seqlens_k=self.cu_k)
        bad = self.cu_q.copy()
        bad[1], bad[2] = bad[2], bad[1]  # decreasing
        with self.assertRaises(AttnkernError) as cm:
            ak.attention(self.q, self.k, self.v, cu_seqlens_q=bad, cu_seqlens_k=self.cu_k)
        self.assertEqual(cm.exception.status, Status.ERR_BAD_ARGUMENT)
        # Packed keys cannot come from a block table as well.
        pool = np.zeros((2, self.hk, 8, self.d), np.float32)
        table = np.zeros((len(self.q_lens), 1), np.int32)
        with self.assertRaises(AttnkernError) as cm:
            ak.attention(self.q, pool, pool, cu_seqlens_q=self.cu_q, cu_seqlens_k=self.cu_k,
                         block_table=table, kv_len=5)
        self.assertEqual(cm.exception.status, Status.ERR_BAD_ARGUMENT)

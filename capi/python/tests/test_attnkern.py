#!/usr/bin/env python3
"""Tests of the attnkern package against numpy, run with the interpreter it
is installed for (pip install ./capi/python):

    python3 capi/python/tests/test_attnkern.py [-v] [path/to/libattnkern.so.1]

The library is the one attnkern.load() finds ($AK_LIBRARY, the package's
own copy, the system loader). AK_LAYOUT_PROBE, when set, names the
abi_layout program (capi/examples/c), whose output the ctypes struct layout
is checked against. Tests that need numpy are skipped, saying so, when this
interpreter has none.
"""
import ctypes
import os
import subprocess
import sys
import threading
import unittest

# The package under test is the installed one: this directory is on sys.path
# (for the other test modules), the package's source directory is not.
import attnkern  # noqa: E402
from attnkern import AttnkernError, Status  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None

NO_NUMPY = f"numpy is not installed for {sys.executable}"
needs_numpy = unittest.skipIf(np is None, NO_NUMPY)

ak = attnkern.load(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
                   else None)
if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    del sys.argv[1]

# The storage-type, cache and paged-attention tests live beside this file;
# imported here, unittest.main runs them with the rest.
import test_attnkern_kv  # noqa: E402

test_attnkern_kv.use(ak)
from test_attnkern_kv import (ConvertTest, HalfAndPagedAttentionTest,  # noqa: E402,F401
                              KVCacheStoreTest, PackedBatchTest, ScoreModifiersTest)
import test_attnkern_rope  # noqa: E402

test_attnkern_rope.use(ak)
from test_attnkern_rope import EmbeddingTest, RopeTest  # noqa: E402,F401
import test_attnkern_blocks  # noqa: E402

test_attnkern_blocks.use(ak)
from test_attnkern_blocks import BlocksTest, PackageTest, RawTest  # noqa: E402,F401


class ConfigTest(unittest.TestCase):
    def test_version(self):
        self.assertEqual(ak.abi_version, attnkern.ABI_VERSION)
        self.assertRegex(ak.version, r"^\d+\.\d+\.\d+$")

    def test_status_string(self):
        self.assertTrue(ak.status_string(Status.ERR_BAD_SHAPE).startswith("AK_ERR_BAD_SHAPE"))

    def test_threads(self):
        ak.set_num_threads(2)
        try:
            self.assertEqual(ak.get_num_threads(), 2)
            with self.assertRaises(AttnkernError) as cm:
                ak.set_num_threads(-1)
            self.assertEqual(cm.exception.status, Status.ERR_BAD_ARGUMENT)
            ak.set_num_threads_local(1)
            self.assertEqual((ak.get_num_threads(), ak.get_num_threads_local()), (1, 1))
            seen = []
            worker = threading.Thread(
                target=lambda: seen.append((ak.get_num_threads(), ak.get_num_threads_local())))
            worker.start()
            worker.join()
            self.assertEqual(seen, [(2, 0)], "another thread keeps the process-wide count")
            with self.assertRaises(AttnkernError):
                ak.set_num_threads_local(-1)
            self.assertEqual(ak.get_num_threads_local(), 1)
            ak.release_scratch()  # callable any time; the next call allocates anew
        finally:
            ak.set_num_threads_local(0)
            ak.set_num_threads(0)

    def test_threads_local_context(self):
        ak.set_num_threads_local(3)
        try:
            with ak.threads_local(1):
                self.assertEqual((ak.get_num_threads(), ak.get_num_threads_local()), (1, 1))
                with ak.threads_local(0):  # nested: follows the process-wide count
                    self.assertEqual(ak.get_num_threads_local(), 0)
                self.assertEqual(ak.get_num_threads_local(), 1)
            self.assertEqual(ak.get_num_threads_local(), 3)
            with self.assertRaises(KeyError):
                with ak.threads_local(2):
                    raise KeyError("inside the block")
            self.assertEqual(ak.get_num_threads_local(), 3, "restored when the block raises")
            with self.assertRaises(AttnkernError):
                with ak.threads_local(-1):
                    self.fail("a bad count must not enter the block")
            self.assertEqual(ak.get_num_threads_local(), 3)
        finally:
            ak.set_num_threads_local(0)

    def test_layout_matches_c(self):
        probe = os.environ.get("AK_LAYOUT_PROBE")
        if not probe:
            self.skipTest("AK_LAYOUT_PROBE (the abi_layout program) is not set")
        c = dict(line.split() for line in
                 subprocess.run([probe], check=True, capture_output=True,
                                text=True).stdout.splitlines())
        D = attnkern.AttentionDesc
        self.assertEqual(ctypes.sizeof(D), int(c["sizeof.ak_attention_desc"]))
        self.assertEqual(ctypes.alignment(D), int(c["alignof.ak_attention_desc"]))
        for name, _ in D._fields_:
            self.assertEqual(getattr(D, name).offset,
                             int(c[f"offsetof.ak_attention_desc.{name}"]), name)
        for enum_type in ("ak_status", "ak_trans", "ak_mask", "ak_dtype", "ak_rope_style"):
            self.assertEqual(ctypes.sizeof(ctypes.c_int), int(c[f"sizeof.{enum_type}"]))
        self.assertEqual(attnkern.ATTENTION_DESC_SIZE_0_1,
                         int(c["value.AK_ATTENTION_DESC_SIZE_0_1"]))
        if ctypes.sizeof(ctypes.c_void_p) == 8 and ctypes.sizeof(ctypes.c_long) == 8:  # LP64
            self.assertEqual((ctypes.sizeof(D), attnkern.ATTENTION_DESC_SIZE_0_1), (368, 240))

    def test_desc_init(self):
        d = ak.attention_desc()
        self.assertEqual(d.struct_size, ctypes.sizeof(attnkern.AttentionDesc))
        self.assertEqual((d.window_left, d.window_right), (-1, -1))
        self.assertEqual((d.batch, d.mask, d.scale), (0, 0, 0.0))
        self.assertFalse(d.bias)
        # The 0.2 fields: fp32 K/V, no score modifiers, not paged, not packed.
        self.assertEqual((d.k_type, d.v_type, d.softcap), (attnkern.F32, attnkern.F32, 0.0))
        self.assertEqual((d.block_table_stride, d.page_size, d.num_pages), (0, 0, 0))
        self.assertEqual(list(d.k_page_strides) + list(d.v_page_strides), [0] * 6)
        for pointer in ("alibi_slopes", "sinks", "block_table", "cu_seqlens_q", "cu_seqlens_k"):
            self.assertFalse(getattr(d, pointer), pointer)
        self.assertEqual([int(t) for t in attnkern.DType], [0, 1, 2])
        self.assertEqual((attnkern.F32, attnkern.F16, attnkern.BF16), (0, 1, 2))
        with self.assertRaises(TypeError):
            ak.attention_desc(no_such_field=1)


class ErrorPathTest(unittest.TestCase):
    """The raw ctypes calls: no numpy needed."""

    def test_bad_stride_names_the_argument(self):
        a = (ctypes.c_float * 6)(*range(6))
        b = (ctypes.c_float * 6)(*range(6))
        c = (ctypes.c_float * 4)(-1, -1, -1, -1)
        st = ak.lib.ak_sgemm(0, 0, 2, 2, 3, 1.0, a, 2, b, 2, 0.0, c, 2)  # lda 2 < k 3
        with self.assertRaises(AttnkernError) as cm:
            ak.check(st, "ak_sgemm")
        e = cm.exception
        self.assertEqual(e.status, Status.ERR_BAD_STRIDE)
        self.assertIn("lda", e.detail)
        self.assertIn("lda", str(e))
        self.assertEqual(list(c), [-1.0] * 4, "a failed call must not write")

    def test_null_pointer(self):
        with self.assertRaises(AttnkernError) as cm:
            ak.check(ak.lib.ak_softmax(2, 3, None, 3, None, 3), "ak_softmax")
        self.assertEqual(cm.exception.status, Status.ERR_NULL_POINTER)
        # An empty problem is not an error, NULL or not.
        ak.check(ak.lib.ak_softmax(0, 3, None, 3, None, 3))

    def test_unknown_isa(self):
        with self.assertRaises(AttnkernError) as cm:
            ak.set_isa("mmx")
        self.assertEqual(cm.exception.status, Status.ERR_BAD_ARGUMENT)
        self.assertIn("mmx", cm.exception.detail)


@needs_numpy
class ArrayTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(42)

    def rand(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def assert_gemm_close(self, got, a64, b64, k):
        want = a64 @ b64
        scale = np.linalg.norm(a64) * np.linalg.norm(b64) + 1e-30
        err = np.max(np.abs(got - want)) / scale if got.size else 0.0
        self.assertLessEqual(err, 1e-6 * max(1.0, np.sqrt(k)))

    def test_sgemm_vs_numpy(self):
        for m, n, k in [(1, 1, 1), (3, 17, 5), (64, 65, 63), (129, 33, 200), (0, 4, 3),
                        (4, 4, 0)]:
            for ta in (False, True):
                for tb in (False, True):
                    a = self.rand(*((k, m) if ta else (m, k)))
                    b = self.rand(*((n, k) if tb else (k, n)))
                    c = ak.sgemm(a, b, trans_a=ta, trans_b=tb)
                    self.assertEqual(c.shape, (m, n))
                    a64 = a.astype(np.float64).T if ta else a.astype(np.float64)
                    b64 = b.astype(np.float64).T if tb else b.astype(np.float64)
                    with self.subTest(m=m, n=n, k=k, ta=ta, tb=tb):
                        self.assert_gemm_close(c, a64, b64, k)

    def test_sgemm_alpha_beta(self):
        a, b, c0 = self.rand(5, 7), self.rand(7, 3), self.rand(5, 3)
        c = c0.copy()
        ak.sgemm(a, b, c, alpha=0.5, beta=2.0)
        want = 0.5 * a.astype(np.float64) @ b.astype(np.float64) + 2.0 * c0
        np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)

    def test_softmax_vs_numpy(self):
        for shape in [(1, 1), (3, 17), (65, 129), (2, 3, 31), (7,)]:
            x = 10 * self.rand(*shape)
            x64 = x.astype(np.float64)
            e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
            want = e / e.sum(axis=-1, keepdims=True)
            with self.subTest(shape=shape):
                np.testing.assert_allclose(ak.softmax(x), want, rtol=2e-6, atol=1e-7)
                np.testing.assert_allclose(ak.log_softmax(x), np.log(want),
                                           rtol=1e-5, atol=1e-5)

    def test_softmax_axis_vs_numpy(self):
        for shape, axis in [((5, 7), 0), ((3, 40, 9), 1), ((2, 3, 33), -1), ((6,), 0),
                            ((4, 1, 5), 1)]:
            x = 10 * self.rand(*shape)
            x64 = x.astype(np.float64)
            e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
            want = e / e.sum(axis=axis, keepdims=True)
            with self.subTest(shape=shape, axis=axis):
                np.testing.assert_allclose(ak.softmax_axis(x, axis), want, rtol=2e-6, atol=1e-7)
                y = x.copy()
                self.assertIs(ak.softmax_axis(y, axis, out=y), y)
                np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7)
        with self.assertRaises(ValueError):
            ak.softmax_axis(self.rand(2, 3), 2)

    def test_softmax_in_place_and_special_values(self):
        x = np.array([[1e30, -1e30, 0], [-np.inf, -np.inf, -np.inf],
                      [-np.inf, 0, 0]], dtype=np.float32)
        y = ak.softmax(x, out=x)
        self.assertIs(y, x)
        np.testing.assert_array_equal(x, [[1, 0, 0], [0, 0, 0], [0, 0.5, 0.5]])

    def test_rejects_wrong_arrays_before_calling(self):
        good = self.rand(3, 3)
        with self.assertRaises(TypeError):
            ak.softmax(good.astype(np.float64))
        with self.assertRaises(TypeError):
            ak.softmax([[1.0, 2.0]])
        with self.assertRaises(ValueError):
            ak.softmax(self.rand(4, 6)[:, ::2])  # not C-contiguous
        with self.assertRaises(ValueError):
            ak.sgemm(good, self.rand(4, 3))  # inner dimensions differ
        with self.assertRaises(ValueError):
            ak.sgemm(good, good, out=np.empty((3, 3), dtype=np.float32, order="F"))
        raw = np.zeros(4 * 9 + 1, dtype=np.uint8)
        odd = np.frombuffer(raw.data, dtype=np.float32, count=9, offset=1).reshape(3, 3)
        self.assertFalse(odd.flags.aligned)
        with self.assertRaisesRegex(ValueError, "aligned"):
            ak.softmax(odd)
        ro = good.copy()
        ro.flags.writeable = False
        with self.assertRaises(ValueError):
            ak.softmax(good, out=ro)

    def test_overlapping_out_is_refused(self):
        x = self.rand(8, 8)
        with self.assertRaisesRegex(ValueError, "overlaps a"):
            ak.sgemm(x, self.rand(8, 8), out=x)
        with self.assertRaisesRegex(ValueError, "overlaps b"):
            ak.sgemm(self.rand(8, 8), x, out=x)
        buf = self.rand(9, 8)
        with self.assertRaisesRegex(ValueError, "overlaps x"):
            ak.softmax(buf[:8], out=buf[1:])  # one row apart
        same = buf.copy()
        ak.softmax(same, out=same)  # in place stays allowed
        np.testing.assert_allclose(same.sum(axis=1), 1.0, rtol=1e-6)
        q = self.rand(1, 1, 4, 8).reshape(1, 1, 4, 8)
        with self.assertRaisesRegex(ValueError, "overlaps q"):
            ak.attention(q, self.rand(1, 1, 4, 8).reshape(1, 1, 4, 8),
                         self.rand(1, 1, 4, 8).reshape(1, 1, 4, 8), out=q)

    def test_listing_isas_changes_nothing(self):
        try:
            ak.set_isa("scalar")
            isas = ak.available_isas()
            self.assertEqual(ak.get_isa(), "scalar")
            self.assertIn("scalar", isas)
            self.assertEqual(ak.isa_supported("scalar"), True)
            self.assertEqual(ak.isa_supported("mmx"), False)
            self.assertEqual(ak.get_isa(), "scalar")
        finally:
            ak.set_isa(None)

    def test_every_available_isa(self):
        isas = ak.available_isas()
        self.assertIn(ak.get_isa(), isas)
        self.assertTrue(isas, "no instruction set is available")
        a, b, x = self.rand(33, 47), self.rand(47, 29), self.rand(9, 70)
        try:
            for name in isas:
                with self.subTest(isa=name):
                    ak.set_isa(name)
                    self.assertEqual(ak.get_isa(), name)
                    self.assert_gemm_close(ak.sgemm(a, b), a.astype(np.float64),
                                           b.astype(np.float64), 47)
                    s = ak.softmax(x)
                    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-6)
            for name in set(attnkern.ISAS) - set(isas):
                with self.assertRaises(AttnkernError) as cm:
                    ak.set_isa(name)
                self.assertEqual(cm.exception.status, Status.ERR_UNSUPPORTED)
        finally:
            ak.set_isa(None)

    def test_attention_if_available(self):
        b, h, hk, q_len, kv_len, d = 2, 4, 2, 5, 7, 8
        q, k, v = self.rand(b, h, q_len, d), self.rand(b, hk, kv_len, d), self.rand(b, hk, kv_len, d)
        try:
            out = ak.attention(q, k, v, mask=attnkern.Mask.CAUSAL_BOTTOM_RIGHT)
        except AttnkernError as e:
            if e.status == Status.ERR_UNSUPPORTED:
                self.skipTest(f"ak_attention: {e.detail}")
            raise
        kk = np.repeat(k.astype(np.float64), h // hk, axis=1)
        vv = np.repeat(v.astype(np.float64), h // hk, axis=1)
        s = q.astype(np.float64) @ kk.transpose(0, 1, 3, 2) / np.sqrt(d)
        i, j = np.arange(q_len)[:, None], np.arange(kv_len)[None, :]
        s = np.where(j <= i + (kv_len - q_len), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        want = (p / p.sum(axis=-1, keepdims=True)) @ vv
        np.testing.assert_allclose(out, want, atol=1e-5)


if __name__ == "__main__":
    if np is None:
        print(f"NOTE: {NO_NUMPY}; the numpy comparisons are skipped", file=sys.stderr)
    unittest.main(verbosity=2)

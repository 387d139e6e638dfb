"""Tests of the batched product, the SGEMM blocking and the worked examples'
building blocks (attnkern.blocks) against numpy in float64, and of where the
package and its library were found; run by test_attnkern.py, which loads the
library and hands it to use() before unittest collects these classes.

AK_EXPECT_PACKAGE_UNDER, when set, is a directory the imported attnkern
package must lie under (the suite's virtual environment: the installed copy
is tested, not the source tree). AK_EXPECT_LIBRARY_FROM, when set, is the
origin open_library must have used ("the system loader" when the suite
unsets AK_LIBRARY and puts the install prefix on the loader's path).
"""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import attnkern
from attnkern import AttnkernError, Mask, Status
from attnkern import _loader

try:
    import numpy as np
except ImportError:
    np = None

ak = None


def use(library):
    global ak
    ak = library


class PackageTest(unittest.TestCase):
    def test_installed_copy_is_the_one_imported(self):
        where = os.environ.get("AK_EXPECT_PACKAGE_UNDER")
        if not where:
            self.skipTest("AK_EXPECT_PACKAGE_UNDER is not set")
        here = os.path.realpath(attnkern.__file__)
        self.assertTrue(here.startswith(os.path.realpath(where) + os.sep),
                        f"attnkern imported from {here}, not from under {where}")

    def test_library_origin(self):
        origin = os.environ.get("AK_EXPECT_LIBRARY_FROM")
        if not origin:
            self.skipTest("AK_EXPECT_LIBRARY_FROM is not set")
        first = _loader.candidates()[0]
        self.assertEqual(first[1], origin, f"first candidate: {first}")
        self.assertEqual(ak.path, first[0])

    def test_a_copy_inside_the_package_comes_first(self):
        # The file the process loaded, from the Linux loader's map.
        try:
            with open("/proc/self/maps", encoding="utf-8") as f:
                loaded = [line.split()[-1] for line in f if "libattnkern" in line]
        except OSError:
            self.skipTest("no /proc/self/maps")
        if not loaded:
            self.skipTest("libattnkern is not in /proc/self/maps")
        package = os.path.dirname(os.path.abspath(attnkern.__file__))
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "attnkern")
            shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copy(loaded[0], os.path.join(copy, _loader.SONAME))
            env = {k: v for k, v in os.environ.items()
                   if k not in ("AK_LIBRARY", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH")}
            env["PYTHONPATH"] = tmp
            done = subprocess.run(
                [sys.executable, "-c", "import attnkern; print(attnkern.load().path)"],
                env=env, cwd=tmp, capture_output=True, text=True, check=False)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stdout.strip(), os.path.join(copy, _loader.SONAME))

    def test_a_missing_library_says_what_was_tried(self):
        with self.assertRaises(OSError) as cm:
            attnkern.load("/nonexistent/libattnkern.so.1")
        self.assertIn("/nonexistent/libattnkern.so.1", str(cm.exception))
        self.assertIn("AK_LIBRARY", str(cm.exception))


class RawTest(unittest.TestCase):
    def test_the_0_1_desc_init_fills_the_0_1_prefix(self):
        d = attnkern.AttentionDesc()
        ak.lib.ak_attention_desc_init(ctypes.byref(d))
        self.assertEqual(d.struct_size, attnkern.ATTENTION_DESC_SIZE_0_1)
        self.assertEqual((d.window_left, d.window_right), (-1, -1))


@unittest.skipIf(np is None, "numpy is not installed")
class BlocksTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(7)

    def rand(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def test_sgemm_batched_vs_numpy(self):
        a, b = self.rand(3, 5, 7), self.rand(3, 7, 4)
        want = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(ak.sgemm_batched(a, b), want, rtol=1e-5, atol=1e-5)
        # Transposed operands, one b shared by every product (stride 0), beta.
        at, shared = np.ascontiguousarray(a.transpose(0, 2, 1)), self.rand(4, 7)
        out = self.rand(3, 5, 4)
        want = 2.0 * (a.astype(np.float64) @ shared.T.astype(np.float64)) + 0.5 * out
        got = ak.sgemm_batched(at, shared, out, trans_a=True, trans_b=True, alpha=2.0, beta=0.5)
        self.assertIs(got, out)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def test_sgemm_batched_refuses_mismatches(self):
        with self.assertRaises(ValueError):
            ak.sgemm_batched(self.rand(2, 3, 4), self.rand(3, 4, 5))
        with self.assertRaises(ValueError):
            ak.sgemm_batched(self.rand(2, 3, 4), self.rand(2, 5, 5))
        a = self.rand(2, 3, 4)
        with self.assertRaises(ValueError):
            ak.sgemm_batched(a, self.rand(4, 4), a[:, :, :4].reshape(2, 3, 4))

    def test_sgemm_blocking(self):
        blk = ak.sgemm_blocking()
        self.assertEqual(set(blk), {"mr", "nr", "mc", "kc", "nc", "skinny_m", "kc_narrow",
                                    "narrow_n"})
        for name in ("mr", "nr", "mc", "kc", "nc"):
            self.assertGreater(blk[name], 0, name)

    def test_position_encoding(self):
        pe = ak.position_encoding(6, 5, 100.0)
        k, i = np.arange(6)[:, None], np.arange(2)[None, :]
        angle = k / 100.0 ** (2 * i / 5)
        want = np.zeros((6, 5))
        want[:, 0:4:2], want[:, 1:4:2] = np.sin(angle), np.cos(angle)
        np.testing.assert_allclose(pe, want, atol=1e-6)  # odd dim: last column 0
        with self.assertRaises(AttnkernError) as cm:
            ak.position_encoding(2, 4, float("nan"))
        self.assertEqual(cm.exception.status, Status.ERR_BAD_ARGUMENT)

    def test_mha_self_attention(self):
        n, d_model, heads, d_k, d_v = 5, 6, 2, 3, 4
        x = self.rand(n, d_model)
        w_q, w_k, w_v = self.rand(heads, d_model, d_k), self.rand(heads, d_model, d_k), \
            self.rand(heads, d_model, d_v)
        out = ak.mha_self_attention(x, w_q, w_k, w_v, mask=Mask.CAUSAL_TOP_LEFT)
        x64 = x.astype(np.float64)
        causal = np.arange(n)[None, :] <= np.arange(n)[:, None]
        for h in range(heads):
            q, k, v = x64 @ w_q[h], x64 @ w_k[h], x64 @ w_v[h]
            s = np.where(causal, q @ k.T / np.sqrt(d_k), -np.inf)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            np.testing.assert_allclose(out[h], (p / p.sum(axis=1, keepdims=True)) @ v,
                                       atol=1e-5)
        with self.assertRaises(ValueError):
            ak.mha_self_attention(x, w_q, w_k[:, :, :2].copy(), w_v)

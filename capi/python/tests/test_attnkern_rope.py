"""Tests of the rotary and token embedding wrappers (attnkern_rope) against
numpy in float64; run by test_attnkern.py, which loads the library and hands
it to use() before unittest collects these classes. They skip, saying so,
with a library that lacks ak_rope or ak_embedding.
"""
import unittest

from attnkern import AttnkernError, RopeStyle, Status

try:
    import numpy as np
except ImportError:
    np = None

ak = None


def use(library):
    global ak
    ak = library


def rope_reference(x, positions, inv_freq, rotary_dim, style):
    """x [b, s, h, d] rotated in float64 as the header defines it."""
    out = x.astype(np.float64)
    half = rotary_dim // 2
    angle = positions[:, :, None, None].astype(np.float64) * inv_freq.astype(np.float64)
    c, s = np.cos(angle), np.sin(angle)
    if style == RopeStyle.NEOX:
        a, b = x[..., :half].astype(np.float64), x[..., half:rotary_dim].astype(np.float64)
        out[..., :half], out[..., half:rotary_dim] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0:rotary_dim:2].astype(np.float64), x[..., 1:rotary_dim:2].astype(np.float64)
        out[..., 0:rotary_dim:2], out[..., 1:rotary_dim:2] = a * c - b * s, a * s + b * c
    return out


@unittest.skipIf(np is None, "numpy is not installed")
class RopeTest(unittest.TestCase):
    def setUp(self):
        if not ak.has("ak_rope"):
            self.skipTest(f"{ak.path} has no ak_rope")

    def test_q_and_k_of_a_fused_projection(self):
        rng = np.random.default_rng(5)
        b, s, h, d = 2, 3, 4, 16
        qkv = rng.standard_normal((b, s, 3, h, d)).astype(np.float32)
        before = qkv.copy()
        positions = np.array([[0, 1, 2], [40, 1 << 20, -7]], dtype=np.int32)
        theta = 10000.0
        inv_freq = (theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)).astype(np.float32)
        for style in (RopeStyle.NEOX, RopeStyle.INTERLEAVED):
            qkv[...] = before
            for part in (0, 1):
                view = qkv[:, :, part]
                self.assertIs(ak.rope(view, positions, style=style, theta=theta), view)
            for part in (0, 1):
                want = rope_reference(before[:, :, part], positions, inv_freq, d, style)
                np.testing.assert_allclose(qkv[:, :, part], want, atol=1e-5)
            np.testing.assert_array_equal(qkv[:, :, 2], before[:, :, 2])

    def test_partial_rotary_dim_and_own_frequencies(self):
        rng = np.random.default_rng(6)
        x = rng.standard_normal((1, 5, 2, 12)).astype(np.float32)
        before = x.copy()
        inv_freq = np.array([1.0, 0.25, 0.01], dtype=np.float32)
        out = ak.rope(x, style=RopeStyle.INTERLEAVED, rotary_dim=6, inv_freq=inv_freq)
        self.assertIs(out, x)
        positions = np.arange(5, dtype=np.int32)[None, :]
        want = rope_reference(before, positions, inv_freq, 6, RopeStyle.INTERLEAVED)
        np.testing.assert_allclose(x, want, atol=1e-5)
        np.testing.assert_array_equal(x[..., 6:], before[..., 6:])

    def test_odd_rotary_dim_is_refused(self):
        x = np.ones((1, 2, 1, 8), dtype=np.float32)
        with self.assertRaises(AttnkernError) as e:
            ak.rope(x, rotary_dim=3)
        self.assertEqual(e.exception.status, Status.ERR_BAD_SHAPE)
        self.assertIn("rotary_dim = 3", e.exception.detail)
        np.testing.assert_array_equal(x, 1.0)


@unittest.skipIf(np is None, "numpy is not installed")
class EmbeddingTest(unittest.TestCase):
    def setUp(self):
        if not ak.has("ak_embedding"):
            self.skipTest(f"{ak.path} has no ak_embedding")

    def test_rows_and_unknown_tokens(self):
        rng = np.random.default_rng(7)
        table = rng.standard_normal((10, 24)).astype(np.float32)
        ids = np.array([3, -1, 9, 0, 3], dtype=np.int32)
        out = ak.embedding(ids, table)
        want = np.where(ids[:, None] < 0, 0.0, table[np.maximum(ids, 0)])
        np.testing.assert_array_equal(out, want)
        # Into every other row of a padded buffer, from a column slice.
        buf = np.full((5, 2, 30), 7.0, dtype=np.float32)
        ak.embedding(ids, table[:, :20], out=buf[:, 0, :20])
        np.testing.assert_array_equal(buf[:, 0, :20], want[:, :20])
        np.testing.assert_array_equal(buf[:, 0, 20:], 7.0)
        np.testing.assert_array_equal(buf[:, 1], 7.0)

    def test_id_past_vocabulary_writes_nothing(self):
        table = np.ones((4, 8), dtype=np.float32)
        out = np.full((2, 8), 5.0, dtype=np.float32)
        with self.assertRaises(AttnkernError) as e:
            ak.embedding(np.array([1, 4], dtype=np.int32), table, out=out)
        self.assertEqual(e.exception.status, Status.ERR_BAD_ARGUMENT)
        self.assertIn("ids[1] = 4", e.exception.detail)
        np.testing.assert_array_equal(out, 5.0)

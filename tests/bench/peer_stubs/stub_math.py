"""float64 numpy versions of the peers' operations, for the peer-script stand-ins.

AK_PEER_STUB_PERTURB=1 makes every result 1 % too large, so that a test can
check that the scripts report the disagreement."""

import os

import numpy as np


def _out(y):
    y = y.astype(np.float32)
    if os.environ.get("AK_PEER_STUB_PERTURB") == "1":
        y *= np.float32(1.01)
    return y


def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return _out(e / e.sum(axis=axis, keepdims=True))


def attention(q, k, v, causal=False, mask=None):
    """softmax(q k^T / sqrt(d)) v on [b, h, s, d]; k and v may have fewer heads
    (GQA: head h reads kv head h // group); causal is top-left; mask: True = seen."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k, group, axis=1).astype(np.float64)
    v = np.repeat(v, group, axis=1).astype(np.float64)
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return _out((e / e.sum(axis=-1, keepdims=True)) @ v)


def matmul(a, b):
    return _out(np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64))

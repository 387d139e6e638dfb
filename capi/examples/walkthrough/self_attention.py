"""Self-attention, step by step (self_attention.c in Python): a 4-word
sentence with 3-dimensional word vectors, the position encoding added, the
q/k/v projections (d_k = 2, d_v = 4), scaled scores, softmax and context
vectors, then the same in one ak_attention call. Every step is printed and
checked against numpy in float64.

    AK_LIBRARY=build/libattnkern.so python3 self_attention.py
"""

import ctypes

import numpy as np

from walkthrough_support import check, load, ptr, show, softmax64

WORDS = ["the", "cat", "sat", "down"]
# Made-up word vectors and projections, the same as in self_attention.c.
X = np.array([[0.1, 0.9, 0.2], [0.8, 0.3, 0.5], [0.4, 0.2, 0.9], [0.3, 0.7, 0.6]], np.float32)
W_Q = np.array([[0.6, -0.2], [0.3, 0.8], [-0.5, 0.4]], np.float32)
W_K = np.array([[0.4, 0.7], [-0.6, 0.2], [0.5, 0.3]], np.float32)
W_V = np.array([[0.2, 0.5, -0.3, 0.8], [0.7, -0.1, 0.4, 0.2], [-0.4, 0.6, 0.9, 0.1]], np.float32)


def position_encoding64(n, dim, base=10000.0):
    """out[p, 2i] = sin(p / base^(2i/dim)), out[p, 2i+1] = the cosine."""
    out = np.zeros((n, dim))
    for i in range(dim // 2):
        angle = np.arange(n) / base ** (2 * i / dim)
        out[:, 2 * i], out[:, 2 * i + 1] = np.sin(angle), np.cos(angle)
    return out


def main():
    ak = load()
    n, d_model = X.shape
    d_k, d_v = W_Q.shape[1], W_V.shape[1]
    show("word vectors", X, WORDS)

    # 1. Attention is blind to word order: each position adds its own sinusoid.
    pe = np.empty((n, d_model), np.float32)
    ak.check(ak.lib.ak_position_encoding(n, d_model, 10000.0, ptr(pe)), "ak_position_encoding")
    show("position encoding", pe, WORDS)
    check("position encoding", pe, position_encoding64(n, d_model))
    x = X + pe
    x64 = X.astype(np.float64) + position_encoding64(n, d_model)
    show("x = word vectors + position encoding", x, WORDS)

    # 2. Projections: queries and keys share d_k, values may be wider.
    q, k, v = ak.sgemm(x, W_Q), ak.sgemm(x, W_K), ak.sgemm(x, W_V)
    q64, k64, v64 = x64 @ W_Q, x64 @ W_K, x64 @ W_V
    for name, got, want in (("q = x w_q", q, q64), ("k = x w_k", k, k64), ("v = x w_v", v, v64)):
        show(name, got, WORDS)
        check(name, got, want)

    # 3. Scores scaled by 1/sqrt(d_k), so that their spread does not grow with d_k.
    scores = ak.sgemm(q, k, trans_b=True, alpha=1 / np.sqrt(d_k))
    scores64 = q64 @ k64.T / np.sqrt(d_k)
    show("scores = q k^T / sqrt(d_k)", scores, WORDS)
    check("scores", scores, scores64)

    # 4. Each row becomes weights that sum to 1; 5. the values averaged with them.
    weights = ak.softmax(scores)
    show("weights = softmax(scores)", weights, WORDS)
    check("weights", weights, softmax64(scores64))
    context = ak.sgemm(weights, v)
    context64 = softmax64(scores64) @ v64
    show("context = weights v", context, WORDS)
    check("context", context, context64)

    # 6. The same in one fused call (one batch, one head, scale 0 = 1/sqrt(d_k)).
    fused = np.empty((n, d_v), np.float32)
    desc = ak.attention_desc(batch=1, num_heads=1, num_kv_heads=1, q_len=n, kv_len=n,
                             head_dim=d_k, head_dim_v=d_v)
    ak.check(ak.lib.ak_attention(ctypes.byref(desc), ptr(q), ptr(k), ptr(v), ptr(fused)),
             "ak_attention")
    show("ak_attention(q, k, v)", fused, WORDS)
    check("ak_attention", fused, context64)
    diff = np.max(np.abs(fused - context))
    print(f"max |ak_attention - step by step| = {diff:.1e}")
    assert diff <= 1e-6, "the fused call and the steps differ by more than a few ulps"


if __name__ == "__main__":
    main()

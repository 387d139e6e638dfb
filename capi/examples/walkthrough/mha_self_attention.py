"""Multi-head self-attention with per-head weights (mha_self_attention.c in
Python): the sentence of self_attention.py through ak_mha_self_attention with
2 heads, each with its own w_q, w_k (d_k = 2) and w_v (d_v = 3), each head
checked against numpy in float64.

    AK_LIBRARY=build/libattnkern.so python3 mha_self_attention.py
"""

import numpy as np

from self_attention import WORDS, X, position_encoding64
from walkthrough_support import attnkern, check, load, ptr, show, softmax64

HEADS, D_K, D_V = 2, 2, 3


def make_weights(which, cols, d_model):
    """[head, d_model, cols] in tenths from -0.5 to 0.5, different for every
    head and matrix (which = 0, 1, 2 for q, k, v), as in mha_self_attention.c."""
    h, r, c = np.meshgrid(np.arange(HEADS), np.arange(d_model), np.arange(cols), indexing="ij")
    return (((7 * h + 5 * r + 3 * c + 2 * which) % 11 - 5) / 10).astype(np.float32)


def main():
    ak = load()
    n, d_model = X.shape
    pe = np.empty((n, d_model), np.float32)
    ak.check(ak.lib.ak_position_encoding(n, d_model, 10000.0, ptr(pe)), "ak_position_encoding")
    x = X + pe
    x64 = X.astype(np.float64) + position_encoding64(n, d_model)
    show("x = word vectors + position encoding", x, WORDS)

    # Each head projects the same x its own way, so that heads can attend to
    # different relations between the words.
    w_q, w_k, w_v = make_weights(0, D_K, d_model), make_weights(1, D_K, d_model), \
        make_weights(2, D_V, d_model)
    for h in range(HEADS):
        for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
            show(f"head {h} {name}", w[h])

    # Projections, scaled scores, softmax and context of every head in one call.
    out = np.empty((HEADS, n, D_V), np.float32)
    status = ak.lib.ak_mha_self_attention(n, d_model, HEADS, D_K, D_V, ptr(x), ptr(w_q),
                                          ptr(w_k), ptr(w_v), attnkern.Mask.NONE, ptr(out))
    ak.check(status, "ak_mha_self_attention")
    for h in range(HEADS):
        q, k, v = x64 @ w_q[h], x64 @ w_k[h], x64 @ w_v[h]
        show(f"head {h} context", out[h], WORDS)
        check(f"head {h}", out[h], softmax64(q @ k.T / np.sqrt(D_K)) @ v)

    # Side by side, [word, head * d_v]: the input of a layer's w_o.
    show("heads concatenated", out.transpose(1, 0, 2).reshape(n, HEADS * D_V), WORDS)


if __name__ == "__main__":
    main()

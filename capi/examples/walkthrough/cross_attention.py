"""Cross-attention with q_len != kv_len (cross_attention.c in Python): the 14
tokens of a French sentence attend to the 13 of its English original. Words
become vectors through ak_embedding (the unknown word "a" is id -1, a zero
row), ak_attention returns the attention weights in its probs output, and
the alignment is saved as a heat map with the words on its axes.

    AK_LIBRARY=build/libattnkern.so python3 cross_attention.py [heatmap.png]

writes the heat map to heatmap.png, by default cross_attention_python.png
(cross_attention_heatmap.png beside this file, shown in the top-level
README, is this program's output).
The weights are checked against numpy in float64: each row sums to 1, and
each French word's largest weight falls on its translation. The heat map
needs matplotlib (Debian: python3-matplotlib); without it the numbers are
still checked.
"""

import ctypes
import os
import sys

import numpy as np

from walkthrough_support import HERE, check, load, ptr, show, softmax64

# The sentence pair of Bahdanau, Cho and Bengio's alignment figure (2014),
# lower-cased and split into tokens as the vocabulary has them.
FRENCH = ["l'", "accord", "sur", "la", "zone", "économique", "européenne", "a", "été", "signé",
          "en", "août", "1992", "."]
ENGLISH = ["the", "agreement", "on", "the", "european", "economic", "area", "was", "signed", "in",
           "august", "1992", "."]
# Each French word's translation, where it has one ("a été" is "was" as a
# whole; "a" is not in the vocabulary).
TRANSLATION = {"l'": "the", "accord": "agreement", "sur": "on", "la": "the", "zone": "area",
               "économique": "economic", "européenne": "european", "été": "was",
               "signé": "signed", "en": "in", "août": "august", "1992": "1992", ".": "."}
EMBEDDINGS = os.path.join(HERE, "embeddings.txt")


def read_vocabulary(path=EMBEDDINGS):
    """The words and their vectors (float32 [words, dim]) of embeddings.txt."""
    words, rows = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                word, *numbers = line.split()
                words.append(word)
                rows.append(np.array(numbers, dtype=np.float32))
    return words, np.stack(rows)


def token_ids(sentence, vocabulary):
    """The tokenizer: each word's row in the table, -1 for a word it lacks."""
    return np.array([vocabulary.index(w) if w in vocabulary else -1 for w in sentence], np.int32)


def reference_weights64(vocabulary, table):
    """The attention weights in float64: softmax of q k^T / sqrt(dim), q the
    French words' vectors (zero for an unknown word), k the English ones'."""
    def rows(sentence):
        ids = token_ids(sentence, vocabulary)
        return np.where(ids[:, None] >= 0, table[ids].astype(np.float64), 0.0)

    q, k = rows(FRENCH), rows(ENGLISH)
    return softmax64(q @ k.T / np.sqrt(table.shape[1])), k


def check_alignment(weights):
    """Rows sum to 1; each French word's largest weight is on its translation
    (the English "the" comes twice: either one); an unknown word's are uniform."""
    assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-5), "a row of weights does not sum to 1"
    for i, word in enumerate(FRENCH):
        best = ENGLISH[int(np.argmax(weights[i]))]
        print(f"  {word:<12} -> {best:<10} {weights[i].max():.3f}")
        if word in TRANSLATION:
            assert best == TRANSLATION[word], f"{word} attends most to {best}"
        else:
            assert np.allclose(weights[i], 1 / len(ENGLISH), atol=1e-6), f"{word} is not uniform"


def save_heatmap(weights, path):
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (Debian: python3-matplotlib): no heat map written; "
              "the numbers were checked")
        return
    fig, ax = plt.subplots(figsize=(5.2, 5.6))
    ax.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(ENGLISH)), ENGLISH, rotation=90)
    ax.set_yticks(range(len(FRENCH)), [w if w in TRANSLATION else f"{w} (unknown)" for w in FRENCH])
    ax.xaxis.tick_top()
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={"Software": None})
    print(f"heat map: {path}")


def main():
    ak = load()
    vocabulary, table = read_vocabulary()
    print(f"{len(vocabulary)} words of {table.shape[1]} dimensions from {EMBEDDINGS}")
    fr_ids, en_ids = token_ids(FRENCH, vocabulary), token_ids(ENGLISH, vocabulary)
    print("french ids: " + " ".join(f"{w}={i}" for w, i in zip(FRENCH, fr_ids)))
    print("english ids: " + " ".join(f"{w}={i}" for w, i in zip(ENGLISH, en_ids)))

    # Queries are the French words, keys and values the English ones (a
    # trained model would project them first, as self_attention.py does).
    q, kv = ak.embedding(fr_ids, table), ak.embedding(en_ids, table)
    assert not q[FRENCH.index("a")].any(), "an unknown word gives a zero row"

    # One batch, one head, 14 queries over 13 keys; probs receives the weights.
    (n_fr, dim), n_en = q.shape, kv.shape[0]
    out = np.empty((n_fr, dim), np.float32)
    weights = np.empty((n_fr, n_en), np.float32)
    desc = ak.attention_desc(batch=1, num_heads=1, num_kv_heads=1, q_len=n_fr, kv_len=n_en,
                             head_dim=dim, probs=ptr(weights))
    ak.check(ak.lib.ak_attention(ctypes.byref(desc), ptr(q), ptr(kv), ptr(kv), ptr(out)),
             "ak_attention")
    weights64, v64 = reference_weights64(vocabulary, table)
    show("attention weights (columns: the english words)", weights, FRENCH)
    check("attention weights", weights, weights64)
    print("out, the values averaged with those weights:")
    check("out", out, weights64 @ v64)

    print("alignment (each french word's largest weight):")
    check_alignment(weights)
    save_heatmap(weights, sys.argv[1] if len(sys.argv) > 1 else "cross_attention_python.png")


if __name__ == "__main__":
    main()

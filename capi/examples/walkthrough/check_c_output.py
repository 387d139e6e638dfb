"""Runs the three C walkthrough programs and checks every step they print
against numpy in float64, computed from the same inputs as the Python
examples (whose constants are the C programs' too); checks the C heat map's
PNG (chunk CRCs, zlib stream, pixels against the printed weights).

    check_c_output.py SELF_ATTENTION MHA_SELF_ATTENTION CROSS_ATTENTION
"""

import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

import cross_attention as cross
import mha_self_attention as mha
import self_attention as sa
from walkthrough_support import check, softmax64

# Printed with 6 decimals: half a unit of the last one, plus fp32's own error.
PRINTED = 2e-6


def run(*command):
    result = subprocess.run(command, capture_output=True, encoding="utf-8")
    sys.stdout.write(result.stdout)
    if result.returncode != 0:
        sys.exit(f"{command[0]} failed ({result.returncode}): {result.stderr}")
    return result.stdout


def parse_steps(text):
    """{title: (row labels, float64 matrix)} of the '-- title [r x c]' blocks."""
    steps, lines = {}, text.splitlines()
    for at, line in enumerate(lines):
        if line.startswith("-- "):
            title, shape = line[3:].rsplit(" [", 1)
            rows, cols = (int(n) for n in shape.rstrip("]").split(" x "))
            body = [row.split() for row in lines[at + 1:at + 1 + rows]]
            assert all(len(row) == cols + 1 for row in body), f"{title}: malformed rows"
            steps[title] = ([row[0] for row in body],
                            np.array([row[1:] for row in body], dtype=np.float64))
    return steps


def expect(steps, title, want, labels=None):
    got_labels, got = steps[title]
    assert got.shape == np.shape(want), f"{title}: shape {got.shape}, expected {np.shape(want)}"
    assert labels is None or got_labels == list(labels), f"{title}: rows {got_labels}"
    print(f"{title}:", end="")
    check(title, got, want, PRINTED)


def check_self_attention(exe):
    steps = parse_steps(run(exe))
    n, d_model = sa.X.shape
    x64 = sa.X.astype(np.float64) + sa.position_encoding64(n, d_model)
    q, k, v = x64 @ sa.W_Q, x64 @ sa.W_K, x64 @ sa.W_V
    scores = q @ k.T / np.sqrt(sa.W_Q.shape[1])
    weights = softmax64(scores)
    for title, want in (("word vectors", sa.X), ("position encoding", x64 - sa.X),
                        ("x = word vectors + position encoding", x64),
                        ("q = x w_q", q), ("k = x w_k", k), ("v = x w_v", v),
                        ("scores = q k^T / sqrt(d_k)", scores),
                        ("weights = softmax(scores)", weights),
                        ("context = weights v", weights @ v),
                        ("ak_attention(q, k, v)", weights @ v)):
        expect(steps, title, want, sa.WORDS)
    for title, w in (("w_q", sa.W_Q), ("w_k", sa.W_K), ("w_v", sa.W_V)):
        expect(steps, title, w)


def check_mha(exe):
    steps = parse_steps(run(exe))
    n, d_model = sa.X.shape
    x64 = sa.X.astype(np.float64) + sa.position_encoding64(n, d_model)
    expect(steps, "x = word vectors + position encoding", x64, sa.WORDS)
    shapes = (("w_q", mha.D_K), ("w_k", mha.D_K), ("w_v", mha.D_V))
    w = {name: mha.make_weights(which, cols, d_model)
         for which, (name, cols) in enumerate(shapes)}
    heads = []
    for h in range(mha.HEADS):
        for name in w:
            expect(steps, f"head {h} {name}", w[name][h])
        q, k, v = (x64 @ w[name][h] for name in w)
        heads.append(softmax64(q @ k.T / np.sqrt(mha.D_K)) @ v)
        expect(steps, f"head {h} context", heads[-1], sa.WORDS)
    expect(steps, "heads concatenated", np.concatenate(heads, axis=1), sa.WORDS)


def read_gray_png(path):
    """The pixels of an 8-bit grayscale PNG with unfiltered rows, every CRC
    and the zlib stream's Adler-32 (zlib.decompress) checked."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    at, chunks = 8, {}
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert crc == zlib.crc32(kind + body), f"bad CRC in {kind}"
        chunks[kind] = chunks.get(kind, b"") + body
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, colour, interlace) == (8, 0, 0) and b"IEND" in chunks
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, width + 1)
    assert not raw[:, 0].any(), "a row with a filter"
    return raw[:, 1:]


def check_cross_attention(exe):
    with tempfile.TemporaryDirectory() as tmp:
        png = os.path.join(tmp, "heatmap.png")
        steps = parse_steps(run(exe, cross.EMBEDDINGS, png))
        pixels = read_gray_png(png)
    vocabulary, table = cross.read_vocabulary()
    weights64, _ = cross.reference_weights64(vocabulary, table)
    title = "attention weights (columns: the english words)"
    expect(steps, title, weights64, cross.FRENCH)
    weights = steps[title][1]
    cross.check_alignment(weights)
    # Each weight is a square of equal pixels, brightness round(255 * weight).
    cell = pixels.shape[0] // len(cross.FRENCH)
    assert pixels.shape == (cell * len(cross.FRENCH), cell * len(cross.ENGLISH))
    want = np.kron(np.rint(255 * weights), np.ones((cell, cell)))
    assert np.abs(pixels - want).max() <= 1, "the heat map's pixels are not the weights"
    print(f"heat map: {pixels.shape[1]} x {pixels.shape[0]} pixels, CRCs, Adler-32 and cells match")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    check_self_attention(sys.argv[1])
    check_mha(sys.argv[2])
    check_cross_attention(sys.argv[3])
    print("the C walkthrough's steps equal numpy float64")


if __name__ == "__main__":
    main()

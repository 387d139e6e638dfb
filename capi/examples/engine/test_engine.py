"""Runs the engine on random Llama checkpoints and checks the logits of every
step against a float64 numpy forward pass of the same stored weights.

    test_engine.py ENGINE

Three runs: bf16 tensors decoded with the bf16 paged cache (small pages,
so that sequences span several and decoding crosses page boundaries); f16
tensors (norms in f32) with tied embeddings, head_dim != hidden / heads and a
single K/V head, decoded with the fp32 contiguous cache; and bf16 again with
the prompts prefilled in chunks of 4 (later chunks attend to the cached keys
of earlier ones, and sequences whose prompt is done sit a pass out). Then --compare, and
malformed checkpoints, which must be refused with a message.
"""

import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_llama import CONFIG, Reference, round_bf16, write_checkpoint  # noqa: E402

# Logits and K/V against float64, relative to the row's RMS (logits and
# activations here are of unit scale). The engine stores and accumulates in
# fp32: the library's contract bounds a GEMM at 1e-6 sqrt(k) relative to the
# product of the norms (about 1e-5 for k = 128) and attention at 1e-5 on unit
# outputs; a layer chains about eight such steps whose errors add along the
# residual stream (each block's input is renormalized, so they do not
# compound): 2 layers x 8 x 1e-5 is about 1e-4. The errors it must catch are
# far larger: an unmodelled bf16 rounding of K/V moves logits by ~1e-3, a
# wrong position, head, mask or page by ~0.1 or more.
TOL = 1e-4

PROMPTS = [[5, 17, 3, 88, 42, 9, 61], list(range(20, 33)), [96, 0]]
STEPS = 6
WORK = os.path.abspath("engine-test")


def run(engine, *args, expect_ok=True):
    r = subprocess.run([engine, *args], capture_output=True, encoding="utf-8", timeout=120)
    if expect_ok and r.returncode != 0:
        sys.exit(f"engine {' '.join(args)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def prompt_args(prompts):
    return [a for p in prompts for a in ("--prompt", ",".join(map(str, p)))]


def generated(stdout, n):
    """The ids of each '  sequence b: ...' line, in order (several blocks with --compare)."""
    rows = [[int(t) for t in m.group(2).split(",")]
            for m in re.finditer(r"^  sequence (\d+): ([\d,]+)$", stdout, re.M)]
    assert len(rows) % n == 0 and rows, f"no generated ids in:\n{stdout}"
    return rows


def bf16_ulp(x):
    return 2.0 ** (np.floor(np.log2(np.maximum(np.abs(x), 1e-30))) - 7)


def read_kv(path, cfg, lens):
    """{(layer, which, seq): [tokens, kv_heads, head_dim]} from --dump-kv."""
    hd = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    flat, at, out = np.fromfile(path, dtype="<f4").astype(np.float64), 0, {}
    for layer in range(cfg["num_hidden_layers"]):
        for which in range(2):
            for b, n in enumerate(lens):
                size = n * cfg["num_key_value_heads"] * hd
                out[layer, which, b] = flat[at:at + size].reshape(n, -1, hd)
                at += size
    assert at == flat.size, f"{path}: {flat.size} floats, expected {at}"
    return out


def check_run(name, cfg, stored, stdout, logits_path, kv_path, bf16_cache):
    vocab, batch = cfg["vocab_size"], len(PROMPTS)
    got = np.fromfile(logits_path, dtype="<f4").astype(np.float64).reshape(STEPS, batch, vocab)
    ids = generated(stdout, batch)[:batch]
    kv = read_kv(kv_path, cfg, [len(p) + STEPS - 1 for p in PROMPTS])
    worst, adopted = 0.0, 0
    for b, prompt in enumerate(PROMPTS):
        def kv_store(layer, which, pos, x, b=b):
            """The cache's values for the reference: the engine's stored ones,
            checked first. Stored in fp32 they must be x within TOL; in bf16,
            x rounded to bf16, where a value within TOL of a rounding
            midpoint may round either way (fp32 and float64 land on either
            side of it): the engine's choice is then the one to follow."""
            nonlocal adopted
            c = kv[layer, which, b][pos.astype(int)]
            scale = np.sqrt(np.mean(x * x, axis=-1, keepdims=True))
            err = np.abs(c - x)
            if not bf16_cache:
                assert np.all(err <= TOL * scale), f"{name}: K/V off by {err.max():.3g}"
                return x
            assert np.all(c == round_bf16(c)) and np.all(
                err <= 0.5 * np.maximum(bf16_ulp(x), bf16_ulp(c)) + TOL * scale), \
                f"{name}: layer {layer} {'KV'[which]} not x rounded to bf16"
            adopted += int(np.sum(c != round_bf16(x)))
            return c

        ref, feed = Reference(cfg, stored, kv_store), prompt
        for step in range(STEPS):
            want, have = ref.step(feed), got[step, b]
            tol = TOL * max(1.0, float(np.sqrt(np.mean(want * want))))
            err = float(np.max(np.abs(have - want)))
            worst = max(worst, err)
            assert err <= tol, \
                f"{name}: sequence {b} step {step}: logits off by {err:.3g} > {tol:.3g}"
            token = ids[b][step]
            assert token == int(np.argmax(have)), f"{name}: id {token} is not its logits' argmax"
            # Greedy agrees with float64 unless two logits tie within the tolerance.
            assert want[token] >= want.max() - 2 * tol, \
                f"{name}: sequence {b} step {step}: {token} where float64 picks {np.argmax(want)}"
            feed = [token]
    edge = f"; {adopted} K/V values on a bf16 rounding edge" if bf16_cache else ""
    print(f"{name}: {STEPS} steps x {batch} sequences, logits within {worst:.2g} of float64 "
          f"(tolerance {TOL:g} x rms){edge}")


def refused(engine, name, directory, keyword, extra=()):
    r = run(engine, directory, *prompt_args(PROMPTS[:1]), "--steps", "1", *extra, expect_ok=False)
    assert r.returncode != 0, f"{name}: accepted"
    assert keyword in r.stderr, f"{name}: message lacks {keyword!r}: {r.stderr}"
    print(f"refused {name}: {r.stderr.strip()}")


def malformed(engine, source):
    d = os.path.join(WORK, "broken")

    def fresh():
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(source, d)
        return os.path.join(d, "model.safetensors"), os.path.join(d, "config.json")

    st, _ = fresh()
    with open(st, "r+b") as f:
        f.truncate(os.path.getsize(st) - 10)
    refused(engine, "a truncated file", d, "truncated")
    st, _ = fresh()
    with open(st, "r+b") as f:
        f.write(struct.pack("<Q", 1 << 40))
    refused(engine, "a header past the end", d, "header length")
    st, _ = fresh()
    with open(st, "r+b") as f:
        f.seek(8)
        f.write(b"[")
    refused(engine, "a header that is not JSON", d, "JSON")
    _, cfg_path = fresh()
    with open(cfg_path) as f:
        text = f.read()
    with open(cfg_path, "w") as f:
        f.write(text.replace('"vocab_size": 97', '"vocab_size": 98'))
    refused(engine, "a config that disagrees with the tensors", d, "shape")
    with open(cfg_path, "w") as f:
        f.write(text.replace('"hidden_size": 64,', ""))
    refused(engine, "a config without hidden_size", d, "hidden_size")
    with open(cfg_path, "w") as f:
        f.write(text.replace('"rope_theta"',
                             '"rope_scaling": {"rope_type": "llama3"}, "rope_theta"'))
    refused(engine, "RoPE scaling", d, "rope_scaling")
    with open(cfg_path, "w") as f:
        f.write(text.replace('"rope_theta": 10000.0',
                             '"rope_parameters": {"rope_type": "llama3", "rope_theta": 10000.0}'))
    refused(engine, "RoPE scaling in rope_parameters", d, "rope_parameters")
    with open(cfg_path, "w") as f:
        f.write(text.replace('"rope_theta": 10000.0', '"rope_theta": 10000.0, '
                             '"rope_parameters": {"rope_theta": 500000.0}'))
    refused(engine, "two different thetas", d, "differ")
    refused(engine, "a token past the vocabulary", source, "vocab_size", ("--prompt", "97"))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    engine = os.path.abspath(sys.argv[1])
    shutil.rmtree(WORK, ignore_errors=True)
    # The second run's theta and eps are far from the engine's fallbacks, so
    # that a config value read wrongly or not at all shows in the logits; the
    # third writes theta as transformers 5 does (rope_parameters).
    runs = [
        ("bf16 tensors, bf16 paged cache", dict(CONFIG), "bf16", False, ["--page-size", "4"]),
        ("f16 tensors, fp32 contiguous cache",
         dict(CONFIG, head_dim=32, num_key_value_heads=1, tie_word_embeddings=True,
              rope_theta=1234.5, rms_norm_eps=0.05), "f16", True, ["--fp32-cache"]),
        ("bf16 tensors, bf16 paged cache, chunked prefill, rope_parameters",
         dict(CONFIG, rope_theta=500000.0), "bf16", False,
         ["--page-size", "3", "--prefill-chunk", "4"]),
    ]
    for n, (name, cfg, dtype, f32_norms, extra) in enumerate(runs):
        d = os.path.join(WORK, f"model{n}")
        stored = write_checkpoint(d, cfg, dtype, seed=n, f32_norms=f32_norms,
                                  rope_parameters="rope_parameters" in name)
        logits, kv = os.path.join(WORK, f"logits{n}.f32"), os.path.join(WORK, f"kv{n}.f32")
        r = run(engine, d, *prompt_args(PROMPTS), "--steps", str(STEPS), "--dump-logits", logits,
                "--dump-kv", kv, *extra)
        sys.stdout.write(r.stdout)
        check_run(name, cfg, stored, r.stdout, logits, kv, bf16_cache="--fp32-cache" not in extra)

    r = run(engine, os.path.join(WORK, "model0"), *prompt_args(PROMPTS), "--steps", "4",
            "--compare")
    sys.stdout.write(r.stdout)
    assert "bf16 paged cache" in r.stdout and "fp32 contiguous cache" in r.stdout
    assert len(re.findall(r"decode \d+ tokens in [\d.]+ ms: \d+ tokens/s", r.stdout)) == 2
    assert "bf16 paged / fp32 contiguous:" in r.stdout
    malformed(engine, os.path.join(WORK, "model0"))
    print("engine: every check passed")


if __name__ == "__main__":
    main()

"""A random Llama checkpoint in Hugging Face's format, and its forward pass in
float64, for testing the engine and for trying it out.

    python3 tiny_llama.py DIR [--dtype bf16|f16|f32] [--hidden 64] [--intermediate 128]
        [--heads 4] [--kv-heads 2] [--layers 2] [--vocab 97] [--seed 0]

writes DIR/config.json and DIR/model.safetensors (written by hand: the
format is an 8-byte little-endian header length, a JSON header, the bytes).
Needs numpy only.
"""

import argparse
import json
import os
import struct

import numpy as np

CONFIG = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
              num_key_value_heads=2, num_hidden_layers=2, vocab_size=97, rms_norm_eps=1e-5,
              rope_theta=10000.0, max_position_embeddings=128, tie_word_embeddings=False)


def bf16_bits(x):
    """float32 -> bf16 bit patterns, rounded to nearest even (no NaN here)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_widen(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def round_bf16(x):
    """x rounded to bf16 through float32, as float64."""
    return bf16_widen(bf16_bits(np.float32(x))).astype(np.float64)


def store(x, dtype):
    """(safetensors dtype, raw bytes, the stored value as float64) of x."""
    if dtype == "bf16":
        bits = bf16_bits(x)
        return "BF16", bits.tobytes(), bf16_widen(bits).astype(np.float64)
    if dtype == "f16":
        h = x.astype(np.float16)
        return "F16", h.tobytes(), h.astype(np.float64)
    f = x.astype(np.float32)
    return "F32", f.tobytes(), f.astype(np.float64)


def write_safetensors(path, tensors):
    """tensors: [(name, dtype, shape, bytes)] in file order."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # as Hugging Face's writer pads it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(data)


def random_weights(cfg, rng):
    """{name: float32 array} of a Llama with unit-scale activations and logits."""
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = cfg.get("head_dim", h // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm():
        return (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.standard_normal((v, h)).astype(np.float32)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        w[p + "input_layernorm.weight"] = norm()
        w[p + "self_attn.q_proj.weight"] = mat(q, h)
        w[p + "self_attn.k_proj.weight"] = mat(kv, h)
        w[p + "self_attn.v_proj.weight"] = mat(kv, h)
        w[p + "self_attn.o_proj.weight"] = mat(h, q)
        w[p + "post_attention_layernorm.weight"] = norm()
        w[p + "mlp.gate_proj.weight"] = mat(i, h)
        w[p + "mlp.up_proj.weight"] = mat(i, h)
        w[p + "mlp.down_proj.weight"] = mat(h, i)
    w["model.norm.weight"] = norm()
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(v, h)
    return w


def write_checkpoint(directory, cfg, dtype="bf16", seed=0, f32_norms=False, rope_parameters=False):
    """Writes a random checkpoint; returns its stored weights as float64.
    f32_norms keeps the norm weights in F32 (mixed dtypes, as some exports have);
    rope_parameters writes rope_theta as transformers 5 does."""
    os.makedirs(directory, exist_ok=True)
    weights = random_weights(cfg, np.random.default_rng(seed))
    tensors, stored = [], {}
    for name, x in weights.items():
        kind, data, value = store(x, "f32" if f32_norms and x.ndim == 1 else dtype)
        tensors.append((name, kind, x.shape, data))
        stored[name] = value
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
    config = dict(cfg, architectures=["LlamaForCausalLM"], model_type="llama",
                  hidden_act="silu", torch_dtype={"bf16": "bfloat16", "f16": "float16",
                                                  "f32": "float32"}[dtype])
    if rope_parameters:
        config["rope_parameters"] = {"rope_theta": config.pop("rope_theta"), "rope_type": "default"}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return stored


class Reference:
    """The float64 forward pass of HF's LlamaForCausalLM on the stored weights,
    one sequence at a time, keeping its own K/V cache. kv_store(layer, which,
    positions, values) may replace the values the cache keeps (the test
    models a bf16 cache with it)."""

    def __init__(self, cfg, w, kv_store=None):
        self.cfg, self.w = cfg, w
        self.hd = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
        self.kv_store = kv_store or (lambda layer, which, pos, x: x)
        half = np.arange(0, self.hd, 2) / self.hd
        # Computed in float32 as HF does (and as ak_rope does without inv_freq).
        self.inv_freq = (1.0 / np.float32(cfg["rope_theta"]) ** half.astype(np.float32)).astype(
            np.float32).astype(np.float64)
        self.k = [np.zeros((0, cfg["num_key_value_heads"], self.hd))] * cfg["num_hidden_layers"]
        self.v = list(self.k)

    def rms_norm(self, x, name):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.cfg["rms_norm_eps"]) * \
            self.w[name]

    def rope(self, x, pos):  # x [tokens, heads, hd]; NeoX (rotate-half) pairs (i, i + hd/2)
        angle = pos[:, None] * self.inv_freq[None, :]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        a, b = x[..., :self.hd // 2], x[..., self.hd // 2:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    def step(self, tokens):
        """Feeds new tokens; returns the logits of the last one."""
        cfg, w, hd = self.cfg, self.w, self.hd
        nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        start = self.k[0].shape[0]
        pos = np.arange(start, start + len(tokens), dtype=np.float64)
        x = w["model.embed_tokens.weight"][np.asarray(tokens)]
        for n in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{n}."
            h = self.rms_norm(x, p + "input_layernorm.weight")
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(-1, nh, hd)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(-1, nkv, hd)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(-1, nkv, hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            self.k[n] = np.concatenate([self.k[n], self.kv_store(n, 0, pos, k)])
            self.v[n] = np.concatenate([self.v[n], self.kv_store(n, 1, pos, v)])
            keys, vals = self.k[n], self.v[n]
            out = np.empty((len(tokens), nh, hd))
            for head in range(nh):
                g = head // (nh // nkv)
                s = q[:, head, :] @ keys[:, g, :].T / np.sqrt(hd)
                # causal: the query at position start + i sees keys 0 .. start + i
                s[np.arange(keys.shape[0])[None, :] > pos[:, None]] = -np.inf
                e = np.exp(s - s.max(axis=1, keepdims=True))
                out[:, head, :] = (e / e.sum(axis=1, keepdims=True)) @ vals[:, g, :]
            x = x + out.reshape(len(tokens), nh * hd) @ w[p + "self_attn.o_proj.weight"].T
            h = self.rms_norm(x, p + "post_attention_layernorm.weight")
            g = h @ w[p + "mlp.gate_proj.weight"].T
            u = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
        head_w = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        return self.rms_norm(x[-1], "model.norm.weight") @ head_w.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--dtype", choices=("bf16", "f16", "f32"), default="bf16")
    ap.add_argument("--seed", type=int, default=0)
    for flag, key in (("--hidden", "hidden_size"), ("--intermediate", "intermediate_size"),
                      ("--heads", "num_attention_heads"), ("--kv-heads", "num_key_value_heads"),
                      ("--layers", "num_hidden_layers"), ("--vocab", "vocab_size")):
        ap.add_argument(flag, dest=key, type=int, default=CONFIG[key])
    args = ap.parse_args()
    cfg = dict(CONFIG, **{k: getattr(args, k) for k in CONFIG if hasattr(args, k)})
    write_checkpoint(args.directory, cfg, args.dtype, args.seed)
    print(f"wrote {args.directory}/config.json and model.safetensors ({args.dtype})")


if __name__ == "__main__":
    main()

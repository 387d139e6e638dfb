"""Tables of the score-modifier, packed-batch, rotary and embedding
benchmarks (bench_modifiers.cpp: mods/ and varlen/; bench_rope.cpp: rope/
and embedding/), for compare.py."""
import re

from compare_kv import _pct, _ratio, _value, _x

MODS_RE = re.compile(r"^h(\d+)_d(\d+)_L(\d+)_causal$")
# Targets: softcap costs at most 15% over plain prefill, ALiBi and sinks 5%;
# ALiBi at L 32768 runs at the plain rate; a packed batch reaches 90% of one
# long sequence's rate and 1.2x its sequences called one by one; ak_rope
# reaches 60% of the copy bandwidth and 3x a per-element sin/cos loop.
COST_TARGET = {"softcap": 1.15, "alibi": 1.05, "sinks": 1.05}
VARLEN_SINGLE, VARLEN_SEPARATE = 0.90, 1.2
ROPE_COPY, ROPE_LOOP = 0.60, 3.0


def _g(x, scale=1e9, digits=1):
    return "—" if x is None else f"{x / scale:.{digits}f}"


def _copy_gbs(entries, threads):
    for (kind, _, t), by_impl in entries.items():
        if kind == "membw" and t == threads:
            return _value(by_impl, "copy", "bytes")
    return None


def mods_table(entries):
    """One row per (shape, threads, modifier): GFLOP/s, time against plain,
    peak resident memory."""
    head = ["heads", "d", "L", "thr", "modifier", "GFLOP/s", "time vs plain (paired)",
            "peak RSS MiB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 5 + ["---:"] * 3) + "|"]
    for (kind, shape, t), by_impl in entries.items():
        m = MODS_RE.match(shape)
        if kind != "mods" or not m:
            continue
        for impl in by_impl:
            rss = _value(by_impl, impl, "max_rss_MiB")
            cells = [m.group(1), m.group(2), m.group(3), str(t), impl.replace("attnkern_", ""),
                     _g(_value(by_impl, impl, "flops")), _x(_value(by_impl, impl, "vs_plain")),
                     "—" if rss is None else f"{rss:.0f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def varlen_table(entries):
    """One row per (mask, threads): useful GFLOP/s of the packed batch, of
    its sequences called one by one, and of its longest sequence alone."""
    head = ["shape", "thr", "packed GFLOP/s", "separate calls", "one 2048 sequence",
            "packed vs one sequence (paired)", "packed vs separate (paired)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * 5) + "|"]
    for (kind, shape, t), by_impl in entries.items():
        if kind != "varlen":
            continue
        p, s, one = (_value(by_impl, f"attnkern_{x}", "flops")
                     for x in ("packed", "separate", "single"))
        a = _value(by_impl, "attnkern_single", "packed_vs_single")
        b = _value(by_impl, "attnkern_packed", "vs_separate")
        cells = [shape, str(t), _g(p), _g(s), _g(one), _pct(a), _x(b)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def rope_table(entries):
    """ak_rope and ak_embedding in GB/s (read + written), against the copy
    bandwidth and the per-element sin/cos loop."""
    head = ["benchmark", "thr", "GB/s (read + written)", "% of copy", "vs sin/cos loop"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * 3) + "|"]
    for (kind, shape, t), by_impl in entries.items():
        if kind not in ("rope", "embedding"):
            continue
        copy = _copy_gbs(entries, t)
        loop = _value(by_impl, "sincos_loop", "bytes")
        for impl in by_impl:
            b = _value(by_impl, impl, "bytes")
            vs_loop = _x(_ratio(b, loop)) if impl == "attnkern" and loop else "—"
            cells = [f"{kind}/{impl}/{shape}", str(t), _g(b), _pct(_ratio(b, copy)), vs_loop]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def summary(entries):
    """Bullets against the targets, per thread count."""
    out = []
    threads = sorted({t for (k, _, t) in entries if k in ("mods", "varlen", "rope")})
    for t in threads:
        for (kind, shape, tt), by_impl in entries.items():
            if tt != t:
                continue
            if kind == "mods":
                for impl in by_impl:
                    mod = impl.replace("attnkern_", "")
                    r = _value(by_impl, impl, "vs_plain")
                    if mod in COST_TARGET and r is not None:
                        target = COST_TARGET[mod] if "L2048" in shape else 1.0 + 0.05
                        ok = "met" if r <= target else "**not met**"
                        out.append(f"- {mod} prefill `{shape}`, {t} thr: {_x(r)} the plain "
                                   f"time (target ≤ {_x(target)}): {ok}")
            elif kind == "varlen":
                a = _value(by_impl, "attnkern_single", "packed_vs_single")
                b = _value(by_impl, "attnkern_packed", "vs_separate")
                if a is not None and b is not None:
                    ok = "met" if a >= VARLEN_SINGLE and b >= VARLEN_SEPARATE else "**not met**"
                    out.append(f"- packed batch `{shape}`, {t} thr: {_pct(a)} of one 2048 "
                               f"sequence's GFLOP/s, {_x(b)} separate calls (targets "
                               f"{_pct(VARLEN_SINGLE)}, {_x(VARLEN_SEPARATE)}): {ok}")
            elif kind == "rope":
                b, loop = _value(by_impl, "attnkern", "bytes"), _value(by_impl, "sincos_loop",
                                                                       "bytes")
                c, x = _ratio(b, _copy_gbs(entries, t)), _ratio(b, loop)
                if c is not None and x is not None:
                    ok = "met" if c >= ROPE_COPY and x >= ROPE_LOOP else "**not met**"
                    out.append(f"- ak_rope `{shape}`, {t} thr: {_pct(c)} of the copy bandwidth, "
                               f"{_x(x)} the sin/cos loop (targets {_pct(ROPE_COPY)}, "
                               f"{_x(ROPE_LOOP)}): {ok}")
    return out

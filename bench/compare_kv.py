"""Tables of the half-precision and paged K/V cache benchmarks
(bench_kv_cache.cpp: kvdecode/ and kvprefill/), for compare.py."""
import math
import re

F32 = "attnkern_f32"
DECODE_RE = re.compile(r"^h(\d+)_kvh(\d+)_d(\d+)_kv(\d+)$")
PREFILL_RE = re.compile(r"^d(\d+)_L(\d+)_(causal|nomask)$")
# Targets: decode streams K/V at >= 85% of the adjacent read (2 bytes per
# element), MHA at >= 1.8x fp32's token rate, paged at >= 95% of
# contiguous; prefill at >= 90% of fp32's GFLOP/s.
READ_TARGET, TOKEN_TARGET, PAGED_TARGET, PREFILL_TARGET = 0.85, 1.8, 0.95, 0.90


def _value(by_impl, impl, counter):
    e = by_impl.get(impl)
    return None if e is None or e.error else e.value(counter)


def _ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def _pct(x):
    return "—" if x is None else f"{100 * x:.0f}%"


def _x(x):
    return "—" if x is None else f"{x:.2f}×"


def _impls(entries, kind):
    seen = []
    for (k, _, _), by_impl in entries.items():
        if k == kind:
            for i in by_impl:
                if i not in seen:
                    seen.append(i)
    return [F32] + [i for i in seen if i != F32]


def _contiguous(impl):
    return re.sub(r"_paged\d+$", "", impl)


# The ratios below are the paired medians the benchmark reports (vs_f32 for a
# contiguous half cache, vs_contiguous for a paged one: baseline time over
# this time, each call timed next to its baseline's); from separate medians
# only where a run lacks them.
def _paged_vs_contiguous(by_impl, impl):
    paired = _value(by_impl, impl, "vs_contiguous")
    if paired is not None:
        return paired
    return _ratio(_value(by_impl, _contiguous(impl), "ms"), _value(by_impl, impl, "ms"))


def _speed_vs_f32(by_impl, impl):
    """This storage's speed over fp32's: a paged one's is its ratio to the
    contiguous cache times that cache's to fp32."""
    if impl == F32:
        return 1.0
    if "_paged" in impl:
        p, c = _paged_vs_contiguous(by_impl, impl), _speed_vs_f32(by_impl, _contiguous(impl))
        return p * c if p is not None and c is not None else None
    paired = _value(by_impl, impl, "vs_f32")
    if paired is not None:
        return paired
    return _ratio(_value(by_impl, F32, "ms"), _value(by_impl, impl, "ms"))


def decode_table(entries):
    """One row per (shape, threads, storage): GB/s, % of the adjacent read,
    token rate against fp32, and paged against contiguous."""
    head = ["heads/kv heads", "kv_len", "thr", "K/V storage", "GB/s (stored bytes)",
            "% of adjacent read", "tokens/s vs fp32", "paged vs contiguous"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 4 + ["---:"] * 4) + "|"]
    impls = _impls(entries, "kvdecode")
    for (kind, shape, t), by_impl in entries.items():
        m = DECODE_RE.match(shape)
        if kind != "kvdecode" or not m:
            continue
        h, kvh, _, n = m.groups()
        for impl in impls:
            if impl not in by_impl:
                continue
            gbs = _value(by_impl, impl, "bytes")
            paged = _paged_vs_contiguous(by_impl, impl) if "_paged" in impl else None
            cells = [f"{h}/{kvh}", n, str(t), impl.replace("attnkern_", ""),
                     "—" if gbs is None else f"{gbs / 1e9:.1f}",
                     _pct(_ratio(gbs / 1e9 if gbs else None, _value(by_impl, impl, "read_adj"))),
                     _x(_speed_vs_f32(by_impl, impl)), _pct(paged)]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def prefill_table(entries):
    head = ["d", "L", "mask", "thr", "K/V storage", "GFLOP/s", "vs fp32"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 5 + ["---:"] * 2) + "|"]
    impls = _impls(entries, "kvprefill")
    for (kind, shape, t), by_impl in entries.items():
        m = PREFILL_RE.match(shape)
        if kind != "kvprefill" or not m:
            continue
        d, L, mask = m.groups()
        for impl in impls:
            if impl not in by_impl:
                continue
            f = _value(by_impl, impl, "flops")
            cells = [d, L, mask, str(t), impl.replace("attnkern_", ""),
                     "—" if f is None else f"{f / 1e9:.1f}", _pct(_speed_vs_f32(by_impl, impl))]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def summary(entries):
    """Bullets against the targets, per thread count."""
    out = []
    threads = sorted({t for (k, _, t) in entries if k in ("kvdecode", "kvprefill")})
    for t in threads:
        reads, tokens, paged, prefill = [], [], [], []
        for (kind, shape, tt), by_impl in entries.items():
            if tt != t:
                continue
            if kind == "kvdecode":
                m = DECODE_RE.match(shape)
                for impl in by_impl:
                    if impl == F32:
                        continue
                    gbs = _value(by_impl, impl, "bytes")
                    r = _ratio(gbs / 1e9 if gbs else None, _value(by_impl, impl, "read_adj"))
                    if r is not None:
                        reads.append((r, f"{shape} {impl}"))
                    if "_paged" in impl:
                        p = _paged_vs_contiguous(by_impl, impl)
                        if p is not None:
                            paged.append((p, f"{shape} {impl}"))
                    elif m and m.group(1) == m.group(2):
                        x = _speed_vs_f32(by_impl, impl)
                        if x is not None:
                            tokens.append((x, f"{shape} {impl}"))
            elif kind == "kvprefill":
                for impl in by_impl:
                    if impl != F32:
                        r = _speed_vs_f32(by_impl, impl)
                        if r is not None:
                            prefill.append((r, f"{shape} {impl}"))

        def bullet(what, xs, target, fmt):
            if xs:
                lo, where = min(xs)
                met = sum(1 for x, _ in xs if x >= target)
                out.append(f"- {what}, {t} thr: min {fmt(lo)} (`{where}`), geomean "
                           f"{fmt(math.exp(sum(math.log(x) for x, _ in xs) / len(xs)))}; "
                           f"**{met} of {len(xs)}** at {fmt(target)} or more")

        bullet("half/paged decode, % of the adjacent read (stored bytes)", reads, READ_TARGET,
               _pct)
        bullet("MHA decode (32/32), tokens/s against fp32", tokens, TOKEN_TARGET, _x)
        bullet("paged against contiguous decode", paged, PAGED_TARGET, _pct)
        bullet("half-precision prefill, GFLOP/s against fp32", prefill, PREFILL_TARGET, _pct)
    return out

"""Kernels with two declared paths (ABI 2.2 predicates, a 2.7 key tile, a path's own precision):
"short" (Tk <= 64) runs an online softmax over tiles of 16 keys in float64; "long" (Tk >= 65)
rounds P to bf16 before P.V. `paths` declares both honestly; `long_undeclared_bf16` declares the
long path at the kernel's f32 (its rounding is then an error of that path); `short_past_64` serves
Tk = 65 by its short path (the predicate says long)."""
import numpy as np

from attest_kernel import Declaration, Path, Precision, declare, from_float32, to_float32

FEATURES = ["causal", "lse"]
SHORT = Path("short", k_len=(1, 64), key_tile=16)
LONG = Path("long", k_len=(65, None), precision=Precision(p="bf16"))


def scores(p):
    q, k, v = (x.astype(np.float64) for x in (p.q, p.k, p.v))
    s = np.where(p.visible()[:, None], p.scale * q @ k.swapaxes(-1, -2), -np.inf)
    return s, np.nan_to_num(v)


def finish(o, total, m):
    """(o, lse) with an empty row's O = 0 and LSE = -inf."""
    with np.errstate(divide="ignore"):
        return o / np.maximum(total, 1e-300), np.log(total[..., 0]) + m[..., 0]


def online(p, tile=16):
    """Tiles of `tile` keys, each rescaling the running sums to the running max."""
    s, v = scores(p)
    m = np.full(s.shape[:-1] + (1,), -1e300)
    total = np.zeros_like(m)
    o = np.zeros(s.shape[:-1] + (v.shape[-1],))
    for start in range(0, p.k_len, tile):
        block = s[..., start:start + tile]
        new_m = np.maximum(m, block.max(axis=-1, keepdims=True))
        w = np.exp(block - new_m)
        rescale = np.exp(m - new_m)
        total = total * rescale + w.sum(axis=-1, keepdims=True)
        o = o * rescale + w @ v[..., start:start + tile, :]
        m = new_m
    return finish(o, total, m)


def p_in_bf16(p):
    """P = w / sum rounded to bf16 before P.V (the sum and LSE from the unrounded weights)."""
    s, v = scores(p)
    m = np.maximum(s.max(axis=-1, keepdims=True), -1e300)
    w = np.exp(s - m)
    total = w.sum(axis=-1, keepdims=True)
    safe = np.maximum(total, 1e-300)
    weights = to_float32(from_float32((w / safe).astype(np.float32), "bf16"), "bf16").astype(np.float64)
    return finish((weights @ v) * safe, total, m)


def two_paths(p, short_up_to=64):
    if p.k_len <= short_up_to:
        return online(p) + ("short",)
    return p_in_bf16(p) + ("long",)


@declare(Declaration(name="two-paths", features=FEATURES, paths=[SHORT, LONG]))
def paths(p):
    return two_paths(p)


@declare(Declaration(name="long-undeclared-bf16", features=FEATURES, paths=[SHORT, Path("long", k_len=(65, None))]))
def long_undeclared_bf16(p):
    return two_paths(p)


@declare(Declaration(name="short-past-64", features=FEATURES, paths=[SHORT, LONG]))
def short_past_64(p):
    if p.k_len == 65:
        return online(p) + ("short",)  # exact, but not the path the declaration names
    return two_paths(p)

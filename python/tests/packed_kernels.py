"""Python kernels taking ABI 2.8's packed varlen layout: numpy attention over the packed buffers
(q [total_q][H][Dk] with cu_seqlens, as FlashAttention's varlen functions), one sequence at a time
and never unpacked to padding; the same with the last sequence dropped (a loop over B - 1); and one
declaring int64 offsets (ABI 2.10) that refuses any other width."""
import numpy as np

from attest_kernel import Declaration, declare
from training_kernels import forward

FEATURES = ["causal", "window", "chunk", "lookahead", "key_padding", "query_padding", "gqa", "lse"]


def visible(p, nq, nk):
    """[nq][nk] bool: key j visible to query i of one sequence under the problem's mask terms."""
    i = p.q_offset + np.arange(nq, dtype=np.int64)[:, None]
    j = np.arange(nk, dtype=np.int64)[None, :]
    seen = np.ones((nq, nk), dtype=bool)
    if p.causal:
        seen &= j <= i
    if p.window:
        seen &= i - j < p.window
    if p.chunk:
        seen &= i // p.chunk == j // p.chunk
    if p.lookahead:
        seen &= j - i < p.lookahead
    return seen


def packed_forward(p, sequences=None):
    """o [total_q][H][Dv], lse [H][total_q] of the sequences given (all by default), float64."""
    group = p.heads // p.kv_heads
    o = np.zeros(p.o_shape)
    lse = np.full(p.lse_shape, -np.inf)
    for qs, ks in p.sequences() if sequences is None else sequences:
        q = p.q[qs].astype(np.float64)  # [nq][H][Dk]
        # [nk][H][D]: GQA's shared heads; a hidden key may hold NaN or inf: zero, as training_kernels
        k, v = (np.nan_to_num(np.repeat(x[ks].astype(np.float64), group, axis=1), nan=0.0, posinf=0.0, neginf=0.0)
                for x in (p.k, p.v))
        seen = visible(p, q.shape[0], k.shape[0])[None]  # [1][nq][nk]
        s = np.where(seen, p.scale * np.einsum("ihd,jhd->hij", q, k), -np.inf)
        m = s.max(axis=-1, keepdims=True, initial=-np.inf)
        empty = ~np.isfinite(m)
        w = np.exp(s - np.where(empty, 0.0, m))
        total = w.sum(axis=-1, keepdims=True)
        o[qs] = np.einsum("hij,jhd->ihd", w / np.where(empty, 1.0, total), v)
        lse[:, qs] = np.where(empty, -np.inf, np.log(np.where(empty, 1.0, total)) + m)[..., 0]
    return o, lse, "varlen"


def drops_last_sequence(p):
    return packed_forward(p, p.sequences()[:-1])


@declare(Declaration(name="numpy-packed", features=FEATURES, packed=packed_forward))
def packed(p):
    return forward(p)


@declare(Declaration(name="numpy-packed-drops-last", features=FEATURES, packed=drops_last_sequence))
def packed_drops_last(p):
    return forward(p)


def int64_offsets(p):
    if p.cu_seqlens_q.dtype != np.int64 or p.cu_seqlens_k.dtype != np.int64:
        widths = (p.cu_seqlens_q.dtype, p.cu_seqlens_k.dtype)
        raise TypeError("cu_seqlens are %s and %s, not the int64 declared" % widths)
    o, lse, _ = packed_forward(p)
    return o, lse, "varlen-int64"


@declare(Declaration(name="numpy-packed-int64", features=FEATURES, packed=int64_offsets, packed_int64=True))
def packed_int64(p):
    return forward(p)

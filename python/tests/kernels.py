"""Kernels the tests serve: a float64 reference of every modifier, and kernels that misbehave."""
import os
import sys

import numpy as np

from attest_kernel import Declaration, Precision, declare

ALL = ["causal", "window", "key_padding", "query_padding", "segments", "explicit_mask", "gqa", "lse", "chunk",
       "softcap", "alibi", "bias", "sinks", "lookahead"]


def exact(p):
    """The attention of docs/design.md#problem-semantics in float64: (o, lse)."""
    q, k, v = (p.float32(n).astype(np.float64) for n in ("q", "k", "v"))
    k, v = p.repeat_kv(k), p.repeat_kv(v)
    x = p.scale * q @ k.swapaxes(-1, -2)
    if p.softcap:
        x = p.softcap * np.tanh(x / p.softcap)
    if p.alibi_slopes is not None:
        x = x + p.alibi_slopes[None, :, None, None] * (p.k_positions()[None, :] - p.q_positions()[:, None])
    if p.bias is not None:
        x = x + p.float32("bias")
    visible = p.visible(bias=True)
    s = np.where(visible, x, -np.inf)
    sink = np.full(p.heads, -np.inf) if p.sinks is None else p.sinks.astype(np.float64)
    m = np.maximum(np.maximum(s.max(axis=-1), sink[None, :, None]), -1e300)[..., None]
    w = np.exp(s - m)
    total = w.sum(axis=-1, keepdims=True) + np.exp(sink[None, :, None, None] - m)
    o = w @ np.nan_to_num(v) / np.maximum(total, 1e-300)
    return o, (np.log(total) + m)[..., 0]


@declare(Declaration(name="test-reference", features=ALL))
def reference(p):
    o, lse = exact(p)
    return o, lse, "float64"


@declare(Declaration(name="test-bf16", features=["lse"], precision=Precision.stored("bf16")))
def bf16(p):
    return exact(p)  # float64 values: the package rounds O to bf16


@declare(Declaration(name="test-raises", features=["lse"]))
def raises(p):
    raise ValueError("the kernel broke on purpose at Tq=%d" % p.q_len)


@declare(Declaration(name="test-wrong-shape", features=["lse"]))
def wrong_shape(p):
    o, lse = exact(p)
    return o[..., 0], lse  # [B][H][Tq]: the value dimension dropped


@declare(Declaration(name="test-wrong-dtype", features=["lse"]))
def wrong_dtype(p):
    o, lse = exact(p)
    return o.astype(np.int64), lse


@declare(Declaration(name="test-no-lse", features=["lse"]))
def no_lse(p):
    return exact(p)[0], None


@declare(Declaration(name="test-not-a-tuple", features=["lse"]))
def returns_string(p):
    return "o and lse"


@declare(Declaration(name="test-prints", features=["lse"]))
def prints(p):
    print("hello from the kernel " * 100)  # Python's stdout
    sys.stdout.flush()
    os.write(1, b"ATST" * 64 + b"\n")  # descriptor 1 directly, as C code would: even protocol-like bytes
    return exact(p)


@declare(Declaration(name="test-exits", features=["lse"]))
def exits(p):
    sys.exit(3)


@declare(Declaration(name="test-refuses", features=["lse"]))
def refuses(p):
    import attest_kernel
    raise attest_kernel.Unsupported("no problems with Tq=%d here" % p.q_len)


class Session:
    """Decode: keeps K and V, answers each step with the exact attention over everything so far."""

    def __init__(self, config):
        self.config, self.k, self.v = config, None, None
        self.closed = False

    def step(self, q, k, v, want_lse):
        self.k = k if self.k is None else np.concatenate([self.k, k], axis=2)
        self.v = v if self.v is None else np.concatenate([self.v, v], axis=2)
        c, total, n = self.config, self.k.shape[2], q.shape[2]
        group = c.heads // c.kv_heads
        kk, vv = np.repeat(self.k, group, axis=1), np.repeat(self.v, group, axis=1)
        s = c.scale * q.astype(np.float64) @ kk.swapaxes(-1, -2)
        qpos = total - n + np.arange(n)
        s = np.where(np.arange(total)[None, :] <= qpos[:, None], s, -np.inf)
        m = s.max(axis=-1, keepdims=True)
        w = np.exp(s - m)
        o = w @ vv / w.sum(axis=-1, keepdims=True)
        return o, (np.log(w.sum(axis=-1, keepdims=True)) + m)[..., 0]


def open_session(config):
    return Session(config)


@declare(Declaration(name="test-decoder", features=["causal", "lse", "gqa"], decode=open_session))
def decoder(p):
    return exact(p)

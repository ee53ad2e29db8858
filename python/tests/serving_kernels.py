"""A Python serving decoder: K and V stored q8 (codes and scales), kept as the rows arrive, in a
session's arrays or in attest's block-table pages (16 tokens a page; a slot holds, per kv head,
the K row then the V row). Decode-only, like ci/examples/c_plugin/serving_q8_attention.c."""
import numpy as np

from attest_kernel import Contract, Declaration, Precision, Unsupported, declare, quantized

PAGE_TOKENS = 16


def attend(config, q, k, v, first_position):
    """Causal attention of q [H][n][Dk] (positions first_position + t) over k [Hkv][T][Dk], v [Hkv][T][Dv]
    (float32 values): o [H][n][Dv], lse [H][n]."""
    group = config.heads // config.kv_heads
    k, v = np.repeat(k, group, axis=0).astype(np.float64), np.repeat(v, group, axis=0).astype(np.float64)
    s = config.scale * q.astype(np.float64) @ k.swapaxes(-1, -2)
    positions = first_position + np.arange(q.shape[1])
    s = np.where(np.arange(k.shape[1])[None, :] <= positions[:, None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    w = np.exp(s - m)
    total = w.sum(axis=-1, keepdims=True)
    return w @ v / total, (np.log(total) + m)[..., 0]


def check(config):
    if config.rope or config.softcap or config.alibi_slopes is not None or config.sinks is not None:
        raise Unsupported("no RoPE and no score modifier (not declared)")


class Session:
    """Each sequence's K and V rows as they arrived (q8 bytes), [B][Hkv][T][row bytes]."""

    def __init__(self, config):
        check(config)
        self.config, self.k, self.v = config, None, None

    def step(self, q, k, v, want_lse):
        rows_k, rows_v = k.row_bytes(), v.row_bytes()
        self.k = rows_k if self.k is None else np.concatenate([self.k, rows_k], axis=2)
        self.v = rows_v if self.v is None else np.concatenate([self.v, rows_v], axis=2)
        c, total, n = self.config, self.k.shape[2], q.shape[2]
        o, lse = np.empty((c.batch, c.heads, n, c.value_dim)), np.empty((c.batch, c.heads, n))
        for b in range(c.batch):
            keys = quantized.decode(self.k[b], "q8", (c.kv_heads, total, c.head_dim)).float32()
            values = quantized.decode(self.v[b], "q8", (c.kv_heads, total, c.value_dim)).float32()
            o[b], lse[b] = attend(c, q[b], keys, values, total - n)
        return o, lse


def slot_bytes(config):
    return config.kv_heads * (quantized.row_bytes("q8", config.head_dim) + quantized.row_bytes("q8", config.value_dim))


def page_bytes(config):
    check(config)
    return PAGE_TOKENS * slot_bytes(config)


def decode_paged(config, step):
    """Writes each sequence's new rows into its slots, then attends over the slots its table names."""
    c = config
    k_bytes = quantized.row_bytes("q8", c.head_dim)
    slots = step.pool.reshape(-1, PAGE_TOKENS, c.kv_heads, k_bytes + quantized.row_bytes("q8", c.value_dim))
    outputs, lses = [], []
    for b in range(c.batch):
        n, length = int(step.counts[b]), int(step.lengths[b])
        q, k, v = step.sequence(b)
        if n:
            positions = length + np.arange(n)
            pages, at = step.tables[b, positions // PAGE_TOKENS], positions % PAGE_TOKENS
            slots[pages, at] = np.concatenate([k.row_bytes(), v.row_bytes()], axis=-1).swapaxes(0, 1)
        total = length + n
        everything = np.arange(total)
        held = slots[step.tables[b, everything // PAGE_TOKENS], everything % PAGE_TOKENS].swapaxes(0, 1)
        keys = quantized.decode(held[..., :k_bytes], "q8", (c.kv_heads, total, c.head_dim)).float32()
        values = quantized.decode(held[..., k_bytes:], "q8", (c.kv_heads, total, c.value_dim)).float32()
        o, lse = attend(c, q, keys, values, length) if n else (None, None)
        outputs.append(o)
        lses.append(lse)
    return outputs, lses if step.want_lse else None, "paged"


def no_forward(p):
    raise Unsupported("decode only")


@declare(Declaration(name="numpy-serving-q8", features=["causal", "lse", "gqa"],
                     precision=Precision(k="q8", v="q8"), contract=Contract(decode_only=True), decode=Session,
                     page_tokens=PAGE_TOKENS, page_bytes=page_bytes, decode_paged=decode_paged))
def serving(p):
    return no_forward(p)

"""A Python serving decoder: K and V stored quantized (codes and scales, as attest sends them),
kept as the rows arrive, in a session's arrays or in attest's block-table pages (16 tokens a page;
a slot holds, per kv head, the K row then the V row). Decode-only, like
ci/examples/c_plugin/serving_q8_attention.c. One kernel per storage format: `serving` (q8) and
`serving_FORMAT` for the others, each decoding with attest_kernel.quantized, so a decoder that
reads a format wrong is NOT CERTIFIED."""
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


def make_serving(fmt, read_as=None):
    """The serving decoder of K and V stored in `fmt` (q8_head: rows are codes alone, the static
    scales [B][Hkv] came with the configuration). read_as: a format of the same row size to decode
    the bytes as instead: a decoder that misreads its cache."""

    def rows_of(config, name, b, raw, total, width):
        scales = getattr(config, name + "_scales", None) if fmt == "q8_head" else None
        return quantized.decode(raw, read_as or fmt, (config.kv_heads, total, width),
                                None if scales is None else scales[b])

    class Session:
        """Each sequence's K and V rows as they arrived, [B][Hkv][T][row bytes]."""

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
                keys = rows_of(c, "k", b, self.k[b], total, c.head_dim).float32()
                values = rows_of(c, "v", b, self.v[b], total, c.value_dim).float32()
                o[b], lse[b] = attend(c, q[b], keys, values, total - n)
            return o, lse

    def row_sizes(config):
        return (quantized.row_bytes(fmt, config.head_dim, with_scale=fmt != "q8_head"),
                quantized.row_bytes(fmt, config.value_dim, with_scale=fmt != "q8_head"))

    def page_bytes(config):
        check(config)
        return PAGE_TOKENS * config.kv_heads * sum(row_sizes(config))

    def decode_paged(config, step):
        """Writes each sequence's new rows into its slots, then attends over the slots its table names."""
        c = config
        k_bytes, v_bytes = row_sizes(c)
        slots = step.pool.reshape(-1, PAGE_TOKENS, c.kv_heads, k_bytes + v_bytes)
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
            keys = rows_of(c, "k", b, held[..., :k_bytes], total, c.head_dim).float32()
            values = rows_of(c, "v", b, held[..., k_bytes:], total, c.value_dim).float32()
            o, lse = attend(c, q, keys, values, length) if n else (None, None)
            outputs.append(o)
            lses.append(lse)
        return outputs, lses if step.want_lse else None, "paged"

    name = "numpy-serving-" + fmt.replace("_", "-") + ("-read-as-" + read_as if read_as else "")

    @declare(Declaration(name=name, features=["causal", "lse", "gqa"],
                         precision=Precision(k=fmt, v=fmt), contract=Contract(decode_only=True), decode=Session,
                         page_tokens=PAGE_TOKENS, page_bytes=page_bytes, decode_paged=decode_paged))
    def kernel(p):
        raise Unsupported("decode only")

    return kernel


serving = make_serving("q8")
serving_q4 = make_serving("q4")
serving_q8_token = make_serving("q8_token")
serving_q8_head = make_serving("q8_head")
serving_e4m3 = make_serving("e4m3")
serving_e5m2 = make_serving("e5m2")
e4m3_read_as_e5m2 = make_serving("e4m3", read_as="e5m2")

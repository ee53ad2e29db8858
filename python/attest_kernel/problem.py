"""A problem as the kernel function receives it, with helpers for the mask and the storage formats."""
import numpy as np

from . import abi
from .quantized import QuantizedRows
from .storage import to_float32, to_torch

SHAPE_FIELDS = ("batch", "heads", "kv_heads", "q_len", "k_len", "head_dim", "value_dim")


class Problem:
    """One forward call (docs/design.md#problem-semantics). Fields:

    batch, heads, kv_heads, q_len, k_len, head_dim, value_dim (B, H, Hkv, Tq, Tk, Dk, Dv);
    scale (always explicit); q_offset (query i sits at position q_offset + i, key j at j);
    causal, rope (bools); window, chunk, lookahead (ints, 0 = off); rope_base; kv_valid [B],
    q_valid [B], q_segment [B][Tq], k_segment [B][Tk], explicit_mask [B][Tq][Tk] (bool) or None;
    softcap (0 = none); alibi_slopes [H], sinks [H] or None; bias [B or 1][H or 1][Tq][Tk] or None
    (bias_per_batch, bias_per_head say which dimensions it has; float32, or uint16 bit patterns
    when precision.bias is 16-bit); q [B][H][Tq][Dk], k [B][Hkv][Tk][Dk], v [B][Hkv][Tk][Dv] in
    their storage formats (float32, or uint16 bit patterns for bf16 / f16: see float32()).
    Arrays are read-only. `storage` maps q, k, v, o, bias to their formats; `declaration` is the
    kernel's. The kernel returns o [B][H][Tq][Dv] and lse [B][H][Tq] (or None without "lse")."""

    def __init__(self, fields, declaration):
        self.__dict__.update(fields)
        self.declaration = declaration
        self.storage = declaration.precision.storage()

    def __repr__(self):
        terms = [name for name in ("causal", "rope") if getattr(self, name)]
        terms += ["%s=%d" % (name, getattr(self, name)) for name in abi.INTEGER_MASK_TERMS if getattr(self, name)]
        arrays = ("kv_valid", "q_valid", "q_segment", "explicit_mask", "alibi_slopes", "bias", "sinks")
        terms += [name for name in arrays if getattr(self, name) is not None]
        if self.softcap:
            terms.append("softcap=%g" % self.softcap)
        shape = tuple(getattr(self, n) for n in SHAPE_FIELDS)
        return "Problem(B=%d H=%d Hkv=%d Tq=%d Tk=%d Dk=%d Dv=%d scale=%g q_offset=%d%s)" % (
            shape + (self.scale, self.q_offset, "".join(" " + t for t in terms)))

    @property
    def o_shape(self):
        return (self.batch, self.heads, self.q_len, self.value_dim)

    @property
    def lse_shape(self):
        return (self.batch, self.heads, self.q_len)

    def q_positions(self):
        """[Tq] int64: query i sits at q_offset + i."""
        return self.q_offset + np.arange(self.q_len, dtype=np.int64)

    def k_positions(self):
        """[Tk] int64: key j sits at j."""
        return np.arange(self.k_len, dtype=np.int64)

    def visible(self, bias=False):
        """The mask, [B][Tq][Tk] bool: True where key j is visible to query i under every mask term
        (causal: j <= qpos(i); window: qpos(i) - j < window; chunk: floor(qpos(i) / chunk) ==
        floor(j / chunk); lookahead: j - qpos(i) < lookahead; key padding: j < kv_valid[b];
        query padding: i < q_valid[b]; segments: equal ids; explicit mask: nonzero).
        With bias=True: [B][H][Tq][Tk], also False where the bias is -inf (it masks the key)."""
        B, Tq, Tk = self.batch, self.q_len, self.k_len
        qpos, kpos = self.q_positions()[:, None], self.k_positions()[None, :]
        mask = np.ones((Tq, Tk), dtype=bool)
        if self.causal:
            mask &= kpos <= qpos
        if self.window:
            mask &= (qpos - kpos) < self.window
        if self.chunk:
            mask &= (qpos // self.chunk) == (kpos // self.chunk)
        if self.lookahead:
            mask &= (kpos - qpos) < self.lookahead
        mask = np.repeat(mask[None], B, axis=0)
        if self.kv_valid is not None:
            mask &= np.arange(Tk)[None, None, :] < self.kv_valid[:, None, None]
        if self.q_valid is not None:
            mask &= np.arange(Tq)[None, :, None] < self.q_valid[:, None, None]
        if self.q_segment is not None:
            mask &= self.q_segment[:, :, None] == self.k_segment[:, None, :]
        if self.explicit_mask is not None:
            mask &= self.explicit_mask
        if not bias:
            return mask
        mask = np.repeat(mask[:, None], self.heads, axis=1)
        if self.bias is not None:
            mask &= self.float32("bias") != -np.inf
        return mask

    def float32(self, name):
        """q, k, v or bias as float32 values, whatever their storage format (quantized K/V decoded
        exactly: scale times code)."""
        value = getattr(self, name)
        if isinstance(value, QuantizedRows):
            return value.float32()
        return None if value is None else to_float32(value, self.storage[name])

    def torch(self, name):
        """q, k, v or bias as a torch tensor of its storage type (float32, bfloat16, float16).
        Needs torch; the package never imports it otherwise."""
        value = getattr(self, name)
        return None if value is None else to_torch(value, self.storage[name])

    def repeat_kv(self, x):
        """k- or v-shaped x [B][Hkv][...] repeated to [B][H][...]: query head h reads kv head h // (H / Hkv)."""
        return np.repeat(x, self.heads // self.kv_heads, axis=1)

    def rotate(self, x, positions):
        """x [..., T, D] with RoPE applied at `positions` [T], base rope_base (see apply_rope)."""
        return apply_rope(x, positions, self.rope_base)


class DecodeConfig:
    """A decode session's configuration: batch, heads, kv_heads, head_dim, value_dim, scale, window,
    chunk, lookahead, rope, rope_base, softcap, alibi_slopes [H] or None, sinks [H] or None; the
    session is causal, its first step's queries and keys at position 0. `storage` as Problem's.
    k_scales, v_scales: [B][Hkv] float32 static scales of q8_head K and V, else None."""

    def __init__(self, fields, declaration):
        self.__dict__.update(fields)
        self.declaration = declaration
        self.storage = declaration.precision.storage()

    def __repr__(self):
        return "DecodeConfig(%s)" % ", ".join("%s=%r" % (k, v) for k, v in sorted(self.__dict__.items())
                                              if k not in ("declaration", "storage"))


def apply_rope(x, positions, base):
    """Rotary embedding: interleaved pairs (2m, 2m+1) of x[..., t, :] rotated by
    positions[t] * base^(-2m/D). Angles in float64; the products in x's float type."""
    x = np.asarray(x)
    d = x.shape[-1]
    theta = float(base) ** (-2.0 * np.arange(d // 2) / d)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * theta[None, :]
    c, s = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
    even, odd = slice(0, 2 * (d // 2), 2), slice(1, 2 * (d // 2), 2)  # an odd last column stays as it is
    a, b = x[..., even], x[..., odd]
    out = np.array(x, copy=True)
    out[..., even] = a * c - b * s
    out[..., odd] = a * s + b * c
    return out

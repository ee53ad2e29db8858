"""ABI 2.8's packed variable-length layout (docs/design.md#packed-batches): every sequence's tokens
one after another with cu_seqlens offsets and no padding, as FlashAttention's varlen functions take
them. A kernel declared with Declaration(packed=function) receives a PackedProblem on FORWARD_PACKED."""
import numpy as np

from ._interface import LAYOUTS
from .wire import ProtocolError, Writer

# The packed_problem layout's fields, in the table's order.
FIELDS = tuple((field_type, name) for field_type, name, _ in LAYOUTS["packed_problem"])
_READERS = {"i32": "i32", "i64": "i64", "f64": "f64", "f32_array": "<f4", "i32_array": "<i4"}


class PackedProblem:
    """One packed forward call. Fields: batch (sequences), heads, kv_heads, head_dim, value_dim,
    max_seqlen_q, max_seqlen_k (the longest sequence of each), scale, q_offset (query i of every
    sequence sits at q_offset + i, key j at j), causal, rope (bools), window, chunk, lookahead (0 =
    off), rope_base, softcap (0 = none), alibi_slopes [H], sinks [H] or None; cu_seqlens_q and
    cu_seqlens_k int32 [B + 1], int64 when declared packed_int64 (ABI 2.10)
    (sequence b: queries cu_seqlens_q[b] .. cu_seqlens_q[b + 1], keys
    likewise); q float32 [total_q][H][Dk], k [total_k][Hkv][Dk], v [total_k][Hkv][Dv]; want_lse.
    The mask terms and modifiers apply within each sequence; no sequence sees another's keys.
    There is no padding, segment, explicit mask or bias. Arrays are read-only. The kernel returns
    o [total_q][H][Dv] and lse [H][total_q] (FlashAttention's order; None when not wanted)."""

    def __init__(self, fields, want_lse, declaration):
        self.__dict__.update(fields)
        self.want_lse = want_lse
        self.declaration = declaration

    def __repr__(self):
        return "PackedProblem(B=%d H=%d Hkv=%d Dk=%d Dv=%d cu_seqlens_q=%s cu_seqlens_k=%s)" % (
            self.batch, self.heads, self.kv_heads, self.head_dim, self.value_dim, list(self.cu_seqlens_q),
            list(self.cu_seqlens_k))

    @property
    def total_q(self):
        return int(self.cu_seqlens_q[-1])

    @property
    def total_k(self):
        return int(self.cu_seqlens_k[-1])

    @property
    def o_shape(self):
        return (self.total_q, self.heads, self.value_dim)

    @property
    def lse_shape(self):
        return (self.heads, self.total_q)

    def sequences(self):
        """[(q slice, k slice)] of each sequence's rows in q/o and in k/v."""
        cq, ck = self.cu_seqlens_q, self.cu_seqlens_k
        return [(slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))) for b in range(self.batch)]


def decode_packed(r, declaration):
    """A FORWARD_PACKED payload as a PackedProblem, its offsets and sizes checked as attest's
    kernel host checks them (a malformed request is a ProtocolError, never a kernel call)."""
    fields = {}
    for field_type, name in FIELDS:
        reader = _READERS[field_type]
        fields[name] = getattr(r, reader)() if field_type in ("i32", "i64", "f64") else r.array(reader)
    want_lse = bool(r.i32())
    r.expect_end()
    B, H, Hkv, Dk, Dv = (fields[n] for n in ("batch", "heads", "kv_heads", "head_dim", "value_dim"))
    if B < 1 or H < 1 or Hkv < 1 or H % Hkv or Dk < 1 or Dv < 1:
        raise ProtocolError("packed batch, heads or widths out of range")
    for name in ("cu_seqlens_q", "cu_seqlens_k"):
        cu = fields[name]
        if cu.size != B + 1:
            raise ProtocolError("packed cu_seqlens do not hold batch + 1 offsets")
        if cu[0] != 0 or np.any(np.diff(cu) < 0):
            raise ProtocolError("packed cu_seqlens do not start at 0 or decrease")
    total_q, total_k = int(fields["cu_seqlens_q"][-1]), int(fields["cu_seqlens_k"][-1])
    if fields["q"].size != total_q * H * Dk or fields["k"].size != total_k * Hkv * Dk or \
            fields["v"].size != total_k * Hkv * Dv:
        raise ProtocolError("packed arrays do not match cu_seqlens and the shape")
    fields["q"] = fields["q"].reshape(total_q, H, Dk)
    fields["k"] = fields["k"].reshape(total_k, Hkv, Dk)
    fields["v"] = fields["v"].reshape(total_k, Hkv, Dv)
    for name in ("alibi_slopes", "sinks"):
        if fields[name].size == 0:
            fields[name] = None
    fields["causal"], fields["rope"] = bool(fields["causal"]), bool(fields["rope"])
    if getattr(declaration, "packed_int64", False):  # ABI 2.10: the offsets in the width declared
        for name in ("cu_seqlens_q", "cu_seqlens_k"):
            fields[name] = fields[name].astype(np.int64)
            fields[name].flags.writeable = False
    return PackedProblem(fields, want_lse, declaration)


def encode_packed(want_lse=True, **fields):
    """A FORWARD_PACKED payload (attest's side, for tests): the packed_problem fields by name (an
    absent number 0, an absent array empty), then want_lse."""
    w = Writer()
    for field_type, name in FIELDS:
        value = fields.pop(name, None)
        if field_type in ("i32", "i64", "f64"):
            getattr(w, field_type)(value or 0)
        else:
            w.array(value, _READERS[field_type])
    if fields:
        raise ValueError("packed_problem has no field %s" % ", ".join(sorted(fields)))
    return w.i32(int(bool(want_lse))).bytes()

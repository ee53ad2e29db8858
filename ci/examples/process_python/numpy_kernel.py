#!/usr/bin/env python3
"""An attention kernel in numpy served over the attest process protocol, version 3 (impl/PROTOCOL.md).

Certify it with:  attest certify --kernel-cmd "python3 ci/examples/process_python/numpy_kernel.py"
Scores and weighted sums run in float32; exp and log in float64, rounded to float32.
Score modifiers: the additive bias (broadcast over batch and/or heads, -inf masks a key).
"""
import os
import struct
import sys

import numpy as np

MAGIC = 0x54535441
HELLO, DESCRIPTOR, FORWARD, FORWARD_RESULT, BYE, ERROR = 1, 2, 3, 4, 11, 12
PROTOCOL_VERSION = 3
CAP_BIAS = 1 << 13  # ATTEST_CAP_BIAS
CAPS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | CAP_BIAS
F32 = 0
# The contract (ABI v2): head widths 1..256 and lengths up to 4096 (the scores are materialized);
# anything else attest never sends.
HEAD_DIMS = []                       # any width in HEAD_DIM
HEAD_DIM, BATCH, HEADS, Q_LEN, K_LEN, Q_OFFSET = (1, 256), (0, 0), (0, 0), (1, 4096), (1, 4096), (0, 0)


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype):
        (count,) = self.take("Q")
        item = np.dtype(dtype).itemsize
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at).copy()
        self.at += count * item
        return out

    def floats(self):
        """A u8[] of float32 bytes (the storage type this kernel declares)."""
        return self.array("u1").view("<f4")


def read_frame(stream):
    header = read_exactly(stream, 16)
    if len(header) < 16:
        return None, None
    magic, kind, size = struct.unpack("<IIQ", header)
    if magic != MAGIC:
        raise ValueError("bad magic")
    return kind, read_exactly(stream, size)


def write_frame(stream, kind, payload):
    stream.write(struct.pack("<IIQ", MAGIC, kind, len(payload)) + payload)
    stream.flush()


def string(s):
    data = s.encode()
    return struct.pack("<I", len(data)) + data


def array(values):
    values = np.ascontiguousarray(values, dtype="<f4")
    return struct.pack("<Q", values.size) + values.tobytes()


def float_bytes(values):
    data = np.ascontiguousarray(values, dtype="<f4").tobytes()
    return struct.pack("<Q", len(data)) + data


def descriptor():
    """DESCRIPTOR, ABI version 2: features, f32 everywhere, the contract."""
    out = struct.pack("<I", 2) + string("example-numpy") + struct.pack("<Ii", CAPS, 0)
    out += struct.pack("<7id", F32, F32, F32, F32, F32, F32, F32, 1.0)
    out += struct.pack("<Q", len(HEAD_DIMS)) + struct.pack("<%di" % len(HEAD_DIMS), *HEAD_DIMS)
    for lo, hi in (HEAD_DIM, BATCH, HEADS, Q_LEN, K_LEN, Q_OFFSET):
        out += struct.pack("<qq", lo, hi)
    return out + struct.pack("<7i", 0, 0, 0, 0, 0, 0, 0)


def rotate(x, positions, base):
    """Rotate interleaved pairs (2m, 2m+1) of x[..., t, :] by positions[t] * base^(-2m/d)."""
    d = x.shape[-1]
    theta = base ** (-2.0 * np.arange(d // 2) / d)
    angle = positions[:, None].astype(np.float64) * theta[None, :]
    c, s = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def attention(r):
    B, H, Hkv, Tq, Tk, Dk, Dv = r.take("7i")
    scale, q_offset, causal = r.take("dqi")
    # The integer mask terms in the header's order (window, chunk); later terms are never set for a
    # kernel that does not declare them.
    terms = list(r.array("<i4")) + [0, 0]  # a shorter array leaves the rest off
    window, chunk = terms[:2]
    rope, rope_base = r.take("id")
    kv_valid, q_valid = r.array("<i4"), r.array("<i4")
    q_segment, k_segment = r.array("<i4"), r.array("<i4")
    explicit = r.array("u1")
    # Score modifiers: softcap, ALiBi slopes and sinks stay 0 / empty (not declared); the bias is
    # [B or 1][H or 1][Tq][Tk], the flags saying which dimensions it has.
    _softcap, _slopes = r.take("d"), r.array("<f4")
    bias = r.array("<f4")
    bias_per_batch, bias_per_head = r.take("ii")
    _sinks = r.array("<f4")
    q = r.floats().reshape(B, H, Tq, Dk)
    k = r.floats().reshape(B, Hkv, Tk, Dk)
    v = r.floats().reshape(B, Hkv, Tk, Dv)

    qpos, kpos = q_offset + np.arange(Tq), np.arange(Tk)
    if rope:
        q, k = rotate(q, qpos, rope_base), rotate(k, kpos, rope_base)
    group = H // Hkv
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # query head h reads kv head h // group

    mask = np.ones((B, Tq, Tk), dtype=bool)
    if causal:
        mask &= kpos[None, None, :] <= qpos[None, :, None]
    if window:
        mask &= (qpos[None, :, None] - kpos[None, None, :]) < window
    if chunk:  # the same chunk of `chunk` positions (floor division, also for negative positions)
        mask &= (qpos[None, :, None] // chunk) == (kpos[None, None, :] // chunk)
    if kv_valid.size:
        mask &= kpos[None, None, :] < kv_valid[:, None, None]
    if q_valid.size:
        mask &= np.arange(Tq)[None, :, None] < q_valid[:, None, None]
    if q_segment.size:
        mask &= q_segment.reshape(B, Tq, 1) == k_segment.reshape(B, 1, Tk)
    if explicit.size:
        mask &= explicit.reshape(B, Tq, Tk) != 0
    mask = np.broadcast_to(mask[:, None, :, :], (B, H, Tq, Tk))
    if bias.size:  # numpy broadcasting does the rest: a dimension of 1 serves every batch entry or head
        bias = bias.reshape(B if bias_per_batch else 1, H if bias_per_head else 1, Tq, Tk)
        # A -inf entry masks its key: decided here, before the score is read, so a NaN or inf in
        # that key's K row never meets it (-inf + NaN would be NaN, not "masked").
        mask = mask & (bias != -np.inf)

    scores = np.matmul(q, k.transpose(0, 1, 3, 2)) * np.float32(scale)
    if bias.size:
        scores = scores + bias  # the logit: scale * q.k + bias (no softcap or ALiBi declared)
    scores = np.where(mask, scores, -np.inf).astype(np.float32)
    empty = ~mask.any(axis=-1)
    row_max = np.where(empty, 0.0, scores.max(axis=-1, initial=-np.inf, where=mask))
    weights = np.where(mask, np.exp((scores - row_max[..., None]).astype(np.float64)), 0.0).astype(np.float32)
    total = weights.sum(axis=-1, dtype=np.float32)
    safe_total = np.where(empty, np.float32(1), total)
    # A matmul multiplies every V row, masked or not: 0 * NaN would leak a masked row's poison
    # (first into every row when no query of the slice saw the key; then, caught again by the
    # row-wise poisoning check, into the rows that mask a key another row sees). So each query row
    # gets its own copy of V with its masked rows zeroed.
    v_rows = np.where(mask[..., None], v[:, :, None, :, :], np.float32(0))
    o = np.einsum("bhqk,bhqkd->bhqd", weights / safe_total[..., None], v_rows).astype(np.float32)
    o[empty] = 0.0
    lse = np.where(empty, -np.inf, row_max + np.log(safe_total.astype(np.float64))).astype(np.float32)
    return o, lse


def channel():
    """The protocol's descriptors: ATTEST_PROTOCOL_FDS ("IN,OUT") when attest runs us, else stdin/stdout."""
    fds = os.environ.get("ATTEST_PROTOCOL_FDS")
    if fds:
        fd_in, fd_out = (int(x) for x in fds.split(","))
        return os.fdopen(fd_in, "rb", buffering=0), os.fdopen(fd_out, "wb")
    return sys.stdin.buffer, sys.stdout.buffer


def read_exactly(stream, n):
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def main():
    stdin, stdout = channel()
    while True:
        kind, payload = read_frame(stdin)
        if kind is None or kind == BYE:
            return 0
        if kind == HELLO:
            (version,) = struct.unpack("<I", payload[:4])
            if version != PROTOCOL_VERSION:  # another layout of the frames: refuse rather than misread them
                write_frame(stdout, ERROR, string("protocol version %d, this kernel speaks %d" % (version, PROTOCOL_VERSION)))
                return 2
            write_frame(stdout, DESCRIPTOR, descriptor())
        elif kind == FORWARD:
            o, lse = attention(Reader(payload))
            result = struct.pack("<i", 0) + string("") + string("numpy") + string("") + float_bytes(o) + array(lse)
            write_frame(stdout, FORWARD_RESULT, result)
        else:
            write_frame(stdout, ERROR, string("unsupported message %d" % kind))
            return 2


if __name__ == "__main__":
    with np.errstate(all="ignore"):
        sys.exit(main())

"""K and V in the ABI 2.4 quantized formats (attest_abi.h's attest_precision): the bytes as they
travel, as numpy arrays of codes and scales, and their values decoded exactly as attest's C++
codecs do (impl/model/src/quantized.cpp: a value is the f16 scale times its code, in float32).

A row is one token of one kv head (Dk or Dv values); its groups follow one another, each its
f16 scale (2 bytes, little endian) then its codes:
    q8        groups of 32, int8 codes in [-127, 127]
    q4        groups of 32, codes in [-8, 7] stored as code + 8, two per byte: values 2m and
              2m + 1 in byte m, low nibble first
    q4_0      ggml's block_q4_0: as q4, but byte j holds value j (low nibble) and value j + 16
              (high nibble); a group of n < 32 pairs j with j + ceil(n / 2)
    q8_token  one group per row
    q8_head   one static scale per (sequence, kv head): in a problem, all Tk rows of the kv head
              are one group; in a decode step the rows are codes alone (the scales came with
              the configuration)
    e4m3, e5m2  fp8, one byte a value, no scale."""
import numpy as np

SCALED = ("q8", "q4", "q8_token", "q8_head", "q4_0")
NIBBLES = ("q4", "q4_0")
FP8 = ("e4m3", "e5m2")
QUANTIZED = SCALED + FP8


def group_width(fmt, width):
    """Values per scale in a row of `width`."""
    return width if fmt in ("q8_token", "q8_head") else min(32, width)


def row_bytes(fmt, width, with_scale=True):
    """Bytes of one row of `width` values (a q8_head row in a decode step: with_scale=False)."""
    if fmt in FP8 or (fmt == "q8_head" and not with_scale):
        return width
    g = group_width(fmt, width)
    groups = (width + g - 1) // g
    return groups * 2 + ((width + 1) // 2 if fmt in NIBBLES else width)


def _fp8_table(fmt):
    """float32 value of each of the 256 bit patterns (from_bits8)."""
    mantissa_bits, bias = (3, 7) if fmt == "e4m3" else (2, 15)
    bits = np.arange(256)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exp, mantissa = (bits & 0x7F) >> mantissa_bits, bits & ((1 << mantissa_bits) - 1)
    with np.errstate(over="ignore"):
        normal = np.ldexp(1.0 + mantissa / float(1 << mantissa_bits), exp - bias)
    values = sign * np.where(exp == 0, np.ldexp(mantissa.astype(np.float64), 1 - bias - mantissa_bits), normal)
    top = exp == (0xF if fmt == "e4m3" else 0x1F)
    if fmt == "e4m3":
        values = np.where(top & (mantissa == 7), np.nan, values)  # e4m3fn: one NaN, no infinity
    else:
        values = np.where(top, np.where(mantissa != 0, np.nan, sign * np.inf), values)
    return values.astype(np.float32)


FP8_VALUES = {fmt: _fp8_table(fmt) for fmt in FP8}


def _f16(two_bytes):
    """float32 of f16 scales given as [..., 2] uint8 (little endian)."""
    bits = two_bytes[..., 0].astype(np.uint16) | (two_bytes[..., 1].astype(np.uint16) << 8)
    return bits.view(np.float16).astype(np.float32)


class QuantizedRows:
    """K or V stored quantized. shape: the values' shape ([B][Hkv][T][D] in a problem or a step,
    [Hkv][n][D] for one sequence of a paged step). codes: int8 [*shape] (q4 and q4_0 codes in [-8, 7]) or,
    for fp8, uint8 [*shape] bit patterns. scales: float32 [*shape[:-1]][groups] for q8, q4 and q4_0,
    [*shape[:-1]][1] for q8_token, [*shape[:-2]] for q8_head, None for fp8. raw: the bytes as they
    arrived, uint8 (row_bytes() gives them a row at a time: what a cache stores)."""

    def __init__(self, fmt, shape, codes, scales, raw):
        self.format, self.shape, self.codes, self.scales, self.raw = fmt, tuple(shape), codes, scales, raw

    def __repr__(self):
        return "QuantizedRows(%s, shape=%s)" % (self.format, self.shape)

    def float32(self):
        """The values, float32 [*shape]: scale * code (exact), or the fp8 values."""
        if self.format in FP8:
            return FP8_VALUES[self.format][self.codes]
        codes = self.codes.astype(np.float32)
        if self.format == "q8_head":
            return self.scales[..., None, None] * codes
        width, g = self.shape[-1], group_width(self.format, self.shape[-1])
        per_value = np.repeat(self.scales, g, axis=-1)[..., :width]
        return per_value * codes

    def row_bytes(self):
        """The raw bytes a row at a time, uint8 [*shape[:-1]][bytes per row] (not for a problem's q8_head)."""
        if self.format == "q8_head" and self.raw.size != int(np.prod(self.shape)):
            raise ValueError("a problem's q8_head buffer is one group per kv head, not rows")
        return self.raw.reshape(self.shape[:-1] + (-1,))


def decode(raw, fmt, shape, head_scales=None):
    """QuantizedRows of `raw` (uint8 bytes) holding values of `shape` [..., T, D] in `fmt`.
    q8_head: with head_scales ([*shape[:-2]] float32) the bytes are codes alone (a decode step);
    without, each [T][D] block is one scale then its codes (a problem). ValueError on a size that
    does not match."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    shape = tuple(int(d) for d in shape)
    width, count = shape[-1], int(np.prod(shape))
    if fmt in FP8:
        _expect(raw, count, fmt)
        return QuantizedRows(fmt, shape, raw.reshape(shape), None, raw)
    if fmt == "q8_head":
        outer = shape[:-2]
        if head_scales is not None:
            _expect(raw, count, fmt)
            scales = np.asarray(head_scales, dtype=np.float32).reshape(outer)
            return QuantizedRows(fmt, shape, raw.view(np.int8).reshape(shape), scales, raw)
        block = shape[-2] * width
        _expect(raw, int(np.prod(outer)) * (2 + block), fmt)
        blocks = raw.reshape(-1, 2 + block)
        scales = _f16(blocks[:, :2]).reshape(outer)
        return QuantizedRows(fmt, shape, blocks[:, 2:].view(np.int8).reshape(shape), scales, raw)
    if fmt not in SCALED:
        raise ValueError("%r is not a quantized format (expected one of %s)" % (fmt, ", ".join(QUANTIZED)))
    rows = count // width
    per_row = row_bytes(fmt, width)
    _expect(raw, rows * per_row, fmt)
    data = raw.reshape(rows, per_row)
    g = group_width(fmt, width)
    codes = np.empty((rows, width), dtype=np.int8)
    scales = []
    at = 0
    for first in range(0, width, g):
        n = min(g, width - first)
        scales.append(_f16(data[:, at:at + 2]))
        at += 2
        if fmt in NIBBLES:
            packed = data[:, at:at + (n + 1) // 2]
            # q4: low, high nibble of each byte in turn; q4_0: every low nibble, then every high one
            axis = -1 if fmt == "q4" else 1
            nibbles = np.stack([packed & 0xF, packed >> 4], axis=axis).reshape(rows, 2 * packed.shape[1])[:, :n]
            codes[:, first:first + n] = nibbles.astype(np.int8) - 8
            at += (n + 1) // 2
        else:
            codes[:, first:first + n] = data[:, at:at + n].view(np.int8)
            at += n
    scales = np.stack(scales, axis=-1).reshape(shape[:-1] + (len(scales),))
    return QuantizedRows(fmt, shape, codes.reshape(shape), scales, raw)


def stored_size(fmt, shape, head_scales=False):
    """Bytes of values of `shape` stored in `fmt` (a q8_head decode step's codes: head_scales=True)."""
    shape = tuple(int(d) for d in shape)
    if fmt == "q8_head" and not head_scales:
        return int(np.prod(shape[:-2])) * (2 + shape[-2] * shape[-1])
    return int(np.prod(shape[:-1])) * row_bytes(fmt, shape[-1], with_scale=not head_scales)


def _expect(raw, size, fmt):
    if raw.size != size:
        raise ValueError("%s data of %d bytes, expected %d" % (fmt, raw.size, size))

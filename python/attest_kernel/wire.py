"""The bytes of attest's process protocol, version 3 (impl/PROTOCOL.md; the C++ twin is
impl/abi/include/attest/abi/process_protocol.hpp): frames, payload readers and writers, and the
codecs of every message, both directions (attest's side serves the tests)."""
import struct

import numpy as np

from . import _interface, abi
from . import quantized
from .paths import RANGES as PATH_RANGES
from .storage import itemsize, numpy_dtype

MAGIC = 0x54535441  # bytes "ATST"
VERSION = _interface.VERSION["protocol"]
MAX_PAYLOAD = 1 << 34  # 16 GiB: refuse anything larger
HEADER = struct.Struct("<IIQ")

# The frame types, by the table's names (HELLO, DESCRIPTOR, ..., DECODE_PAGED_RESULT): module constants.
TYPES = {name: row[0] for name, row in _interface.MESSAGES.items()}
globals().update(TYPES)
LAST_TYPE = max(TYPES.values())
TYPE_NAMES = {number: name for name, number in TYPES.items()}


class ProtocolError(Exception):
    """A malformed frame or payload."""


# --- frames ---------------------------------------------------------------------------------------

def frame_header(kind, size):
    return HEADER.pack(MAGIC, kind, size)


def parse_header(header):
    """(type, payload size) of a 16-byte header; ProtocolError on a bad magic, type or size."""
    magic, kind, size = HEADER.unpack(bytes(header))
    if magic != MAGIC:
        raise ProtocolError("bad frame magic 0x%08x (not the attest protocol?)" % magic)
    if not 1 <= kind <= LAST_TYPE:
        raise ProtocolError("unknown message type %d" % kind)
    if size > MAX_PAYLOAD:
        raise ProtocolError("message of %d bytes is too large" % size)
    return kind, size


def encode_frame(kind, payload=b""):
    return frame_header(kind, len(payload)) + bytes(payload)


def split_frames(data):
    """Every complete frame of a byte string: [(type, payload)], for tests and tools."""
    frames, at = [], 0
    while at + 16 <= len(data):
        kind, size = parse_header(data[at:at + 16])
        if at + 16 + size > len(data):
            raise ProtocolError("input ended inside a message")
        frames.append((kind, bytes(data[at + 16:at + 16 + size])))
        at += 16 + size
    if at != len(data):
        raise ProtocolError("%d trailing bytes are not a frame" % (len(data) - at))
    return frames


# --- payloads -------------------------------------------------------------------------------------

class Writer:
    """Builds a payload: little-endian scalars, str = u32 length + UTF-8, T[] = u64 count + elements."""

    def __init__(self):
        self.parts = []

    def _pack(self, fmt, value):
        self.parts.append(struct.pack("<" + fmt, value))
        return self

    def u32(self, x): return self._pack("I", x)
    def i32(self, x): return self._pack("i", x)
    def u64(self, x): return self._pack("Q", x)
    def i64(self, x): return self._pack("q", x)
    def f64(self, x): return self._pack("d", x)

    def str(self, s):
        data = s.encode("utf-8", "replace") if isinstance(s, str) else bytes(s)
        self.u32(len(data))
        self.parts.append(data)
        return self

    def array(self, values, dtype):
        """A T[] of `dtype` ("<f4", "<i4", "u1", "<u2"): the count in elements."""
        values = np.ascontiguousarray(values if values is not None else [], dtype=dtype).reshape(-1)
        self.u64(values.size)
        self.parts.append(values.tobytes())
        return self

    def bytes_array(self, data):
        """A u8[] holding raw bytes (a buffer in its storage format)."""
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else bytes(data)
        self.u64(len(data))
        self.parts.append(data.tobytes() if isinstance(data, np.ndarray) else data)
        return self

    def bytes(self):
        return b"".join(self.parts)


class Reader:
    """Reads a payload written by Writer; ProtocolError when it ends early."""

    def __init__(self, payload):
        self.view = memoryview(payload).cast("B")
        self.at = 0

    def _need(self, n):
        if len(self.view) - self.at < n:
            raise ProtocolError("message ends early")

    def _unpack(self, fmt, n):
        self._need(n)
        (value,) = struct.unpack_from("<" + fmt, self.view, self.at)
        self.at += n
        return value

    def u32(self): return self._unpack("I", 4)
    def i32(self): return self._unpack("i", 4)
    def u64(self): return self._unpack("Q", 8)
    def i64(self): return self._unpack("q", 8)
    def f64(self): return self._unpack("d", 8)

    def str(self):
        n = self.u32()
        self._need(n)
        data = bytes(self.view[self.at:self.at + n])
        self.at += n
        return data.decode("utf-8", "replace")

    def array(self, dtype):
        """A T[] as a read-only numpy array of `dtype` (no copy unless misaligned)."""
        dtype = np.dtype(dtype)
        count = self.u64()
        if count > (len(self.view) - self.at) // dtype.itemsize:
            raise ProtocolError("array longer than its message")
        values = np.frombuffer(self.view, dtype=dtype, count=count, offset=self.at)
        self.at += count * dtype.itemsize
        if not values.flags.aligned:
            values = values.copy()
        values.flags.writeable = False
        return values

    def at_end(self):
        return self.at == len(self.view)

    def expect_end(self):
        if not self.at_end():
            raise ProtocolError("message has trailing bytes")


# --- the declaration (DESCRIPTOR) -----------------------------------------------------------------

PRECISION_2_0 = ("q", "k", "v", "o", "scores", "p", "accumulator")
RANGES = ("head_dim", "batch", "heads", "q_len", "k_len", "q_offset")


def _write_precision_2_0(w, p):
    for name in PRECISION_2_0:
        w.i32(abi.FORMATS[getattr(p, name)])
    w.f64(p.exp_ulps)


def _write_precision_2_1(w, p):
    w.i32(abi.FORMATS[p.bias]).i32(0 if p.weight_sum is None else abi.FORMATS[p.weight_sum] + 1)
    w.i32(int(p.pv_unnormalised))
    for name in ("q_entry", "k_entry", "v_entry"):
        w.i32(abi.FORMATS[getattr(p, name)])


def _write_path_declaration(w, path):
    """ABI 2.2's attest_path_predicate (layouts.def's path_declaration), its name first."""
    w.str(path.name)
    for name in PATH_RANGES:
        low, high = getattr(path, name)
        w.i64(low).i64(high)
    w.i32(path.head_dim_multiple).i32(path.value_dim_multiple).i32(path.k_len_multiple)
    w.i32(int(path.k_len_not_multiple))
    w.u32(path.bits(path.required)).u32(path.bits(path.excluded)).i32(int(path.no_mask))


def _read_path_declaration(r):
    p = {"name": r.str()}
    for name in PATH_RANGES:
        p[name] = (r.i64(), r.i64())
    for name in ("head_dim_multiple", "value_dim_multiple", "k_len_multiple", "k_len_not_multiple"):
        p[name] = r.i32()
    for name in ("required", "excluded"):
        bits = r.u32()
        p[name] = [feature for feature, bit in abi.CAPABILITIES.items() if bits & bit]
    p["no_mask"] = r.i32()
    return p


def encode_descriptor(declaration):
    """DESCRIPTOR: attest_kernel_v2 with its 2.1 (paths), 2.2 (declared paths), 2.3, 2.4, 2.7 and 2.9 sections."""
    d, c = declaration, declaration.contract
    w = Writer()
    w.u32(abi.ABI_VERSION).str(d.name).u32(d.capabilities).i32(abi.EMPTY_ROWS[d.empty_rows])
    _write_precision_2_0(w, d.precision)
    w.array(list(c.head_dims), "<i4")
    for name in RANGES:
        low, high = getattr(c, name)
        w.i64(low).i64(high)
    for value in (c.dk_equals_dv, c.default_scale_only, c.causal_required, c.decode_only, c.query_tile, c.key_tile,
                  c.decode_lse_optional, c.self_attention_only, abi.ALIBI_SLOPES[c.alibi_slopes],
                  abi.INPUT_DOMAINS[c.inputs]):
        w.i32(int(value))
    w.f64(c.alibi_max_bias).f64(c.max_abs_value)
    _write_precision_2_1(w, d.precision)
    w.u32(len(d.path_precisions))
    for name, precision in d.path_precisions:
        w.str(name)
        _write_precision_2_0(w, precision)
        _write_precision_2_1(w, precision)
    declared = d.declared_paths
    w.u32(len(declared))  # 2.2
    for path in declared:
        _write_path_declaration(w, path)
    w.i32(int(c.deterministic_backward))  # 2.3
    cache = (abi.CACHE_POLICIES[d.cache_policy], d.cache_sinks, d.cache_recent, int(d.cache_policy == "explicit"),
             d.page_tokens)
    tiles = any(path.key_tile for path in declared)
    flush = d.precision.flush_subnormals  # 2.9
    value_widths = bool(c.value_dims) or c.value_dim != (0, 0) or c.alibi_excludes_bias or tiles or flush
    if any(cache) or value_widths:  # 2.4, written when it or a later section says something (process_protocol.hpp)
        for value in cache:
            w.i32(value)
    if value_widths:  # 2.7
        w.array(list(c.value_dims), "<i4")
        w.i64(c.value_dim[0]).i64(c.value_dim[1])
        w.i32(int(c.alibi_excludes_bias))
        w.array([path.key_tile for path in declared] if tiles else [], "<i4")  # declared_key_tiles
    if flush:
        w.i32(1)  # 2.9: precision.flush_subnormals, the kernel's (its paths inherit it)
    return w.bytes()


def _read_precision(r, with_2_1=True):
    p = {name: abi.FORMAT_NAMES.get(r.i32(), "?") for name in PRECISION_2_0}
    p["exp_ulps"] = r.f64()
    if with_2_1:
        p["bias"] = abi.FORMAT_NAMES.get(r.i32(), "?")
        weight_sum = r.i32()
        p["weight_sum"] = None if weight_sum == 0 else abi.FORMAT_NAMES.get(weight_sum - 1, "?")
        p["pv_unnormalised"] = bool(r.i32())
        for name in ("q_entry", "k_entry", "v_entry"):
            p[name] = abi.FORMAT_NAMES.get(r.i32(), "?")
    return p


def decode_descriptor(payload):
    """A DESCRIPTOR payload as a dict (attest's reading of it, process_protocol.hpp's read_descriptor)."""
    r = Reader(payload)
    d = {"abi_version": r.u32(), "name": r.str(), "capabilities": r.u32(), "empty_rows": r.i32()}
    d["features"] = [name for name, bit in abi.CAPABILITIES.items() if d["capabilities"] & bit]
    d["precision"] = _read_precision(r, with_2_1=False)
    c = d["contract"] = {"head_dims": [int(x) for x in r.array("<i4")]}
    for name in RANGES:
        c[name] = (r.i64(), r.i64())
    for name in ("dk_equals_dv", "default_scale_only", "causal_required", "decode_only", "query_tile", "key_tile",
                 "decode_lse_optional"):
        c[name] = r.i32()
    d["paths"] = []
    if r.at_end():
        return d
    for name in ("self_attention_only", "alibi_slopes", "inputs"):
        c[name] = r.i32()
    c["alibi_max_bias"], c["max_abs_value"] = r.f64(), r.f64()
    d["precision"]["bias"] = abi.FORMAT_NAMES.get(r.i32(), "?")
    weight_sum = r.i32()
    d["precision"]["weight_sum"] = None if weight_sum == 0 else abi.FORMAT_NAMES.get(weight_sum - 1, "?")
    d["precision"]["pv_unnormalised"] = bool(r.i32())
    for name in ("q_entry", "k_entry", "v_entry"):
        d["precision"][name] = abi.FORMAT_NAMES.get(r.i32(), "?")
    for _ in range(r.u32()):
        name = r.str()
        d["paths"].append((name, _read_precision(r)))
    d["declared_paths"] = []
    if r.at_end():
        return d
    count = r.u32()
    if count > 4096:
        raise ProtocolError("more than 4096 declared paths")
    d["declared_paths"] = [_read_path_declaration(r) for _ in range(count)]
    if r.at_end():
        return d
    c["deterministic_backward"] = r.i32()
    if r.at_end():
        return d
    names = {code: name for name, code in abi.CACHE_POLICIES.items()}
    d["cache_policy"] = names.get(r.i32(), "?")
    for name in ("cache_sinks", "cache_recent", "reports_retained", "page_tokens"):
        d[name] = r.i32()
    if r.at_end():
        return d
    c["value_dims"] = [int(x) for x in r.array("<i4")]
    c["value_dim"] = (r.i64(), r.i64())
    c["alibi_excludes_bias"] = r.i32()
    d["declared_key_tiles"] = [int(x) for x in r.array("<i4")]  # empty, or one per declared path
    if d["declared_key_tiles"] and len(d["declared_key_tiles"]) != len(d["declared_paths"]):
        raise ProtocolError("declared_key_tiles has %d entries for %d declared paths"
                            % (len(d["declared_key_tiles"]), len(d["declared_paths"])))
    if r.at_end():
        return d
    d["precision"]["flush_subnormals"] = bool(r.i32())  # 2.9
    r.expect_end()
    return d


# --- a problem (FORWARD) --------------------------------------------------------------------------

def _dims_product(*dims):
    n = 1
    for d in dims:
        if d < 1 or d > (1 << 31):
            raise ProtocolError("shape field out of range")
        n *= d
        if n > (1 << 34):
            raise ProtocolError("shape too large")
    return n


def decode_problem_fields(r, storage):
    """The fields of a problem (a dict of ints, floats and read-only numpy arrays shaped as in
    docs/design.md#problem-semantics) from a FORWARD payload; `storage` maps q, k, v, bias to formats. Every array must
    agree with the shape (process_protocol.hpp's read_problem checks)."""
    p = {}
    for name in ("batch", "heads", "kv_heads", "q_len", "k_len", "head_dim", "value_dim"):
        p[name] = r.i32()
    p["scale"], p["q_offset"], p["causal"] = r.f64(), r.i64(), bool(r.i32())
    terms = [int(x) for x in r.array("<i4")]
    for index, name in enumerate(abi.INTEGER_MASK_TERMS):
        p[name] = terms[index] if index < len(terms) else 0
    if any(terms[len(abi.INTEGER_MASK_TERMS):]):
        raise ProtocolError("an integer mask term this package does not know is set")
    p["rope"], p["rope_base"] = bool(r.i32()), r.f64()
    kv_valid, q_valid, q_segment, k_segment = r.array("<i4"), r.array("<i4"), r.array("<i4"), r.array("<i4")
    explicit_mask = r.array("u1")
    p["softcap"] = r.f64()
    alibi_slopes = r.array("<f4")
    bias = r.array(numpy_dtype(storage["bias"]))
    p["bias_per_batch"], p["bias_per_head"] = bool(r.i32()), bool(r.i32())
    sinks = r.array("<f4")
    q, k, v = r.array("u1"), r.array("u1"), r.array("u1")

    B, H, Hkv, Tq, Tk, Dk, Dv = (p[n] for n in ("batch", "heads", "kv_heads",
                                 "q_len", "k_len", "head_dim", "value_dim"))

    def buffer(raw, fmt, shape, what):
        if fmt in quantized.QUANTIZED:
            try:
                return quantized.decode(raw, fmt, shape)
            except ValueError:
                raise ProtocolError("array %s does not match the shape" % what)
        if raw.size != _dims_product(*shape) * itemsize(fmt):
            raise ProtocolError("array %s does not match the shape" % what)
        values = raw.view(numpy_dtype(fmt))
        if not values.flags.aligned:
            values = values.copy()
        values = values.reshape(shape)
        values.flags.writeable = False
        return values

    def optional(values, shape, what):
        if values.size == 0:
            return None
        if values.size != _dims_product(*shape):
            raise ProtocolError("array %s does not match the shape" % what)
        return values.reshape(shape)

    p["q"] = buffer(q, storage["q"], (B, H, Tq, Dk), "q")
    p["k"] = buffer(k, storage["k"], (B, Hkv, Tk, Dk), "k")
    p["v"] = buffer(v, storage["v"], (B, Hkv, Tk, Dv), "v")
    if H % Hkv:
        raise ProtocolError("heads %d is not a multiple of kv_heads %d" % (H, Hkv))
    p["kv_valid"] = optional(kv_valid, (B,), "kv_valid")
    p["q_valid"] = optional(q_valid, (B,), "q_valid")
    p["q_segment"] = optional(q_segment, (B, Tq), "q_segment")
    p["k_segment"] = optional(k_segment, (B, Tk), "k_segment")
    if (p["q_segment"] is None) != (p["k_segment"] is None):
        raise ProtocolError("q_segment and k_segment travel together")
    mask = optional(explicit_mask, (B, Tq, Tk), "explicit_mask")
    p["explicit_mask"] = None if mask is None else mask != 0
    p["alibi_slopes"] = optional(alibi_slopes, (H,), "alibi_slopes")
    p["sinks"] = optional(sinks, (H,), "sinks")
    bias_shape = (B if p["bias_per_batch"] else 1, H if p["bias_per_head"] else 1, Tq, Tk)
    p["bias"] = optional(bias, bias_shape, "bias")
    return p


def encode_problem(storage=None, **fields):
    """A FORWARD payload (attest's side, for tests and tools). Fields as decode_problem_fields
    gives them; q, k, v (and a 16-bit bias) already in their storage formats, absent arrays None."""
    storage = dict({"q": "f32", "k": "f32", "v": "f32", "bias": "f32"}, **(storage or {}))
    f = dict(scale=1.0, q_offset=None, causal=False, window=0, chunk=0, lookahead=0, rope=False, rope_base=10000.0,
             kv_valid=None, q_valid=None, q_segment=None, k_segment=None, explicit_mask=None, softcap=0.0,
             alibi_slopes=None, bias=None, bias_per_batch=True, bias_per_head=True, sinks=None)
    f.update(fields)
    q, k, v = (np.asarray(f[n]) for n in ("q", "k", "v"))
    B, H, Tq, Dk = q.shape
    Hkv, Tk, Dv = k.shape[1], k.shape[2], v.shape[3]
    w = Writer()
    for x in (B, H, Hkv, Tq, Tk, Dk, Dv):
        w.i32(x)
    w.f64(f["scale"]).i64(Tk - Tq if f["q_offset"] is None else f["q_offset"]).i32(int(bool(f["causal"])))
    w.array([f[n] for n in abi.INTEGER_MASK_TERMS], "<i4")
    w.i32(int(bool(f["rope"]))).f64(f["rope_base"])
    for name in ("kv_valid", "q_valid", "q_segment", "k_segment"):
        w.array(f[name], "<i4")
    w.array(f["explicit_mask"], "u1")
    w.f64(f["softcap"]).array(f["alibi_slopes"], "<f4").array(f["bias"], numpy_dtype(storage["bias"]))
    w.i32(int(bool(f["bias_per_batch"]))).i32(int(bool(f["bias_per_head"]))).array(f["sinks"], "<f4")
    for name in ("q", "k", "v"):
        w.bytes_array(np.ascontiguousarray(f[name], dtype=numpy_dtype(storage[name])))
    return w.bytes()


# --- replies and the decode messages --------------------------------------------------------------

def encode_forward_result(status, error="", path="", fault="", o=b"", lse=None):
    w = Writer().i32(status).str(error).str(path).str(fault)
    w.bytes_array(o if o is not None else b"")
    return w.array(lse, "<f4").bytes()


def decode_forward_result(payload):
    r = Reader(payload)
    out = {"status": r.i32(), "error": r.str(), "path": r.str(), "fault": r.str()}
    out["o"], out["lse"] = r.array("u1"), r.array("<f4")
    r.expect_end()
    return out


def encode_decode_open(batch, heads, kv_heads, head_dim, value_dim, scale, window=0, chunk=0, lookahead=0, rope=False,
                       rope_base=10000.0, softcap=0.0, alibi_slopes=None, sinks=None, k_scales=None, v_scales=None,
                       scales_follow=False):
    w = Writer()
    for x in (batch, heads, kv_heads, head_dim, value_dim):
        w.i32(x)
    w.f64(scale).array([window, chunk, lookahead], "<i4").i32(int(bool(rope))).f64(rope_base).f64(softcap)
    w.array(alibi_slopes, "<f4").array(sinks, "<f4")
    if scales_follow or k_scales is not None:
        w.array(k_scales, "<f4").array(v_scales, "<f4")
    return w.bytes()


def decode_decode_open(r, scales_follow=False):
    """A decode configuration (DECODE_OPEN; with scales_follow, the head of PAGE_BYTES and DECODE_PAGED)."""
    c = {}
    for name in ("batch", "heads", "kv_heads", "head_dim", "value_dim"):
        c[name] = r.i32()
    c["scale"] = r.f64()
    terms = [int(x) for x in r.array("<i4")]
    for index, name in enumerate(abi.INTEGER_MASK_TERMS):
        c[name] = terms[index] if index < len(terms) else 0
    if any(terms[len(abi.INTEGER_MASK_TERMS):]):
        raise ProtocolError("an integer mask term this package does not know is set")
    c["rope"], c["rope_base"], c["softcap"] = bool(r.i32()), r.f64(), r.f64()
    slopes, sinks = r.array("<f4"), r.array("<f4")
    k_scales = v_scales = np.zeros(0, dtype=np.float32)
    if scales_follow or not r.at_end():  # 2.4: q8_head's static scales, [B][Hkv] each
        k_scales, v_scales = r.array("<f4"), r.array("<f4")
    if not scales_follow:
        r.expect_end()
    heads = c["batch"] * c["kv_heads"]
    if (k_scales.size or v_scales.size) and (k_scales.size != heads or v_scales.size != heads):
        raise ProtocolError("decode k_scales and v_scales must hold B x Hkv values each")
    c["k_scales"] = k_scales.reshape(c["batch"], c["kv_heads"]) if k_scales.size else None
    c["v_scales"] = v_scales.reshape(c["batch"], c["kv_heads"]) if v_scales.size else None
    for name in ("batch", "heads", "kv_heads", "head_dim", "value_dim"):
        if not 1 <= c[name] <= (1 << 30):
            raise ProtocolError("decode configuration field out of range")
    if (slopes.size and slopes.size != c["heads"]) or (sinks.size and sinks.size != c["heads"]):
        raise ProtocolError("decode slopes or sinks do not match the heads")
    if c["heads"] % c["kv_heads"]:
        raise ProtocolError("decode heads %d is not a multiple of kv_heads %d" % (c["heads"], c["kv_heads"]))
    c["alibi_slopes"] = slopes if slopes.size else None
    c["sinks"] = sinks if sinks.size else None
    return c


def encode_decode_opened(status, error="", session=0):
    return Writer().i32(status).str(error).u64(session).bytes()


def decode_decode_opened(payload):
    r = Reader(payload)
    out = {"status": r.i32(), "error": r.str(), "session": r.u64()}
    r.expect_end()
    return out


def encode_decode_step(session, n, want_lse, q, k, v):
    w = Writer().u64(session).i32(n).i32(int(bool(want_lse)))
    for x in (q, k, v):
        w.bytes_array(np.ascontiguousarray(x))
    return w.bytes()


def encode_decode_result(status, error="", path="", o=b"", lse=None):
    w = Writer().i32(status).str(error).str(path).bytes_array(o if o is not None else b"")
    return w.array(lse, "<f4").bytes()


def decode_decode_result(payload):
    r = Reader(payload)
    out = {"status": r.i32(), "error": r.str(), "path": r.str()}
    out["o"], out["lse"] = r.array("u1"), r.array("<f4")
    r.expect_end()
    return out


def encode_string(message):
    """An ERROR or FAULT payload."""
    return Writer().str(message).bytes()


def decode_string(payload):
    r = Reader(payload)
    s = r.str()
    r.expect_end()
    return s


# --- the table's messages, field by field -----------------------------------------------------------

_SCALARS = {"u32", "i32", "u64", "i64", "f64", "str"}
_ARRAYS = {"u8_array": "u1", "i32_array": "<i4", "i64_array": "<i8", "f32_array": "<f4"}


def message_fields(kind):
    """The (type, name) fields of message `kind` (a number or a name), as the table lists them."""
    name = TYPE_NAMES[kind] if isinstance(kind, int) else kind
    return _interface.MESSAGES[name][2]


def encode_message(kind, **values):
    """The payload of a message whose fields are numbers, strings and arrays, from the table's
    field list (a missing number is 0, a missing string "", a missing array empty)."""
    w = Writer()
    for field_type, name in message_fields(kind):
        value = values.pop(name, None)
        if field_type in _SCALARS:
            getattr(w, field_type)("" if value is None and field_type == "str" else value or 0)
        elif field_type == "u8_array":
            w.bytes_array(b"" if value is None else value)
        elif field_type in _ARRAYS:
            w.array(value, _ARRAYS[field_type])
        else:
            raise ValueError("message %s: field %s of type %s is not encoded field by field" % (kind, name, field_type))
    if values:
        raise ValueError("message %s has no field %s" % (kind, ", ".join(sorted(values))))
    return w.bytes()


def decode_message(kind, payload):
    """{name: value} of a message whose fields are numbers, strings and arrays (the table's list)."""
    r = Reader(payload)
    out = {}
    for field_type, name in message_fields(kind):
        if field_type in _SCALARS:
            out[name] = getattr(r, field_type)()
        elif field_type in _ARRAYS:
            out[name] = r.array(_ARRAYS[field_type])
        else:
            raise ValueError("message %s: field %s of type %s is not decoded field by field" % (kind, name, field_type))
    r.expect_end()
    return out


def decode_paged_step(r):
    """The step of a DECODE_PAGED payload after its configuration (the paged_step layout)."""
    step = {"page_bytes": r.i64(), "pool": r.array("u1"), "table_width": r.i32(), "tables": r.array("<i4"),
            "lengths": r.array("<i8"), "counts": r.array("<i4"), "want_lse": bool(r.i32())}
    step["q"], step["k"], step["v"] = r.array("u1"), r.array("u1"), r.array("u1")
    r.expect_end()
    return step


def encode_paged_step(page_bytes, pool, table_width, tables, lengths, counts, want_lse, q, k, v):
    """The paged_step layout (attest's side, for tests)."""
    w = Writer().i64(page_bytes).bytes_array(pool).i32(table_width).array(tables, "<i4").array(lengths, "<i8")
    w.array(counts, "<i4").i32(int(bool(want_lse)))
    for x in (q, k, v):
        w.bytes_array(np.ascontiguousarray(x))
    return w.bytes()

"""What a kernel declares: its features, where it rounds, the problems it accepts, its paths.

Everything is checked when the dataclass is built: an unknown feature name or a bad value raises
DeclarationError there, before anything is served (`python3 -m attest_kernel serve` then answers
attest's HELLO with an ERROR carrying the message, and attest prints it and exits 2)."""
import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Tuple

from . import abi
from ._checks import (FEATURES, I32_MAX, KV_FORMATS, PRECISIONS, DeclarationError, _fail, _flag,  # noqa: F401
                      _format, _int, _number, _range)
from .paths import PATH_NAME_BYTES, Path, check_name  # noqa: F401


@dataclass(frozen=True)
class Precision:
    """Where the kernel rounds (attest_precision_spec). Formats are "f32", "bf16" or "f16".

    q, k, v, o and bias are storage formats: a bf16 / f16 buffer arrives (and O leaves) as uint16 bit
    patterns; k and v may also be quantized ("q8", "q4", "q4_0", "q8_token", "q8_head", "e4m3", "e5m2":
    they arrive as attest_kernel.quantized.QuantizedRows, codes and scales). scores: q.k is accumulated
    in; p: P is rounded to it before P.V ("f32": not rounded); accumulator: P.V (and the softmax sum,
    unless weight_sum names another) is accumulated in; exp_ulps: the worst error of one exp in ulps (0
    means 1). weight_sum: None, or the format the softmax sum is accumulated in apart from P.V.
    pv_unnormalised: P.V summed with weights exp(s - m), divided by the sum at the end. q_entry,
    k_entry, v_entry: the kernel rounds that input to this format before using it ("f32": used as
    stored). flush_subnormals (ABI 2.9): the kernel may flush subnormals (FTZ/DAZ, as wasm and GPU builds
    do): any value below 2^-126 in magnitude, read, computed or written, may become a zero of its sign;
    the kernel's own precision declares it, its paths inherit it."""
    q: str = "f32"
    k: str = "f32"
    v: str = "f32"
    o: str = "f32"
    scores: str = "f32"
    p: str = "f32"
    accumulator: str = "f32"
    exp_ulps: float = 1.0
    bias: str = "f32"
    weight_sum: Optional[str] = None
    pv_unnormalised: bool = False
    q_entry: str = "f32"
    k_entry: str = "f32"
    v_entry: str = "f32"
    flush_subnormals: bool = False

    def __post_init__(self):
        for name in ("q", "o", "scores", "p", "accumulator", "bias", "k_entry", "v_entry"):
            _format("precision." + name, getattr(self, name))
        _format("precision.q_entry", self.q_entry, PRECISIONS + ("q8",))  # 2.6: q8, as ggml's Q
        for name in ("k", "v"):
            _format("precision." + name, getattr(self, name), KV_FORMATS)
        if self.weight_sum is not None:
            _format("precision.weight_sum", self.weight_sum)
        _number("precision.exp_ulps", self.exp_ulps)
        object.__setattr__(self, "exp_ulps", float(self.exp_ulps))
        object.__setattr__(self, "pv_unnormalised", _flag("precision.pv_unnormalised", self.pv_unnormalised))
        object.__setattr__(self, "flush_subnormals", _flag("precision.flush_subnormals", self.flush_subnormals))

    @classmethod
    def stored(cls, fmt, **fields):
        """q, k, v and o all stored in `fmt` (the arithmetic fields as given, f32 by default)."""
        return cls(q=fmt, k=fmt, v=fmt, o=fmt, **fields)

    def storage(self):
        """{"q": ..., "k": ..., "v": ..., "o": ..., "bias": ...}: the formats that cross the boundary."""
        return {name: getattr(self, name) for name in ("q", "k", "v", "o", "bias")}


@dataclass(frozen=True)
class Contract:
    """The problems the kernel accepts (attest_contract); attest sends no other.

    Ranges are (min, max), inclusive; None means no limit. head_dims: the only head widths Dk
    (empty: any within head_dim). dk_equals_dv: only Dv == Dk. default_scale_only: only
    scale = 1/sqrt(Dk). causal_required: only causal problems. self_attention_only: only
    Tq == Tk with q_offset 0. query_tile, key_tile: the kernel's tiles (0: none). inputs: what
    masked keys may hold (abi.INPUT_DOMAINS): "masked_may_be_nonfinite" (NaN, inf), "finite", or
    "masked_scored" (an additive mask: masked keys are scored, then get -inf; finite, scores in
    range); inputs_finite=True is the older spelling of inputs="finite". max_abs_value: 0, or the
    largest |V| of a visible key the kernel is built for (at least 1). alibi_slopes: "arbitrary"
    or "standard" (only the geometric set; alibi_max_bias, 0 meaning 8). decode_only: no
    forward, certified through decode only. decode_lse_optional: a decode step may skip LSE.
    deterministic_backward: the backward's gradients are bitwise the same on every call.
    value_dims, value_dim (ABI 2.7): Dv apart from Dk, the only widths (empty: any within value_dim)
    and the range (None: head_dim's); not with dk_equals_dv. alibi_excludes_bias (ABI 2.7): ALiBi and
    a bias never come in one problem (one mask input that takes either)."""
    head_dims: Sequence[int] = ()
    head_dim: Optional[Tuple[int, int]] = None
    batch: Optional[Tuple[int, int]] = None
    heads: Optional[Tuple[int, int]] = None
    q_len: Optional[Tuple[int, int]] = None
    k_len: Optional[Tuple[int, int]] = None
    q_offset: Optional[Tuple[int, int]] = None
    dk_equals_dv: bool = False
    default_scale_only: bool = False
    causal_required: bool = False
    self_attention_only: bool = False
    query_tile: int = 0
    key_tile: int = 0
    inputs_finite: bool = False
    inputs: str = ""
    max_abs_value: float = 0.0
    alibi_slopes: str = "arbitrary"
    alibi_max_bias: float = 0.0
    decode_only: bool = False
    decode_lse_optional: bool = False
    deterministic_backward: bool = False
    value_dims: Sequence[int] = ()
    value_dim: Optional[Tuple[int, int]] = None
    alibi_excludes_bias: bool = False

    def __post_init__(self):
        for name in ("head_dims", "value_dims"):
            dims = getattr(self, name)
            if isinstance(dims, (str, bytes)) or not isinstance(dims, (list, tuple)):
                _fail("contract." + name, "%r is not a list of head widths" % (dims,))
            object.__setattr__(self, name, tuple(_int("contract." + name, d, 1, I32_MAX) for d in dims))
        for name in ("head_dim", "batch", "heads", "q_len", "k_len", "q_offset", "value_dim"):
            object.__setattr__(self, name, _range("contract." + name, getattr(self, name), name == "q_offset"))
        for name in ("dk_equals_dv", "default_scale_only", "causal_required", "self_attention_only", "inputs_finite",
                     "decode_only", "decode_lse_optional", "deterministic_backward", "alibi_excludes_bias"):
            object.__setattr__(self, name, _flag("contract." + name, getattr(self, name)))
        if self.dk_equals_dv and (self.value_dims or self.value_dim != (0, 0)):
            _fail("contract.value_dims", "value_dims or value_dim with dk_equals_dv (Dv is then Dk)")
        _int("contract.query_tile", self.query_tile, 0, I32_MAX)
        _int("contract.key_tile", self.key_tile, 0, I32_MAX)
        object.__setattr__(self, "max_abs_value", _number("contract.max_abs_value", self.max_abs_value))
        if 0 < self.max_abs_value < 1:
            _fail("contract.max_abs_value", "%g: 0 (any) or at least 1" % self.max_abs_value)
        if self.alibi_slopes not in abi.ALIBI_SLOPES:
            _fail("contract.alibi_slopes", "%r is not one of %s" % (self.alibi_slopes, ", ".join(abi.ALIBI_SLOPES)))
        object.__setattr__(self, "alibi_max_bias", _number("contract.alibi_max_bias", self.alibi_max_bias))
        if self.inputs and self.inputs not in abi.INPUT_DOMAINS:
            _fail("contract.inputs", "%r is not one of %s" % (self.inputs, ", ".join(abi.INPUT_DOMAINS)))
        if self.inputs and self.inputs_finite and self.inputs != "finite":
            _fail("contract.inputs", "%r with inputs_finite=True" % self.inputs)
        object.__setattr__(self, "inputs", self.inputs or (
            "finite" if self.inputs_finite else "masked_may_be_nonfinite"))


@dataclass(frozen=True)
class Declaration:
    """A kernel's declaration: what attest certifies it against.

    name: as attest prints it. features: names from FEATURES ("causal", "window", "key_padding",
    "query_padding", "segments", "explicit_mask", "gqa", "lse", "rope", "chunk", "softcap",
    "alibi", "bias", "sinks", "lookahead"). empty_rows: "zero" (O = 0, LSE = -inf) or "nan".
    paths: the kernel's internal paths, each (name, Precision) for a path that rounds elsewhere than
    `precision` (ABI 2.1), or an attest_kernel.Path declaring the problems it takes (2.2), its key
    tile (2.7) and optionally its precision (the kernel names the path that served a call by
    returning (o, lse, path)). decode: None, or
    a function config -> session for attest's decode checks (see README.md). backward: None, or a
    function (problem, grad) -> (dq, dk, dv) or (dq, dk, dv, dsinks) (grad.o, grad.lse, grad.d_o,
    grad.threads; float32 kernels only). cache_policy: which positions a decoder's sessions keep:
    "full", "window" (cache_recent), "sinks_recent" (cache_sinks, cache_recent) or "explicit" (each
    session's retained(b, t) returns the positions query t of its last step attended in sequence b).
    page_tokens > 0: block tables, with page_bytes(config) -> bytes of one page and
    decode_paged(config, step) -> (o, lse) per sequence (see attest_kernel.paged). merge: None, or a
    function (o, lse) -> (o, lse) merging partial attention states: o float32 [parts][rows][Dv], lse
    [parts][rows] (a part that saw no key of a row: lse -inf, o NaN) into o [rows][Dv], lse [rows]
    (a row no part saw: o 0, lse -inf). packed: None, or a function taking ABI 2.8's packed
    varlen layout, PackedProblem -> (o, lse) or o (see attest_kernel.packed; float32 buffers).
    packed_int64 (ABI 2.10, with packed): the function gets cu_seqlens as int64 arrays, not int32."""
    name: str
    features: Sequence[str] = ()
    empty_rows: str = "zero"
    precision: Precision = field(default_factory=Precision)
    contract: Contract = field(default_factory=Contract)
    paths: Sequence[object] = ()  # (name, Precision) or Path
    decode: Optional[Callable] = None
    backward: Optional[Callable] = None
    cache_policy: str = "full"
    cache_sinks: int = 0
    cache_recent: int = 0
    page_tokens: int = 0
    page_bytes: Optional[Callable] = None
    decode_paged: Optional[Callable] = None
    merge: Optional[Callable] = None
    packed: Optional[Callable] = None
    packed_int64: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or len(self.name.encode()) > 63:
            _fail("name", "%r: a non-empty string of at most 63 bytes" % (self.name,))
        features = self.features
        if isinstance(features, (str, bytes)) or not isinstance(features, (list, tuple, set, frozenset)):
            _fail("features", "%r is not a list of feature names" % (features,))
        for feature in features:
            if feature in ("decode", "backward", "merge", "packed", "packed_int64"):
                hint = "give Declaration(%s=...) instead" % feature
                _fail("features", "%r is not declared by name: %s" % (feature, hint))
            if feature not in FEATURES:
                _fail("features", "unknown feature %r (known: %s)" % (feature, ", ".join(FEATURES)))
        object.__setattr__(self, "features", tuple(dict.fromkeys(features)))
        if self.empty_rows not in abi.EMPTY_ROWS:
            _fail("empty_rows", "%r is not \"zero\" or \"nan\"" % (self.empty_rows,))
        if not isinstance(self.precision, Precision):
            _fail("precision", "%r is not an attest_kernel.Precision" % (self.precision,))
        if not isinstance(self.contract, Contract):
            _fail("contract", "%r is not an attest_kernel.Contract" % (self.contract,))
        if self.decode is not None and not callable(self.decode):
            _fail("decode", "%r is not callable" % (self.decode,))
        for name in ("backward", "page_bytes", "decode_paged", "merge", "packed"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                _fail(name, "%r is not callable" % (getattr(self, name),))
        if not isinstance(self.packed_int64, bool):
            _fail("packed_int64", "%r is not True or False" % (self.packed_int64,))
        if self.packed_int64 and self.packed is None:
            _fail("packed_int64", "int64 offsets belong to the packed layout: give Declaration(packed=...)")
        if self.backward is not None and self.precision != Precision():
            _fail("backward", "attest sends a backward only to a kernel whose storage and arithmetic are f32")
        if self.contract.deterministic_backward and self.backward is None:
            _fail("contract.deterministic_backward", "needs Declaration(backward=...)")
        self._check_cache()
        if self.contract.decode_only and self.decode is None:
            _fail("contract.decode_only", "a decode-only kernel needs Declaration(decode=...)")
        if self.contract.causal_required and "causal" not in self.features:
            _fail("contract.causal_required", "needs the feature \"causal\"")
        self._check_paths()

    def _check_paths(self):
        if isinstance(self.paths, (str, bytes)) or not isinstance(self.paths, (list, tuple)):
            _fail("paths", "%r is not a list of paths" % (self.paths,))
        paths = []
        for index, entry in enumerate(self.paths):
            where = "paths[%d]" % index
            if isinstance(entry, Path):
                name, precision = entry.name, entry.precision
            elif isinstance(entry, (tuple, list)) and len(entry) == 2:
                name, precision = entry
                if not isinstance(precision, Precision):
                    _fail(where, "%r is not an attest_kernel.Precision" % (precision,))
            else:
                _fail(where, "%r is not a (name, Precision) pair or an attest_kernel.Path" % (entry,))
            check_name(where, name)
            if precision is not None and not isinstance(precision, Precision):
                _fail(where, "path %r: %r is not an attest_kernel.Precision" % (name, precision))
            if precision is not None and precision.storage() != self.precision.storage():
                _fail(where, "path %r stores %s, the kernel %s: a path changes arithmetic, never storage"
                      % (name, precision.storage(), self.precision.storage()))
            if precision is not None and precision.flush_subnormals and not self.precision.flush_subnormals:
                _fail(where, "path %r: flush_subnormals is the kernel's precision's to declare (its paths inherit it)"
                      % name)
            if name in (p.name if isinstance(p, Path) else p[0] for p in paths):
                _fail(where, "path %r declared twice" % name)
            paths.append(entry if isinstance(entry, Path) else (name, precision))
        object.__setattr__(self, "paths", tuple(paths))

    @property
    def path_precisions(self):
        """[(name, Precision)]: ABI 2.1's list, every path that rounds elsewhere than `precision`."""
        return [(p.name, p.precision) if isinstance(p, Path) else p for p in self.paths
                if not isinstance(p, Path) or p.precision is not None]

    @property
    def declared_paths(self):
        """[Path]: ABI 2.2's declared paths with their predicates, in the order problems try them."""
        return [p for p in self.paths if isinstance(p, Path)]

    def _check_cache(self):
        if self.cache_policy not in abi.CACHE_POLICIES:
            _fail("cache_policy", "%r is not one of %s" % (self.cache_policy, ", ".join(abi.CACHE_POLICIES)))
        sinks = _int("cache_sinks", self.cache_sinks, 0, I32_MAX)
        recent = _int("cache_recent", self.cache_recent, 0, I32_MAX)
        if self.cache_policy in ("window", "sinks_recent") and recent < 1:
            _fail("cache_recent", "cache_policy %r needs cache_recent >= 1" % self.cache_policy)
        if (self.cache_policy == "sinks_recent") != (sinks > 0):
            _fail("cache_sinks", "%d: at least 1 with cache_policy \"sinks_recent\", 0 otherwise" % sinks)
        if self.cache_policy == "full" and recent:
            _fail("cache_recent", "%d with cache_policy \"full\" (0 there)" % recent)
        if _int("page_tokens", self.page_tokens, 0, I32_MAX) and (self.page_bytes is None or self.decode_paged is None):
            _fail("page_tokens", "block tables need Declaration(page_bytes=..., decode_paged=...)")
        if not self.page_tokens and (self.page_bytes is not None or self.decode_paged is not None):
            _fail("page_tokens", "page_bytes and decode_paged need page_tokens >= 1")
        if (self.cache_policy != "full" or self.page_tokens) and self.decode is None:
            _fail("cache_policy", "a cache policy and block tables belong to a decoder: give Declaration(decode=...)")

    @property
    def capabilities(self):
        """The ATTEST_CAP_* bits."""
        bits = 0
        for feature in self.features:
            bits |= abi.CAPABILITIES[feature]
        if self.decode is not None:
            bits |= abi.CAPABILITIES["decode"]
        if self.backward is not None:
            bits |= abi.CAPABILITIES["backward"]
        if self.merge is not None:
            bits |= abi.CAPABILITIES["merge"]
        if self.packed is not None:
            bits |= abi.CAPABILITIES["packed"]
        if self.packed_int64:
            bits |= abi.CAPABILITIES["packed_int64"]
        return bits

    def has(self, feature):
        return feature in self.features

    def replace(self, **changes):
        """A copy with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)


def declare(declaration):
    """Decorator: attaches `declaration` to the kernel function as `function.declaration`, the
    attribute `python3 -m attest_kernel serve module:function` reads."""
    if not isinstance(declaration, Declaration):
        raise DeclarationError("declare(): %r is not an attest_kernel.Declaration" % (declaration,))

    def attach(function):
        function.declaration = declaration
        return function
    return attach

"""A declared internal path (ABI 2.2's attest_path_predicate, 2.7's key tile): its name, as the
kernel returns it with (o, lse, path), the problems it takes, and where it rounds.

attest then draws each path's problems from its predicate, judges each call at the precision of the
path that served it, and fails a call served by another path than the first declared path whose
predicate the problem meets (impl/kernels/include/attest/kernels/path_predicate.h)."""
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from . import abi
from ._checks import FEATURES, I32_MAX, _fail, _flag, _int, _range

PATH_NAME_BYTES = 31
OPEN_END = 1 << 40  # a range's max given as None: what C kernels write for "no upper limit"
MAX_KEY_TILE = 4096  # kMaxContractTile
# The features that are mask terms (FeatureKind::kMaskTerm in impl/model/src/features.cpp).
MASK_FEATURES = ("causal", "key_padding", "query_padding", "segments", "explicit_mask") + abi.INTEGER_MASK_TERMS
RANGES = ("batch", "heads", "q_len", "k_len", "head_dim", "value_dim")  # in wire order


def check_name(where, name):
    if not isinstance(name, str) or not 1 <= len(name.encode()) <= PATH_NAME_BYTES or not name.isprintable():
        _fail(where, "path name %r: 1 to %d printable bytes" % (name, PATH_NAME_BYTES))
    return name


def _open_range(where, value):
    """None (any), or (min, max) with max None for no upper limit."""
    if isinstance(value, (tuple, list)) and len(value) == 2 and value[1] is None:
        value = (value[0], OPEN_END)
    return _range(where, value)


def _features(where, names):
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple, set, frozenset)):
        _fail(where, "%r is not a list of feature names" % (names,))
    for name in names:
        if name not in FEATURES:
            _fail(where, "unknown feature %r (known: %s)" % (name, ", ".join(FEATURES)))
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Path:
    """A path and the problems it takes: a problem goes to the first declared path whose predicate
    it meets (every range holds, the widths are multiples, Tk's remainder is as stated, the required
    features are used, the excluded ones and, with no_mask, every mask term are not), so declare the
    narrowest first. Ranges are (min, max) inclusive, max None for no limit, None for any.
    head_dim_multiple, value_dim_multiple: 0 or Dk (Dv) % it == 0. k_len_multiple: 0, or Tk % it
    == 0 (!= 0 with k_len_not_multiple). key_tile (ABI 2.7): keys per online-softmax tile on this
    path (0: the contract's key_tile). precision: None (the kernel's), or where this path rounds."""
    name: str
    precision: Optional[object] = None
    batch: Optional[Tuple[int, Optional[int]]] = None
    heads: Optional[Tuple[int, Optional[int]]] = None
    q_len: Optional[Tuple[int, Optional[int]]] = None
    k_len: Optional[Tuple[int, Optional[int]]] = None
    head_dim: Optional[Tuple[int, Optional[int]]] = None
    value_dim: Optional[Tuple[int, Optional[int]]] = None
    head_dim_multiple: int = 0
    value_dim_multiple: int = 0
    k_len_multiple: int = 0
    k_len_not_multiple: bool = False
    required: Sequence[str] = ()
    excluded: Sequence[str] = ()
    no_mask: bool = False
    key_tile: int = 0

    def __post_init__(self):
        where = "path %r" % (self.name,)
        check_name("paths", self.name)
        for name in RANGES:
            object.__setattr__(self, name, _open_range("%s.%s" % (where, name), getattr(self, name)))
        for name in ("head_dim_multiple", "value_dim_multiple", "k_len_multiple"):
            _int("%s.%s" % (where, name), getattr(self, name), 0, I32_MAX)
        _int(where + ".key_tile", self.key_tile, 0, MAX_KEY_TILE)
        for name in ("k_len_not_multiple", "no_mask"):
            object.__setattr__(self, name, _flag("%s.%s" % (where, name), getattr(self, name)))
        if self.k_len_not_multiple and self.k_len_multiple <= 1:
            _fail(where + ".k_len_not_multiple", "Tk %% %d != 0 takes no problem" % self.k_len_multiple)
        for name in ("required", "excluded"):
            object.__setattr__(self, name, _features("%s.%s" % (where, name), getattr(self, name)))
        both = [f for f in self.required if f in self.excluded]
        if both:
            _fail(where, "%s both required and excluded" % ", ".join(both))
        if self.no_mask and any(f in MASK_FEATURES for f in self.required):
            _fail(where, "requires a mask term and no_mask")

    def bits(self, features):
        """The ATTEST_CAP_* bits of `required` or `excluded`."""
        value = 0
        for name in features:
            value |= abi.CAPABILITIES[name]
        return value

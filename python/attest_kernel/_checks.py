"""The checks a declaration's fields go through: each failure raises DeclarationError naming the
field (shared by declaration.py and paths.py)."""
import math

from . import abi
from .quantized import QUANTIZED

# Declared by their own fields, not as features: operations beside the forward, and the packed layout.
NOT_FEATURES = ("decode", "backward", "merge", "packed", "packed_int64")
FEATURES = tuple(name for name in abi.CAPABILITIES if name not in NOT_FEATURES)
KV_FORMATS = tuple(abi.FORMATS)  # K and V storage: also the 2.4 quantized formats
PRECISIONS = tuple(name for name in KV_FORMATS if name not in QUANTIZED)  # "f32", "bf16", "f16"
I32_MAX = 2**31 - 1
I64_MAX = 2**63 - 1


class DeclarationError(ValueError):
    """A declaration attest would refuse or misread; the message names the field."""


def _fail(where, message):
    raise DeclarationError("%s: %s" % (where, message))


def _format(where, value, known=PRECISIONS):
    if value not in known:
        _fail(where, "%r is not a number format here (expected one of %s)" % (value, ", ".join(map(repr, known))))
    return value


def _flag(where, value):
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        _fail(where, "%r is not a boolean" % (value,))
    return bool(value)


def _int(where, value, low=None, high=None):
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(where, "%r is not an integer" % (value,))
    if (low is not None and value < low) or (high is not None and value > high):
        _fail(where, "%d is out of range [%s, %s]" % (value, low, high))
    return value


def _number(where, value, low=0.0):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        _fail(where, "%r is not a finite number >= %g" % (value, low))
    return float(value)


def _range(where, value, allow_negative=False):
    """None, or (min, max) inclusive; (0, 0) and None mean no limit. Returns (min, max)."""
    if value is None:
        return (0, 0)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        _fail(where, "%r is not a (min, max) pair or None" % (value,))
    low = _int(where + " min", value[0], None if allow_negative else 0, I64_MAX)
    high = _int(where + " max", value[1], None if allow_negative else 0, I64_MAX)
    if low < -I64_MAX:
        _fail(where, "min %d out of range" % low)
    if low > high:
        _fail(where, "min %d is larger than max %d" % (low, high))
    return (low, high)

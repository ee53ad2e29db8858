"""The numbers of attest's C ABI (impl/abi/include/attest/attest_abi.h) that travel on the protocol,
by the names a Declaration uses: all taken from the interface table (_interface.py)."""
from . import _interface


def _values(rows):
    return {name: value for name, (value, _version) in rows.items()}


ABI_MAJOR = _interface.VERSION["abi_major"]  # the descriptor this package sends: attest_kernel_v2 ...
ABI_MINOR = _interface.VERSION["abi_minor"]  # ... with every section up to this minor version
ABI_VERSION = ABI_MAJOR

# Status codes (attest_status).
STATUSES = _values(_interface.STATUSES)
OK = STATUSES["ok"]
INVALID_ARGUMENT = STATUSES["invalid_argument"]  # the problem is outside what the kernel accepts
UNSUPPORTED = STATUSES["unsupported"]  # a feature the kernel did not declare
INTERNAL_ERROR = STATUSES["internal_error"]

# Capability bits (ATTEST_CAP_*), by the feature names a Declaration uses.
CAPABILITIES = {name: 1 << bit for name, (bit, _version) in _interface.CAPABILITIES.items()}

# The integer mask terms in the order they travel (ATTEST_INTEGER_MASK_TERMS).
INTEGER_MASK_TERMS = tuple(name for name, _capability, _version in _interface.MASK_TERMS)

EMPTY_ROWS = _values(_interface.EMPTY_ROWS)  # attest_empty_rows
FORMATS = _values(_interface.FORMATS)  # attest_precision
FORMAT_NAMES = {code: name for name, code in FORMATS.items()}
ALIBI_SLOPES = _values(_interface.ALIBI_SLOPES)  # attest_alibi_slopes
INPUT_DOMAINS = _values(_interface.INPUT_DOMAINS)  # attest_input_domain
CACHE_POLICIES = _values(_interface.CACHE_POLICIES)  # attest_cache_policy

UNWRITTEN_F32 = 0x7FCAFE00  # ATTEST_UNWRITTEN_F32

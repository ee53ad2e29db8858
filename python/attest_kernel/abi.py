"""The numbers of attest's C ABI (impl/abi/include/attest/attest_abi.h) that travel on the protocol."""

# Status codes (attest_status).
OK = 0
INVALID_ARGUMENT = 1  # the problem is outside what the kernel accepts
UNSUPPORTED = 2  # a feature the kernel did not declare
INTERNAL_ERROR = 3

# Capability bits (ATTEST_CAP_*), by the feature names a Declaration uses.
CAPABILITIES = {
    "causal": 1 << 0,
    "window": 1 << 1,
    "key_padding": 1 << 2,
    "query_padding": 1 << 3,
    "segments": 1 << 4,
    "explicit_mask": 1 << 5,
    "gqa": 1 << 6,
    "lse": 1 << 7,
    "rope": 1 << 8,
    "decode": 1 << 9,
    "chunk": 1 << 10,
    "softcap": 1 << 11,
    "alibi": 1 << 12,
    "bias": 1 << 13,
    "sinks": 1 << 14,
    "lookahead": 1 << 15,
    "backward": 1 << 16,
}

# The integer mask terms in the order they travel (ATTEST_INTEGER_MASK_TERMS).
INTEGER_MASK_TERMS = ("window", "chunk", "lookahead")

# Empty-row policies (attest_empty_rows).
EMPTY_ROWS = {"zero": 0, "nan": 1}

# Number formats (attest_precision).
FORMATS = {"f32": 0, "bf16": 1, "f16": 2}
FORMAT_NAMES = {code: name for name, code in FORMATS.items()}

# ALiBi slope sets a contract accepts (attest_alibi_slopes).
ALIBI_SLOPES = {"arbitrary": 0, "standard": 1}

ABI_VERSION = 2  # the descriptor this package sends: attest_kernel_v2, with the 2.1-2.3 sections
UNWRITTEN_F32 = 0x7FCAFE00  # ATTEST_UNWRITTEN_F32

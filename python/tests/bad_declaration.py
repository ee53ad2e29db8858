"""A kernel whose declaration misspells a feature: refused when the module loads."""
from attest_kernel import Declaration, declare


@declare(Declaration(name="test-misspelt", features=["causal", "casual_mask"]))
def attention(p):
    raise AssertionError("never called")

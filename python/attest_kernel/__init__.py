"""attest_kernel: serve a Python attention kernel to attest over its process protocol.

    import numpy as np
    from attest_kernel import Declaration, declare

    @declare(Declaration(name="my-kernel", features=["causal", "lse"]))
    def attention(problem):
        ...
        return o, lse

    attest certify --kernel-cmd "python3 -m attest_kernel serve my_module:attention"

See python/README.md."""
__version__ = "0.1.0"  # as pyproject.toml

from .abi import INTERNAL_ERROR, INVALID_ARGUMENT, OK, UNSUPPORTED
from .declaration import FEATURES, Contract, Declaration, DeclarationError, Precision, declare
from .packed import PackedProblem
from .paths import Path
from .problem import DecodeConfig, Problem, apply_rope
from .protocol import InvalidArgument, KernelRefusal, OutputError, Unsupported, serve
from . import quantized
from .storage import from_float32, to_float32, to_torch, torch_available
from .wire import ProtocolError, VERSION as PROTOCOL_VERSION

__all__ = [
    "Contract", "Declaration", "DeclarationError", "DecodeConfig", "FEATURES", "INTERNAL_ERROR", "INVALID_ARGUMENT",
    "InvalidArgument", "KernelRefusal", "OK", "OutputError", "PackedProblem", "PROTOCOL_VERSION", "Path", "Precision",
    "Problem",
    "ProtocolError", "UNSUPPORTED", "Unsupported", "apply_rope", "declare", "from_float32", "quantized", "serve",
    "to_float32",
    "to_torch", "torch_available",
]

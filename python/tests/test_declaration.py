"""Declarations are checked when built: a wrong name or value is refused before anything is served."""
import os
import pytest

from attest_kernel import FEATURES, Contract, Declaration, DeclarationError, Precision, declare
from attest_kernel import abi, wire


def test_every_feature_has_its_capability_bit():
    d = Declaration(name="all", features=list(FEATURES))
    assert d.capabilities == sum(1 << bit for bit in (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15))


def test_unknown_feature_refused():
    with pytest.raises(DeclarationError, match=r"features: unknown feature 'casual' \(known: causal, window"):
        Declaration(name="k", features=["causal", "casual"])


@pytest.mark.parametrize("fields, message", [
    (dict(features="causal"), "not a list of feature names"),
    (dict(features=["decode"]), "Declaration\\(decode=...\\)"),
    (dict(features=["backward"]), r"give Declaration\(backward=...\)"),
    (dict(features=["merge"]), r"give Declaration\(merge=...\)"),
    (dict(merge="exact"), "merge: 'exact' is not callable"),
    (dict(features=["packed"]), r"give Declaration\(packed=...\)"),
    (dict(packed="varlen"), "packed: 'varlen' is not callable"),
    (dict(empty_rows="skip"), "empty_rows: 'skip'"),
    (dict(name=""), "name: ''"),
    (dict(precision="bf16"), "not an attest_kernel.Precision"),
    (dict(contract=Contract(causal_required=True)), "causal_required: needs the feature"),
    (dict(contract=Contract(decode_only=True)), "decode-only kernel needs"),
    (dict(paths=[("x" * 32, Precision())]), "1 to 31 printable bytes"),
    (dict(paths=[("fast", Precision(o="bf16"))]), "never storage"),
    (dict(paths=[("a", Precision()), ("a", Precision())]), "declared twice"),
    (dict(paths=["fast"]), "not a \\(name, Precision\\) pair"),
])
def test_bad_declarations_refused(fields, message):
    with pytest.raises(DeclarationError, match=message):
        Declaration(**dict(dict(name="k"), **fields))


@pytest.mark.parametrize("make, message", [
    (lambda: Precision(q="fp8"), "precision.q: 'fp8' is not a number format"),
    (lambda: Precision(exp_ulps=-1), "precision.exp_ulps"),
    (lambda: Precision(exp_ulps=float("nan")), "precision.exp_ulps"),
    (lambda: Precision(weight_sum="f64"), "precision.weight_sum"),
    (lambda: Precision(q_entry="q4"), "precision.q_entry: 'q4' is not a number format here"),
    (lambda: Precision(k_entry="q8"), "precision.k_entry"),
    (lambda: Contract(q_len=(8, 4)), "contract.q_len: min 8 is larger than max 4"),
    (lambda: Contract(q_len=(-1, 4)), "contract.q_len min"),
    (lambda: Contract(batch=4), "contract.batch: 4 is not a \\(min, max\\) pair"),
    (lambda: Contract(head_dims=[64, 0]), "contract.head_dims"),
    (lambda: Contract(key_tile=1.5), "contract.key_tile"),
    (lambda: Contract(max_abs_value=0.5), "contract.max_abs_value"),
    (lambda: Contract(alibi_slopes="geometric"), "contract.alibi_slopes"),
    (lambda: Contract(inputs_finite=2), "contract.inputs_finite"),
    (lambda: Contract(inputs="scored"), "contract.inputs"),
    (lambda: Contract(inputs="masked_scored", inputs_finite=True), "contract.inputs"),
])
def test_bad_values_refused(make, message):
    with pytest.raises(DeclarationError, match=message):
        make()


def test_q_may_be_quantized_to_q8_on_entry():
    assert Precision(k="q8", v="q8", q_entry="q8").q_entry == "q8"  # ggml's Q for a q8_0 K (2.6)


def test_defaults_and_normalisation():
    d = Declaration(name="k", features=("lse", "causal", "lse"), contract=Contract(q_offset=(-3, 3), q_len=[1, 8]))
    assert d.features == ("lse", "causal") and d.empty_rows == "zero"
    assert d.contract.q_len == (1, 8) and d.contract.batch == (0, 0) and d.contract.q_offset == (-3, 3)
    assert d.precision.storage() == {"q": "f32", "k": "f32", "v": "f32", "o": "f32", "bias": "f32"}
    assert Precision.stored("bf16").storage()["o"] == "bf16"
    assert d.replace(empty_rows="nan").empty_rows == "nan"
    with pytest.raises(DeclarationError):
        d.replace(features=["nope"])


def test_declare_attaches_the_declaration():
    d = Declaration(name="k")

    @declare(d)
    def attention(p):
        return None
    assert attention.declaration is d
    with pytest.raises(DeclarationError, match="not an attest_kernel.Declaration"):
        declare({"name": "k"})


def test_misspelt_feature_is_an_error_frame_at_hello(serve_kernel):
    served = serve_kernel("bad_declaration.py:attention")
    kind, payload = served.hello()
    assert kind == wire.ERROR
    message = wire.decode_string(payload)
    assert "cannot serve bad_declaration.py:attention: DeclarationError: features: unknown feature 'casual_mask'" \
        in message, message
    code, stderr = served.finish(bye=False)
    assert code == 2 and "casual_mask" in stderr


@pytest.mark.parametrize("spec, declaration, message", [
    ("no_such_module:attention", None, "ModuleNotFoundError"),
    ("kernels.py:nope", None, "has no attribute 'nope'"),
    ("kernels.py:exact", None, "has no declaration"),
    ("kernels.py:exact", "ALL", "is a list, not an attest_kernel.Declaration"),
])
def test_unservable_specs_are_error_frames(serve_kernel, spec, declaration, message):
    served = serve_kernel(spec, declaration=declaration)
    kind, payload = served.hello()
    assert kind == wire.ERROR and message in wire.decode_string(payload), wire.decode_string(payload)
    assert served.finish(bye=False)[0] == 2


def test_declaration_named_on_the_command_line(serve_kernel):
    served = serve_kernel("kernels.py:exact", declaration="kernels.py:reference.declaration")
    kind, payload = served.hello()
    assert kind == wire.DESCRIPTOR and wire.decode_descriptor(payload)["name"] == "test-reference"
    assert served.finish()[0] == 0


def test_version_names_the_protocol_and_abi_of_the_table():
    import subprocess
    import sys
    from attest_kernel import abi, wire
    out = subprocess.run([sys.executable, "-m", "attest_kernel", "--version"], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    assert "process protocol %d, C ABI %d.%d" % (wire.VERSION, abi.ABI_MAJOR, abi.ABI_MINOR) in out.stdout


def test_a_merge_function_declares_the_merge_bit():
    merging = Declaration(name="k", features=["lse"], merge=lambda o, lse: (o[0], lse[0]))
    assert merging.capabilities == abi.CAPABILITIES["lse"] | abi.CAPABILITIES["merge"]
    assert "merge" not in FEATURES


def test_a_packed_function_declares_the_packed_bit():
    varlen = Declaration(name="k", features=["lse"], packed=lambda p: (p.q, None))
    assert varlen.capabilities == abi.CAPABILITIES["lse"] | abi.CAPABILITIES["packed"]
    assert "packed" not in FEATURES


def test_int64_offsets_are_declared_with_the_packed_function():
    wide = Declaration(name="k", packed=lambda p: (p.q, None), packed_int64=True)
    assert wide.capabilities == abi.CAPABILITIES["packed"] | abi.CAPABILITIES["packed_int64"]
    assert "packed_int64" not in FEATURES
    with pytest.raises(ValueError, match="give Declaration\\(packed=...\\)"):
        Declaration(name="k", packed_int64=True)
    with pytest.raises(ValueError, match="packed_int64"):
        Declaration(name="k", features=["packed_int64"])

"""Declared paths (ABI 2.2 predicates, 2.7 key tiles, a path's own precision) from a Python
Declaration: checked when built, written as process_protocol.hpp reads them, and certified end to
end (ATTEST, the attest binary's path; those tests are skipped without it)."""
import json

import pytest

from attest_kernel import Declaration, DeclarationError, Path, Precision, wire
from test_end_to_end import ATTEST, certify

needs_attest = pytest.mark.skipif(not ATTEST, reason="set ATTEST to the attest binary to run attest end to end")


def test_declared_paths_travel_in_order_with_their_key_tiles():
    declaration = Declaration(name="paths", features=["causal", "gqa"], paths=[
        Path("split", batch=(1, 1), q_len=(1, 4), k_len=(512, None), required=["causal"], excluded=["gqa"]),
        Path("rest", head_dim_multiple=16, k_len_multiple=64, k_len_not_multiple=True, no_mask=True, key_tile=64,
             precision=Precision(p="bf16")),
        ("other", Precision(accumulator="bf16"))])
    d = wire.decode_descriptor(wire.encode_descriptor(declaration))
    split, rest = d["declared_paths"]
    assert split["name"] == "split" and split["batch"] == (1, 1) and split["k_len"] == (512, 1 << 40)
    assert split["required"] == ["causal"] and split["excluded"] == ["gqa"] and split["heads"] == (0, 0)
    assert rest["head_dim_multiple"] == 16 and rest["k_len_multiple"] == 64 and rest["k_len_not_multiple"] == 1
    assert rest["no_mask"] == 1 and rest["required"] == [] and d["declared_key_tiles"] == [0, 64]
    # ABI 2.1's list: the paths that round elsewhere, declared or not.
    rounding = [(name, p["p"], p["accumulator"]) for name, p in d["paths"]]
    assert rounding == [("rest", "bf16", "f32"), ("other", "f32", "bf16")]


def test_no_key_tile_writes_no_2_7_section():
    plain = wire.encode_descriptor(Declaration(name="paths", paths=[Path("all")]))
    assert "declared_key_tiles" not in wire.decode_descriptor(plain)


@pytest.mark.parametrize("make, message", [
    (lambda: Path("x" * 32), "1 to 31 printable bytes"),
    (lambda: Path("p", k_len=(9, 4)), "path 'p'.k_len: min 9 is larger than max 4"),
    (lambda: Path("p", q_len=(-1, 4)), "path 'p'.q_len min"),
    (lambda: Path("p", head_dim_multiple=-16), "path 'p'.head_dim_multiple"),
    (lambda: Path("p", key_tile=5000), "path 'p'.key_tile"),
    (lambda: Path("p", k_len_multiple=1, k_len_not_multiple=True), "Tk % 1 != 0 takes no problem"),
    (lambda: Path("p", required=["casual"]), "path 'p'.required: unknown feature 'casual'"),
    (lambda: Path("p", required=["causal"], excluded=["causal"]), "causal both required and excluded"),
    (lambda: Path("p", required=["window"], no_mask=True), "requires a mask term and no_mask"),
    (lambda: Declaration(name="k", paths=[Path("p", precision=Precision(o="bf16"))]), "never storage"),
    (lambda: Declaration(name="k", paths=[Path("p"), ("p", Precision())]), "path 'p' declared twice"),
    (lambda: Declaration(name="k", paths=[Path("p", precision="bf16")]), "not an attest_kernel.Precision"),
])
def test_bad_paths_refused(make, message):
    with pytest.raises(DeclarationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def declared_paths_of(certificate):
    """The certificate's declared_paths (where the kernel's declaration is recorded)."""
    def find(x):
        if isinstance(x, dict):
            if "declared_paths" in x:
                return x["declared_paths"]
            x = list(x.values())
        for item in x if isinstance(x, list) else []:
            found = find(item)
            if found is not None:
                return found
        return None
    return find(json.loads(certificate.read_text()))


@needs_attest
def test_two_honest_paths_are_certified(tmp_path):
    certificate = tmp_path / "certificate.json"
    run = certify("path_kernels.py:paths", tmp_path, "--json", str(certificate))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "CERTIFIED two-paths" in run.stdout and "NOT CERTIFIED" not in run.stdout
    summaries = [p["summary"] for p in declared_paths_of(certificate)]
    assert summaries == ["short: Tk <= 64 (key tile 16)", "long: Tk >= 65"], summaries


@needs_attest
def test_a_path_rounding_more_than_declared_is_not_certified_naming_it(tmp_path):
    run = certify("path_kernels.py:long_undeclared_bf16", tmp_path, "--no-shrink")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "NOT CERTIFIED long-undeclared-bf16" in run.stdout
    assert "[path: long]" in run.stdout and "[path: short]" not in run.stdout, run.stdout[-3000:]


@needs_attest
def test_a_call_served_by_another_path_than_declared_is_not_certified(tmp_path):
    run = certify("path_kernels.py:short_past_64", tmp_path, "--no-shrink")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "served by path short, but the kernel declares that long takes this problem" in run.stdout, \
        run.stdout[-3000:]

"""PyTorch 1.13's CPU attention (python/examples/torch_attention.py) certified by attest at the quick
budget: each kernel's verdict is the one recorded in ci/results/torch_certificates/README.md
(CERTIFIED, or NOT CERTIFIED by the named checks: the findings about torch). Skipped without torch
or without ATTEST (the attest binary's path).

16 attest runs of 3 to 8 s each, mostly the kernel process importing torch; they run as many at a
time as there are cores (on a loaded 2-core machine that saves little: about 65 s in all). Kernels
expected to fail run with --no-shrink (the verdict is the same; the shrunk counterexamples are in the
README)."""
import concurrent.futures
import importlib.util
import os
import re
import subprocess
import time

import pytest

from conftest import PYTHON, PYTHON_DIR, TESTS, env_with_package

ATTEST = os.environ.get("ATTEST")
HAVE_TORCH = importlib.util.find_spec("torch") is not None  # the kernels import it, not this process

pytestmark = [pytest.mark.skipif(not HAVE_TORCH, reason="torch is not importable (apt-get install python3-torch)"),
              pytest.mark.skipif(not ATTEST, reason="set ATTEST to the attest binary to run attest end to end")]

EXAMPLE = os.path.join(PYTHON_DIR, "examples", "torch_attention.py")

# kernel -> (checks that must fail, checks that may fail) at quick, --no-size-stages, seed 1, as
# recorded on this machine (x86-64 with AVX512-BF16); (set(), set()): CERTIFIED. "may" holds the
# checks that fail here through the bf16 subnormal flush (oneDNN's AVX512-BF16 GEMM), which another
# CPU may not do.
LEAK = {"masked_inputs_have_no_influence"}
EVERY_CHECK_WITH_POISON = {"matches_reference", "precision_gate", "rows_sum_to_one", "zero_masked_weight",
                           "masked_inputs_have_no_influence", "empty_row_policy", "output_in_convex_hull",
                           "slices_are_independent", "overflow_safe", "deterministic_and_in_bounds"}
# oneDNN's bf16 GEMM flushes subnormal bf16 values to zero: which checks draw one depends on the draw.
BF16_FLUSH = EVERY_CHECK_WITH_POISON
EXPECTED = {
    # F.multi_head_attention_forward: a NaN / inf in a masked key reaches the row (additive -inf mask);
    # with finite inputs, a masked score that overflows to +inf does (-inf + inf = NaN).
    # Which other checks draw a poisoned masked key depends on the draw: any of them may show the leak.
    "mha_forward": (LEAK, EVERY_CHECK_WITH_POISON),
    "mha_forward_finite": (LEAK, LEAK),
    # float attn_mask + float key_padding_mask: the padding is dropped (masked_fill with a float mask).
    "mha_forward_float_mask": ({"golden", "grid", "matches_reference", "empty_row_policy",
                                "bias_minus_inf_equals_mask"},
                               EVERY_CHECK_WITH_POISON | {"golden", "grid", "bias_minus_inf_equals_mask"}),
    "mha_forward_float_mask_bool_padding_finite": (LEAK, LEAK),
    "mha_forward_bf16": (LEAK, EVERY_CHECK_WITH_POISON),
    "mha_forward_bf16_finite": (LEAK, BF16_FLUSH),
    # nn.MultiheadAttention's fast path (masked_softmax): certified for finite inputs in f32; in bf16 the
    # GEMM flushes subnormal bf16 values to zero (here caught by a masked-key check's clean run).
    "mha_module_fast": (set(), set()),
    "mha_module_fast_bf16": (set(), BF16_FLUSH),
    # the fast path's op with distinct q, k, v: a NaN / inf in a masked V row reaches the output.
    "native_mha": (LEAK, LEAK),
    "native_mha_finite": (set(), set()),
    # _scaled_dot_product_attention: the same leaks as multi_head_attention_forward.
    "sdpa": (LEAK, EVERY_CHECK_WITH_POISON),
    "sdpa_finite": (LEAK, LEAK),
    "sdpa_float_mask_finite": (LEAK, LEAK),
    "sdpa_bf16": (LEAK, EVERY_CHECK_WITH_POISON),
    "sdpa_bf16_finite": (LEAK, BF16_FLUSH),
    # declared with an f32 accumulator: bf16 accumulation shows (V = 1: the weights sum to 0.984).
    "sdpa_bf16_f32_accumulator_finite": (LEAK | {"rows_sum_to_one"}, BF16_FLUSH),
}


def certify(kernel, out):
    cmd = [ATTEST, "certify", "--kernel-cmd", "%s -m attest_kernel serve %s:%s" % (PYTHON, EXAMPLE, kernel),
           "--budget", "quick", "--no-size-stages", "--seed", "1", "--out", str(out)]
    if EXPECTED[kernel][1]:
        cmd.append("--no-shrink")
    started = time.monotonic()
    run = subprocess.run(cmd, cwd=TESTS, env=env_with_package(), capture_output=True, text=True, timeout=600)
    return run, time.monotonic() - started


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every kernel's attest run, started together (as many at a time as there are cores)."""
    root = tmp_path_factory.mktemp("torch")
    workers = max(2, os.cpu_count() or 2)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {kernel: pool.submit(certify, kernel, root / kernel) for kernel in EXPECTED}
        return {kernel: future.result() for kernel, future in futures.items()}


def failed_checks(stdout):
    """The failed checks the verdict line names: 'NOT CERTIFIED name: failed: a, b; insufficient evidence: c'."""
    match = re.search(r"^NOT CERTIFIED \S+: failed: ([^;\n]*)", stdout, re.M)
    return set() if not match else {name.strip() for name in match.group(1).split(",")}


@pytest.mark.parametrize("kernel", sorted(EXPECTED))
def test_verdict_as_recorded(runs, kernel):
    run, seconds = runs[kernel]
    output = run.stdout[-4000:] + run.stderr[-2000:]
    print("%s: exit %d in %.1f s" % (kernel, run.returncode, seconds))
    must, may = EXPECTED[kernel]
    failed = failed_checks(run.stdout)
    assert must <= failed <= may, "failed: %s; expected at least %s and at most %s\n%s" % (
        sorted(failed), sorted(must), sorted(may), output)
    if failed:
        assert run.returncode == 1 and re.search(r"^NOT CERTIFIED ", run.stdout, re.M), output
    else:
        assert run.returncode == 0 and re.search(r"^CERTIFIED ", run.stdout, re.M), output
        assert "NOT CERTIFIED" not in run.stdout, output


def test_a_torch_autograd_backward_is_certified(tmp_path):
    """torch.autograd.grad of a torch attention, served as the kernel's backward."""
    from test_end_to_end import ATTEST, certify
    if not ATTEST:
        pytest.skip("set ATTEST to the attest binary to run attest end to end")
    run = certify("training_kernels.py:torch_training", tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "CERTIFIED torch-autograd for " in run.stdout and ", backward;" in run.stdout

"""attest itself certifying kernels served by the package. Needs ATTEST (the attest binary's path);
skipped without it."""
import os
import subprocess
import time

import pytest

from conftest import PYTHON, PYTHON_DIR, TESTS, env_with_package

ATTEST = os.environ.get("ATTEST")
pytestmark = pytest.mark.skipif(not ATTEST, reason="set ATTEST to the attest binary to run attest end to end")


def certify(spec, out, *extra, timeout=600, size_stages=False):
    cmd = [ATTEST, "certify", "--kernel-cmd", "%s -m attest_kernel serve %s" % (PYTHON, spec), "--budget", "quick",
           "--seed", "1", "--out", str(out)] + ([] if size_stages else ["--no-size-stages"]) + list(extra)
    started = time.monotonic()
    run = subprocess.run(cmd, cwd=TESTS, env=env_with_package(), capture_output=True, text=True, timeout=timeout)
    print("%s: exit %d in %.1f s" % (" ".join(cmd), run.returncode, time.monotonic() - started))
    return run


def test_the_15_line_example_is_certified(tmp_path):
    example = os.path.join(PYTHON_DIR, "examples", "causal_gqa.py")
    run = certify(example + ":attention", tmp_path)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "CERTIFIED numpy-causal-gqa for causal, key_padding, gqa, lse" in output, output
    assert "NOT CERTIFIED" not in output


def test_a_misspelt_feature_stops_attest_with_the_message(tmp_path):
    run = certify("bad_declaration.py:attention", tmp_path, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "unknown feature 'casual_mask'" in run.stderr.split("attest: ", 1)[-1]


def test_an_exception_fails_the_checks_with_its_message(tmp_path):
    certificate = tmp_path / "certificate.json"
    run = certify("kernels.py:raises", tmp_path, "--no-shrink", "--json", str(certificate), timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "NOT CERTIFIED test-raises" in run.stdout
    assert "kernel returned status 3: ValueError: the kernel broke on purpose" in certificate.read_text()


def test_a_decode_session_is_certified(tmp_path):
    run = certify("kernels.py:decoder", tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "CERTIFIED test-decoder for causal, gqa, lse, decode" in run.stdout


def test_a_kernel_that_prints_is_certified(tmp_path):
    run = certify("kernels.py:prints", tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "CERTIFIED test-prints" in run.stdout and "hello from the kernel" in run.stderr

"""attest_kernel.testing: assert_certified and the attest_certify fixture, against attest itself.
The end-to-end tests need ATTEST (the attest binary's path) and are skipped without it; the rest check
how a kernel is named to attest and how a missing attest is reported."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from attest_kernel import Contract, Declaration, declare
from attest_kernel.testing import (AttestError, assert_certified, certify, find_attest, kernel_argument,
                                   serve_command)

ATTEST = os.path.abspath(os.environ["ATTEST"]) if os.environ.get("ATTEST") else None
TESTS = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(TESTS)  # not from conftest: the inner suite below has a conftest of its own
needs_attest = pytest.mark.skipif(not ATTEST, reason="set ATTEST to the attest binary to run attest end to end")
PLUGIN = os.path.join(os.path.dirname(os.path.abspath(ATTEST or ".")), "examples", "libexample_attention.so")


def _attention(p, visible):
    q, k, v = (x.astype(np.float64) for x in (p.q, p.k, p.v))
    s = np.where(visible[:, None], p.scale * q @ k.swapaxes(-1, -2), -np.inf)
    m = np.maximum(s.max(axis=-1, keepdims=True), -1e300)  # finite even on an empty row
    w = np.exp(s - m)
    total = w.sum(axis=-1, keepdims=True)
    return w @ np.nan_to_num(v) / np.maximum(total, 1e-300), np.log(total[..., 0]) + m[..., 0]


@declare(Declaration(name="pytest-causal", features=["causal", "lse"]))
def causal(p):
    return _attention(p, p.visible())


@declare(Declaration(name="pytest-causal-off-by-one", features=["causal", "lse"]))
def causal_off_by_one(p):
    qpos, kpos = p.q_positions()[:, None], p.k_positions()[None, :]
    visible = kpos <= qpos + 1 if p.causal else np.ones((p.q_len, p.k_len), dtype=bool)  # sees one key too many
    return _attention(p, np.repeat(visible[None], p.batch, axis=0))


@declare(Declaration(name="pytest-causal-long-bug", features=["causal", "lse"], contract=Contract(k_len=(1, 512))))
def causal_wrong_past_200(p):
    o, lse = _attention(p, p.visible())
    return (o + 1e-3 if p.k_len > 200 else o), lse  # wrong only for Tk > 200, inside its contract


@declare(Declaration(name="pytest-hangs-past-600", features=["causal", "lse"], contract=Contract(k_len=(1, 1024))))
def hangs_past_600(p):
    while p.k_len > 600:  # a hang on calls of microseconds of work, inside its contract
        time.sleep(0.05)  # asleep, not spinning: the hang costs the machine nothing while attest waits it out
    return _attention(p, p.visible())


def undeclared(p):
    raise AssertionError("never called")


# How a kernel is named to attest, and a missing attest: no attest needed.

def test_a_function_is_served_by_file_and_name():
    option, command = kernel_argument(causal)
    assert option == "--kernel-cmd"
    assert command.endswith("-m attest_kernel serve %s:causal" % os.path.abspath(__file__))
    assert sys.executable in command


def test_the_command_sets_pythonpath_only_when_the_package_is_not_on_it(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", PYTHON_DIR)
    assert not serve_command(causal).startswith("env ")
    monkeypatch.delenv("PYTHONPATH")
    assert serve_command(causal).startswith("env PYTHONPATH=%s " % PYTHON_DIR)


def test_strings_are_commands_and_so_paths_plugins():
    assert kernel_argument("./server --fast") == ("--kernel-cmd", "./server --fast")
    assert kernel_argument("cmd:./server") == ("--kernel-cmd", "./server")
    assert kernel_argument("build/libk.so") == ("--kernel", os.path.abspath("build/libk.so"))


def test_a_function_attest_cannot_import_is_refused():
    with pytest.raises(TypeError, match="carries no declaration"):
        kernel_argument(undeclared)

    @declare(Declaration(name="local"))
    def local(p):
        pass
    with pytest.raises(TypeError, match="not a module-level function"):
        kernel_argument(local)


def test_no_attest_names_the_three_places(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTEST", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AttestError) as error:
        certify("./server")
    assert all(where in str(error.value) for where in ("attest=PATH", "ATTEST", "PATH"))
    with pytest.raises(AttestError, match="the attest argument names '/nonexistent/attest'"):
        find_attest("/nonexistent/attest")


def fake_attest(tmp_path, script):
    """An executable standing in for attest: `script` is sh; $OUT and $JSON are its --out and --json."""
    path = tmp_path / "attest"
    path.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in --out) OUT=$2;; --json) JSON=$2;; esac; shift; done\n"
                    + script)
    path.chmod(0o755)
    return str(path)


def test_attest_failing_to_judge_raises(tmp_path):
    crash = fake_attest(tmp_path, "echo 'attest: something broke' >&2; exit 3\n")
    with pytest.raises(AttestError, match="exit 3.*attest: something broke"):
        assert_certified("./server", attest=crash, out_dir=tmp_path / "out")
    silent = fake_attest(tmp_path, "exit 0\n")
    with pytest.raises(AttestError, match="without a readable certificate"):
        assert_certified("./server", attest=silent, out_dir=tmp_path / "out")


def test_exit_0_with_an_uncertified_certificate_is_not_a_pass(tmp_path):
    certificate = ('{"certified": false, "kernels": [{"name": "k", "checks": [{"check": "grid", '
                   '"stage": "deterministic", "verdict": "insufficient", "cases": 3, "effective_cases": 1, '
                   '"floor": 2, "skipped": {"masked": 2}}]}]}')
    attest = fake_attest(tmp_path, "echo '%s' > $JSON; echo 'NOT CERTIFIED k: insufficient evidence: grid'\n"
                         % certificate)
    with pytest.raises(AssertionError) as error:
        assert_certified("./server", attest=attest, out_dir=tmp_path / "out")
    assert str(error.value).splitlines()[:2] == [
        "NOT CERTIFIED k: insufficient evidence: grid",
        "  INSUFFICIENT grid (deterministic): 1 of 3 cases exercised it (at least 2 needed); the others: 2 x masked"]


# attest itself.

@needs_attest
def test_a_correct_kernel_is_certified():
    result = assert_certified(causal)
    assert result.certified and result.verdict.startswith("CERTIFIED pytest-causal for causal, lse")
    assert not result.failures and not result.replay_commands
    assert {"golden", "grid", "matches_reference"} <= {c.name for c in result.checks if c.verdict == "pass"}
    # As strict as the command line: the size stages ran (a kernel wrong only at length is caught).
    assert "--no-size-stages" not in result.command and "CERTIFIED" in result.report
    assert "no size stages" not in result.verdict
    assert any(c.stage == "long" and c.verdict == "pass" for c in result.checks)


@needs_attest
def test_a_kernel_wrong_only_at_length_fails_at_the_default(tmp_path):
    # The command line at quick catches it in the size stages; so does assert_certified by default.
    with pytest.raises(AssertionError) as error:
        assert_certified(causal_wrong_past_200, out_dir=tmp_path)
    assert error.value.result.verdict.startswith("NOT CERTIFIED pytest-causal-long-bug")
    weakened = certify(causal_wrong_past_200, size_stages=False, out_dir=tmp_path / "weak")
    assert "--no-size-stages" in weakened.command
    assert not weakened.certified or "no size stages: checked to Tk = " in weakened.verdict


@needs_attest
@pytest.mark.parametrize("long_seconds", ["3600", "0.01"])
def test_a_hang_on_a_tiny_call_is_a_hang_whatever_the_budget(tmp_path, long_seconds):
    # Its small calls answer too fast to time, so the long stage has no prediction for a 1 x 1024
    # call: the stage's time budget once cut it as "still computing", or (on a busy machine) was
    # spent before it, and the kernel was CERTIFIED "long: to T = 512 (time budget)". The call
    # costs less than the 512 x 512 case the stage must run anyway, so no budget drops or cuts it:
    # with an hour or with a budget spent at once, only the 20 s call limit ends it. About 50 s on a
    # quiet machine; the limit only bounds a hang of attest's own: a busy CI run with three tests per
    # two cores and two CPU hogs beside took 213 s for one variant and more than 400 s for the other.
    result = certify(hangs_past_600, out_dir=tmp_path,
                     extra_args=["--timeout", "20", "--long-seconds", long_seconds], timeout=900)
    assert not result.certified, result.verdict
    assert "did not answer within" in result.report, result.report


@needs_attest
def test_an_off_by_one_fails_with_the_checks_and_their_replay_commands(tmp_path):
    with pytest.raises(AssertionError) as error:
        assert_certified(causal_off_by_one, out_dir=tmp_path)
    message, result = str(error.value), error.value.result
    assert message.startswith("NOT CERTIFIED pytest-causal-off-by-one: failed: golden, grid, sizes, sampled_rows, "
                              "matches_reference")
    assert "FAIL grid (deterministic): tq1_tk17_causal_top_left" in message
    assert "FAIL matches_reference (property)" in message
    assert "%s replay " % ATTEST in message and "--kernel-cmd" in message
    assert {c.name for c in result.failures} >= {"golden", "grid", "matches_reference"}
    assert all(c.explanation and c.counterexample for c in result.failures)
    assert len(result.replay_commands) == len({c.counterexample for c in result.failures})
    # The replay command runs as printed: the counterexample fails again.
    replay = subprocess.run(result.replay[result.failures[0].counterexample], shell=True, capture_output=True,
                            text=True, timeout=120)
    assert replay.returncode == 1 and "FAIL" in replay.stdout, replay.stdout + replay.stderr


@needs_attest
def test_a_declaration_attest_refuses_raises_its_message(tmp_path):
    module = tmp_path / "misspelt.py"
    module.write_text(textwrap.dedent("""\
        from attest_kernel import Contract, Declaration, declare

        @declare(Declaration(name="misspelt", features=["causal", "casual_mask"]))
        def attention(p):
            raise AssertionError("never called")
        """))
    with pytest.raises(AttestError, match=r"exit 2\).*unknown feature 'casual_mask'"):
        assert_certified(serve_command("%s:attention" % module))


@needs_attest
@pytest.mark.skipif(bool(ATTEST) and not os.path.exists(PLUGIN), reason="no example plugin next to attest")
def test_a_plugin_is_certified():
    result = assert_certified(PLUGIN)
    assert result.verdict.startswith("CERTIFIED example-c for causal")
    assert result.command[2:4] == ["--kernel", PLUGIN]


@needs_attest
def test_the_fixture_through_pytest_plugins(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["attest_kernel.testing"]\n')
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""\
        from test_testing import causal, causal_off_by_one

        def test_passes(attest_certify):
            assert attest_certify(causal).certified

        def test_fails(attest_certify):
            attest_certify(causal_off_by_one, extra_args=["--no-shrink"])
        """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYTHON_DIR, TESTS]))
    del env["ATTEST"]  # named by the plugin's --attest option instead
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--attest=" + ATTEST,
                          "--basetemp", str(tmp_path / "tmp"), str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 1 and "1 failed, 1 passed" in output, output
    assert "NOT CERTIFIED pytest-causal-off-by-one" in output and "attest replay" in output, output
    assert "stage          check" in output, output  # attest's table, in the failing test's captured stdout
    counterexamples = tmp_path / "tmp" / "test_fails0" / "attest-1" / "counterexamples"
    assert any(counterexamples.iterdir())

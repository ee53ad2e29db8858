#!/usr/bin/env python3
"""Command-line tests of `attest certify` with external kernels, run by ctest one case at a time:
    cli_test.py ATTEST EXAMPLES_DIR SOURCE_DIR CASE
Each case runs attest as a user would and checks the exit code and what it printed."""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ATTEST, EXAMPLES, SOURCE, CASE = sys.argv[1:5]
PYTHON_KERNEL = "/usr/bin/python3 " + os.path.join(SOURCE, "ci/examples/process_python/numpy_kernel.py")
WORK = tempfile.mkdtemp(prefix="attest-cli-")


def plugin(name):
    return os.path.join(EXAMPLES, "lib%s.so" % name)


def certify(*args, expect):
    cmd = [ATTEST, "certify", "--seed", "11", "--out", WORK] + list(args)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    if run.returncode < 0:
        sys.exit("attest itself died with signal %d:\n%s" % (-run.returncode, output))
    if run.returncode != expect:
        sys.exit("exit %d, expected %d: %s\n%s" % (run.returncode, expect, " ".join(cmd), output))
    return output


def require(text, *needles):
    for needle in needles:
        if needle not in text:
            sys.exit("expected %r in:\n%s" % (needle, text))


def replay_all(kernel, expect):
    """Replays saved counterexamples with the plugin named again (a file never names code to run)."""
    folder = os.path.join(WORK, "counterexamples")
    files = sorted(os.listdir(folder))
    if not files:
        sys.exit("no counterexample saved")
    for name in files[:3]:
        run = subprocess.run([ATTEST, "replay", "--timeout", "2", "--kernel", kernel, os.path.join(folder, name)],
                             capture_output=True, text=True, timeout=120)
        if run.returncode != expect:
            sys.exit("replay %s exited %d, expected %d\n%s%s" % (name, run.returncode, expect, run.stdout, run.stderr))


def case_plugin():
    require(certify("--kernel", plugin("example_attention"), "--budget", "40", expect=0), "CERTIFIED")


def case_process_cpp():
    require(certify("--kernel-cmd", os.path.join(EXAMPLES, "example_process_kernel"), "--budget", "40", expect=0),
            "CERTIFIED")


def case_process_python():
    require(certify("--kernel-cmd", PYTHON_KERNEL, "--budget", "40", expect=0), "CERTIFIED")


def case_segfault():
    out = certify("--kernel", plugin("broken_segfault"), "--budget", "quick", expect=1)
    # SIGSEGV; a plugin built with UBSan stops itself instead (exit code 1).
    require(out, "kernel failure: kernel process ", "NOT CERTIFIED")
    if "crashed with signal 11" not in out and "exited with code" not in out:
        sys.exit("the crash was not reported:\n" + out)
    replay_all(plugin("broken_segfault"), expect=1)


def case_hang():
    out = certify("--kernel", plugin("broken_hang"), "--budget", "quick", "--timeout", "1", expect=1)
    require(out, "did not answer within 1 s", "NOT CERTIFIED")


def case_write_past():
    require(certify("--kernel", plugin("broken_write_past"), "--budget", "quick", expect=1),
            "write outside O at byte offset")


def case_no_write():
    # Outputs arrive pre-filled with NaN: a kernel that never writes them returns NaN.
    require(certify("--kernel", plugin("broken_no_write"), "--budget", "quick", expect=1), "got NaN (never written)")
    replay_all(plugin("broken_no_write"), expect=1)


def case_abi_version():
    require(certify("--kernel", plugin("broken_abi_version"), expect=2), "kernel ABI version 3, this attest speaks versions 1 and 2")


def case_missing_plugin():
    require(certify("--kernel", os.path.join(WORK, "nope.so"), expect=2), "no such file")


def case_missing_symbol():
    # A shared library that is not a kernel: no attest_kernel_entry.
    require(certify("--kernel", "/usr/lib/x86_64-linux-gnu/libm.so.6", expect=2), "does not export attest_kernel_entry")


def case_malformed_protocol():
    # Garbage on the protocol's descriptor is a malformed message; on stdout it never reaches the protocol.
    require(certify("--kernel-cmd", "echo this is not the protocol >&4", expect=2), "malformed protocol message")
    require(certify("--kernel-cmd", "echo this is not the protocol", expect=2), "before describing itself")


def case_json_schema():
    import jsonschema
    path, junit = os.path.join(WORK, "cert.json"), os.path.join(WORK, "cert.xml")
    certify("--kernel", "tiled", "--kernel", plugin("broken_no_write"), "--budget", "quick",
            "--json", path, "--junit", junit, expect=1)
    schema = json.load(open(os.path.join(SOURCE, "ci/schema/certificate.schema.json")))
    document = json.load(open(path))
    jsonschema.validate(document, schema)
    if document["certified"] or not document["kernels"][0]["certified"]:
        sys.exit("certified flags are wrong")
    suites = ET.parse(junit).getroot().findall("testsuite")
    if len(suites) != 2 or int(suites[1].get("failures")) == 0:
        sys.exit("JUnit report does not show the failing kernel")


def case_baseline():
    baseline = os.path.join(WORK, "baseline.json")
    certify("--kernel", plugin("example_attention"), "--budget", "quick", "--json", baseline, expect=0)
    require(certify("--kernel", plugin("example_attention"), "--budget", "quick", "--baseline", baseline, expect=0),
            "no regression")
    # The same kernel name, now broken: every check that passed fails.
    out = certify("--kernel", plugin("broken_no_write"), "--budget", "quick", "--baseline", baseline, expect=1)
    require(out, "REGRESSION example-c golden: passed in the baseline, fails now")
    # A baseline whose error was far smaller: utilisation growth beyond the factor is a regression.
    doc = json.load(open(baseline))
    for check in doc["kernels"][0]["checks"]:
        if check["check"] == "grid":
            check["worst_utilisation"] = 0.001
    json.dump(doc, open(baseline, "w"))
    out = certify("--kernel", plugin("example_attention"), "--budget", "quick", "--baseline", baseline, expect=1)
    require(out, "REGRESSION example-c grid: worst err/bound grew from 0.001")


def case_fuzz_stage():
    # The optional fuzz stage runs on a plugin (in a child process) and finds a mutant's leak.
    out = certify("--kernel", plugin("example_attention"), "--budget", "0", "--fuzz-seconds", "2", expect=0)
    require(out, "fuzz_differential", "CERTIFIED")
    out = certify("--kernel", "mutant:masked_value_times_zero", "--budget", "0", "--fuzz-seconds", "10", expect=1)
    require(out, "FAIL mutant:masked_value_times_zero fuzz_mask_leak")


def case_gate():
    gate = os.path.join(SOURCE, "ci/gate.sh")
    env = dict(os.environ, ATTEST=ATTEST, ATTEST_BUDGET="quick")
    first = subprocess.run(["bash", gate, "--kernel", plugin("example_attention")], cwd=WORK, env=env,
                           capture_output=True, text=True, timeout=600)
    require(first.stdout, "attest gate: certified")
    baseline = os.path.join(WORK, "baseline.json")
    os.rename(os.path.join(WORK, "attest-artifacts/certificate.json"), baseline)
    second = subprocess.run(["bash", gate, "--kernel", plugin("broken_no_write"), baseline], cwd=WORK, env=env,
                            capture_output=True, text=True, timeout=600)
    if second.returncode != 1:
        sys.exit("gate on a regressed kernel exited %d\n%s" % (second.returncode, second.stdout))
    require(second.stdout, "REGRESSION", "attest gate: NOT certified")
    for artifact in ("certificate.json", "junit.xml", "counterexamples"):
        if not os.path.exists(os.path.join(WORK, "attest-artifacts", artifact)):
            sys.exit("gate did not keep " + artifact)


globals()["case_" + CASE]()
print("ok:", CASE)

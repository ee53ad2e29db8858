#!/usr/bin/env python3
"""Command-line tests of `attest certify` with external kernels, run by ctest one case at a time:
    cli_test.py ATTEST EXAMPLES_DIR SOURCE_DIR CASE
Each case runs attest as a user would and checks the exit code and what it printed."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ATTEST, EXAMPLES, SOURCE, CASE = sys.argv[1:5]
PYTHON_KERNEL = "/usr/bin/python3 " + os.path.join(SOURCE, "ci/examples/process_python/numpy_kernel.py")
WORK = tempfile.mkdtemp(prefix="attest-cli-")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)  # nothing left in /tmp


def plugin(name):
    return os.path.join(EXAMPLES, "lib%s.so" % name)


# Under the sanitizers (ATTEST_SANITIZED, set by CMake for the asan build) a run at the default
# budget or at 20 cases or more is made at quick: the same code paths under ASan and UBSan in a
# fraction of the time. The release pass checks every case at the budget it names.
SANITIZED = bool(os.environ.get("ATTEST_SANITIZED"))


# What these tests check is the properties' verdicts; the long stage (to T = 32768 within its time
# budget) is long_stage_test.py's. Unless a test says otherwise, lengths stop at 1024 with no time
# budget: the same verdict on a busy machine, in half the time.
SHORT = ["--max-len", "1024", "--long-seconds", "0"]


def at_sanitizer_budget(args):
    args = list(args)
    if not SANITIZED:
        return args
    if "--budget" not in args:
        return args + ["--budget", "quick"]
    where = args.index("--budget") + 1
    if args[where] == "default" or (args[where].isdigit() and int(args[where]) >= 20):
        args[where] = "quick"
    return args


def certify(*args, expect):
    lengths = [] if {"--max-len", "--long-seconds", "--lengths"} & set(args) else SHORT
    cmd = [ATTEST, "certify", "--seed", "11", "--out", WORK] + at_sanitizer_budget(args) + lengths
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
        run = subprocess.run([ATTEST, "replay", "--timeout", "30", "--kernel", kernel, os.path.join(folder, name)],
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
    require(certify("--kernel", plugin("broken_abi_version"), expect=2),
            "kernel ABI version 3, this attest speaks versions 1 and 2")


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


def verdict_line(output, name):
    """The per-kernel verdict line: `CERTIFIED NAME for ...` or `NOT CERTIFIED NAME: ...`."""
    for line in output.splitlines():
        if line.startswith(("CERTIFIED %s " % name, "NOT CERTIFIED %s:" % name)):
            return line
    sys.exit("no verdict line for %s in:\n%s" % (name, output))


def checks_of(path):
    document = json.load(open(path))
    return document, {check["check"]: check for check in document["kernels"][0]["checks"]}


def certified_at_default(library, name):
    """Certifies lib<library>.so at the default budget, which must say CERTIFIED: its verdict line,
    certificate and checks."""
    path = os.path.join(WORK, library + ".json")
    out = certify("--kernel", plugin(library), "--budget", "default", "--json", path, expect=0)
    if "\nCERTIFIED\n" not in out:  # stdout's last line (stderr's progress follows it in `out`)
        sys.exit("no CERTIFIED line:\n" + out)
    return (verdict_line(out, name),) + checks_of(path)


def saved_problems():
    folder = os.path.join(WORK, "counterexamples")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    return [(name, json.load(open(os.path.join(folder, name)))) for name in names]


def case_narrow_scope():
    # The same kernel declaring only LSE + GQA: certified, but for less, and the verdict says so.
    narrow_json = os.path.join(WORK, "narrow.json")
    full = verdict_line(certify("--kernel", plugin("example_attention"), "--budget", "quick", expect=0), "example-c")
    narrow = verdict_line(certify("--kernel", plugin("narrow_attention"), "--budget", "quick", "--json", narrow_json,
                                  expect=0), "example-c")
    if narrow == full:
        sys.exit("the narrow kernel's verdict line is the full one's: " + narrow)
    require(narrow, "CERTIFIED example-c for gqa, lse (contract: Dk in [1, 256], Tq in [1, 4096], Tk in [1, 4096]); "
            "not covered: ")
    for feature in ("causal", "window", "rope", "explicit_mask"):
        require(narrow.split("not covered:")[1], feature)
    # No check passes on nothing; the mask and GQA checks pass only with cases that exercised them.
    _, checks = checks_of(narrow_json)
    for name, check in checks.items():
        if check["verdict"] == "pass" and check["effective_cases"] == 0:
            sys.exit("%s passes with no effective case" % name)
    if checks["masked_inputs_have_no_influence"]["verdict"] == "pass":
        sys.exit("masked_inputs_have_no_influence passes for a kernel that declares no mask term")
    gqa = checks["gqa_matches_repeated_heads"]
    if gqa["verdict"] == "pass" and gqa["effective_cases"] == 0:
        sys.exit("gqa_matches_repeated_heads passes without an effective case")
    # A job that needs causal attention refuses this certificate.
    out = certify("--kernel", plugin("narrow_attention"), "--budget", "quick", "--require", "causal", expect=1)
    require(out, "required but not covered: causal", "NOT CERTIFIED")


def case_narrow_vs_full_baseline():
    # Re-certifying under the same name with fewer capabilities is a regression, claim by claim.
    full = os.path.join(WORK, "full.json")
    certify("--kernel", plugin("example_attention"), "--budget", "quick", "--json", full, expect=0)
    out = certify("--kernel", plugin("narrow_attention"), "--budget", "quick", "--baseline", full, expect=1)
    require(out, "REGRESSION example-c: no longer declares causal", "REGRESSION example-c: no longer declares rope",
            "REGRESSION example-c masked_inputs_have_no_influence: passed in the baseline, not covered now")


def case_contract_loop():
    # The llama2.c-style loop certifies as it is, inside its contract (Dk == Dv, default scale,
    # causal only). The kernel answers UNSUPPORTED outside it, so any problem attest sent beyond
    # the contract would show here as a failure.
    verdict, document, checks = certified_at_default("causal_loop_attention", "causal-loop")
    require(verdict, "CERTIFIED causal-loop for causal, gqa",
            "(contract: Dk == Dv, default scale, causal only)")
    contract = document["kernels"][0]["descriptor"]["contract"]
    for flag in ("dk_equals_dv", "default_scale_only", "causal_required"):
        if contract[flag] is not True:
            sys.exit("the certificate does not record %s: %s" % (flag, contract))
    permutation = checks["permutation_equivariance"]
    if permutation["verdict"] != "not covered" or "causal" not in permutation.get("not_covered", ""):
        sys.exit("permutation_equivariance is not 'not covered' for a causal reason: %s" % permutation)
    failed = [name for name, check in checks.items() if check["failures"] or check["verdict"] == "fail"]
    if failed or saved_problems():
        sys.exit("failures %s, saved problems %s" % (failed, [name for name, _ in saved_problems()]))


def case_decode_only():
    # No forward: decode is certified alone, and every forward-only check says why it did not run.
    path = os.path.join(WORK, "decode.json")
    out = certify("--kernel", plugin("decode_only_attention"), "--budget", "default", "--json", path, expect=0)
    require(verdict_line(out, "decode-only"), "CERTIFIED decode-only for ")
    document, checks = checks_of(path)
    if document["kernels"][0]["descriptor"]["contract"]["decode_only"] is not True:
        sys.exit("the certificate does not record decode_only")
    decode = checks["decode_matches_prefill"]
    if decode["verdict"] != "pass" or decode["effective_cases"] < 1:
        sys.exit("decode_matches_prefill: %s" % decode)
    for name in ("golden", "grid", "matches_reference", "deterministic_and_in_bounds"):
        check = checks[name]
        if check["verdict"] != "not covered" or "decode-only" not in check.get("not_covered", ""):
            sys.exit("%s is not 'not covered' as decode-only: %s" % (name, check))
    # Overflow and poisoned masked keys reach the decoder through its sessions (a causal prefill
    # decoded token by token): a max sentinel or a leak of masked cache rows would show there.
    for name in ("overflow_safe", "masked_inputs_have_no_influence"):
        check = checks[name]
        if check["verdict"] != "pass" or check["effective_cases"] < check["floor"]:
            sys.exit("%s does not reach the decode-only kernel through its sessions: %s" % (name, check))


def case_unsupported_in_contract():
    # UNSUPPORTED for Dk = 7, which the contract (Dk in [1, 256]) accepts: a failure, with the
    # problem saved. The quick budget at the fixed seed 11 of certify() draws Dk = 7 (widths 1..9
    # are drawn often), and each failing property shrinks its case to Dk = 7.
    out = certify("--kernel", plugin("broken_unsupported_dk7"), "--budget", "quick", expect=1)
    require(out, "FAIL example-c ", "kernel returned status 2: head_dim 7 is not implemented", "NOT CERTIFIED")
    saved = saved_problems()
    if not saved:
        sys.exit("no counterexample saved")
    for name, document in saved:
        if document["problem"]["shape"]["head_dim"] != 7:
            sys.exit("%s saved a problem with Dk = %d" % (name, document["problem"]["shape"]["head_dim"]))
    replay_all(plugin("broken_unsupported_dk7"), expect=1)


def case_fp16_kv():
    # fp16 K/V storage with f32 accumulation: certified at the default budget with the precision
    # gate (gate 2) run, not skipped. The same kernel accumulating P.V in fp16 while declaring f32
    # fails that gate; declaring the fp16 accumulator, it does not.
    verdict, document, checks = certified_at_default("fp16_kv_attention", "example-fp16-kv")
    require(verdict, "CERTIFIED example-fp16-kv for ")
    precision = document["kernels"][0]["descriptor"]["precision"]
    for buffer, scalar in (("k", "f16"), ("v", "f16"), ("q", "f32"), ("o", "f32"), ("scores", "f32"),
                           ("accumulator", "f32")):
        if precision[buffer] != scalar:
            sys.exit("the certificate records %s as %s, declared %s: %s" %
                     (buffer, precision[buffer], scalar, precision))
    for name in ("precision_gate", "matches_reference"):
        check = checks[name]
        if check["verdict"] != "pass" or check["effective_cases"] < 1:
            sys.exit("%s: %s" % (name, check))

    broken = os.path.join(WORK, "broken.json")
    out = certify("--kernel", plugin("broken_f16_accumulator"), "--budget", "default", "--json", broken,
                  expect=1)
    require(out, "FAIL example-fp16-kv precision_gate", "NOT CERTIFIED")
    _, checks = checks_of(broken)
    if checks["precision_gate"]["verdict"] != "fail":
        sys.exit("precision_gate: %s" % checks["precision_gate"])

    verdict, document, checks = certified_at_default("fp16_kv_f16_accumulator", "example-fp16-kv")
    require(verdict, "CERTIFIED example-fp16-kv for ")
    if document["kernels"][0]["descriptor"]["precision"]["accumulator"] != "f16":
        sys.exit("the certificate does not record the f16 accumulator")
    gate = checks["precision_gate"]
    if gate["verdict"] != "pass" or gate["effective_cases"] < 1:
        sys.exit("precision_gate: %s" % gate)


# ABI 2.1's declarations: each example is CERTIFIED as declared, and NOT CERTIFIED with
# its declaration left out or its bug put in (those two at quick without the size stages: they fail
# within the property stage).
def not_certified_quick(library, name, *needles):
    out = certify("--kernel", plugin(library), "--budget", "quick", "--no-size-stages", expect=1)
    require(verdict_line(out, name), "NOT CERTIFIED %s: failed: " % name, *needles)
    return out


def case_backward_variants():
    """The textbook backward of backward_attention.c stays CERTIFIED with two forward paths reported
    (backward evidence is credited to them) and under a causal-only training contract (where no key
    is hidden from every row: gradient_masked_keys_zero is not covered, with the reason)."""
    verdict, document, checks = certified_at_default("backward_two_paths", "backward-c")
    for name in GRADIENT_CHECKS:
        if checks[name]["verdict"] != "pass" or checks[name]["effective_cases"] < 1:
            sys.exit("two paths: %s: %s" % (name, checks[name]))
    verdict, document, checks = certified_at_default("backward_causal_only", "backward-c")
    masked = checks["gradient_masked_keys_zero"]
    if "the last row sees every key" not in masked.get("not_covered", ""):
        sys.exit("causal only: gradient_masked_keys_zero should be not covered: %s" % masked)
    for name in set(GRADIENT_CHECKS) - {"gradient_masked_keys_zero", "gradient_permutation_equivariance",
                                        "gradient_empty_rows_contribute_nothing"}:
        if checks[name]["verdict"] != "pass" or checks[name]["effective_cases"] < 1:
            sys.exit("causal only: %s: %s" % (name, checks[name]))


def case_declared_self_attention():
    verdict, document, checks = certified_at_default("self_attention_attention", "self-attention")
    require(verdict, "(contract: Dk in [1, 256], self-attention only (Tq == Tk, q_offset 0)")
    if document["kernels"][0]["descriptor"]["contract"]["self_attention_only"] is not True:
        sys.exit("the certificate does not record self_attention_only")
    # Undeclared, attest sends Tq != Tk and the loop's assumption shows; the diagonal bug fails declared.
    not_certified_quick("self_attention_undeclared", "self-attention", "matches_reference")
    not_certified_quick("broken_causal_diagonal", "self-attention", "matches_reference")


def case_declared_standard_alibi():
    verdict, document, checks = certified_at_default("standard_alibi_attention", "standard-alibi")
    require(verdict, "CERTIFIED standard-alibi for causal, alibi, ", "standard ALiBi slopes (max_bias 8)")
    contract = document["kernels"][0]["descriptor"]["contract"]
    if contract["alibi_slopes"] != "standard" or contract["alibi_max_bias"] != 8:
        sys.exit("the certificate does not record the standard slopes: %s" % contract)
    if checks["matches_reference"]["verdict"] != "pass" or "alibi" not in document["kernels"][0]["exercised_features"]:
        sys.exit("ALiBi was not exercised: %s" % checks["matches_reference"])
    not_certified_quick("standard_alibi_undeclared", "standard-alibi", "matches_reference")
    not_certified_quick("broken_slope_exponent", "standard-alibi", "matches_reference")


# ABI 2.3: a C training kernel's backward crosses the kernel host and is certified with
# every backward check effective; a bug in it fails the check that names it; a backward declared
# without its function, or at a precision attest cannot bound yet, is refused before any check.
GRADIENT_CHECKS = ("gradient_matches_reference", "gradient_precision_gate", "gradient_masked_keys_zero",
                   "gradient_dv_is_pt_do", "gradient_ds_rows_sum_to_zero", "gradient_empty_rows_contribute_nothing",
                   "gradient_gqa_matches_repeated_heads", "gradient_permutation_equivariance",
                   "gradient_deterministic", "gradient_matches_finite_difference", "gradient_overflow_safe")


def case_backward_plugin():
    verdict, document, checks = certified_at_default("backward_attention", "backward-c")
    require(verdict, "CERTIFIED backward-c for ", "backward")
    if document["kernels"][0]["descriptor"].get("deterministic_backward") is not True:
        sys.exit("the certificate does not record the deterministic backward: %s" %
                 document["kernels"][0]["descriptor"])
    for name in GRADIENT_CHECKS:
        check = checks[name]
        if check["verdict"] != "pass" or check["effective_cases"] < 1:
            sys.exit("%s: %s" % (name, check))
    not_certified_quick("broken_backward_drops_d", "backward-c", "gradient_ds_rows_sum_to_zero")
    not_certified_quick("broken_backward_softcap_slope", "backward-c", "gradient_matches_reference")
    out = certify("--kernel", plugin("broken_backward_backward_null"), "--budget", "quick", expect=2)
    require(out, "declares ATTEST_CAP_BACKWARD but its backward is NULL")
    out = certify("--kernel", plugin("broken_backward_bf16_backward"), "--budget", "quick", expect=2)
    require(out, "ATTEST_CAP_BACKWARD with precision not float32 throughout", "not derived yet")


def case_backward_failure_path():
    """A gradient failure names the path the backward call reported (the plugin's backward reports
    c-loop, its forwards c-loop-odd and c-loop-even), never the last forward's, across the kernel host."""
    out = not_certified_quick("broken_backward_named_path", "backward-c", "gradient_ds_rows_sum_to_zero")
    tagged = [line for line in out.splitlines() if "gradient_" in line and "[path: " in line]
    if not tagged:
        sys.exit("no gradient failure line names a path:\n" + out)
    for line in tagged:
        if "[path: c-loop]" not in line:
            sys.exit("a gradient failure does not name its backward's path c-loop: " + line)


def case_declared_unnormalised_pv():
    # fp16 K/V, the softmax sum in f32, P.V summed in fp16 before normalising, values within +-8
    # (4096 keys x 8 < 65504): certified as declared, with where that arithmetic fails by itself
    # (its fp16 sum stagnates at 2048 keys of V = 1) stated as its precision limit.
    verdict, document, checks = certified_at_default("fp16_kv_unnormalised", "example-fp16-kv")
    require(verdict, "|V| <= 8", "P.V accumulator f16, weight sum f32, P.V unnormalised",
            "; precision limit: error above 1% from T = 4096 (4096 equal keys of V = 1 give 0.5)")
    kernel = document["kernels"][0]
    precision = kernel["descriptor"]["precision"]
    if (precision["accumulator"], precision["weight_sum"], precision["pv_unnormalised"]) != ("f16", "f32", True):
        sys.exit("the certificate does not record the two accumulators: %s" % precision)
    if kernel["descriptor"]["contract"]["max_abs_value"] != 8:
        sys.exit("the certificate does not record the value range: %s" % kernel["descriptor"]["contract"])
    if [limit["kind"] for limit in kernel["precision_limits"]] != ["accuracy"]:
        sys.exit("precision limits: %s" % kernel["precision_limits"])
    if checks["precision_gate"]["verdict"] != "pass" or checks["precision_gate"]["effective_cases"] < 1:
        sys.exit("precision_gate: %s" % checks["precision_gate"])
    # Declared as ABI 2.0 allowed (an fp16 accumulator, any V): attest draws V over fp16's range,
    # and the fp16 sum is inf where the exact output is finite - every failure is such an inf.
    out = not_certified_quick("fp16_kv_unnormalised_undeclared", "example-fp16-kv", "overflow_safe")
    for line in out.splitlines():
        if line.startswith("  FAIL ") and "inf" not in line:
            sys.exit("a failure other than the overflow: " + line)
    # The declared loop forgetting to rescale its fp16 sum when the maximum grows: finite wrong outputs.
    out = not_certified_quick("broken_fp16_kv_rescale", "example-fp16-kv", "matches_reference")
    if not any(line.startswith("  FAIL ") and "inf" not in line for line in out.splitlines()):
        sys.exit("the rescale bug shows only as overflow:\n" + out)


# Score modifiers (docs/design.md#score-modifiers). Checks that a modifier reaches in every certificate; the
# modifier's own properties (sink_takes_mass, softcap_saturates, ...) join when the catalogue has them.
MODIFIER_CHECKS = ("matches_reference", "zero_masked_weight", "masked_inputs_have_no_influence", "empty_row_policy",
                   "permutation_equivariance", "slices_are_independent")
MODIFIER_PROPERTIES = {"softcap": ("softcap_saturates",), "sinks": ("sink_takes_mass",),
                       "bias": ("bias_minus_inf_equals_mask",)}


def require_modifier_cases(path, name, *features):
    """The certificate at `path` certifies kernel `name` for each modifier in `features`, and every
    modifier check passed with cases that drew the modifier (feature_cases > 0)."""
    document, checks = checks_of(path)
    kernel = document["kernels"][0]
    if not kernel["certified"] or kernel["name"] != name:
        sys.exit("%s is not certified: %s" % (name, kernel["name"]))
    for feature in features:
        if feature not in kernel["descriptor"]["features"] or kernel["covered_features"].get(feature, 0) < 1:
            sys.exit("%s: %s is not declared and covered: %s" % (name, feature, kernel["covered_features"]))
        own = [check for check in MODIFIER_PROPERTIES[feature] if check in checks]
        counts = []
        for check in MODIFIER_CHECKS + tuple(own):
            entry = checks[check]
            cases = entry.get("feature_cases", {}).get(feature, 0)
            if entry["verdict"] != "pass" or cases < 1:
                sys.exit("%s %s: %d cases with %s, verdict %s" % (name, check, cases, feature, entry["verdict"]))
            counts.append("%s %d" % (check, cases))
        print("%s, cases with %s: %s" % (name, feature, ", ".join(counts)))


def case_modifiers_c_plugin():
    # The C example computes softcap and sinks itself; served over the process protocol
    # (example_process_kernel, the same C file) they reach it through the protocol's fields.
    path = os.path.join(WORK, "c.json")
    verdict = verdict_line(certify("--kernel", plugin("example_attention"), "--json", path, expect=0), "example-c")
    require(verdict, "softcap, sinks")
    require_modifier_cases(path, "example-c", "softcap", "sinks")
    certify("--kernel-cmd", os.path.join(EXAMPLES, "example_process_kernel"), "--budget", "40", "--json", path,
            expect=0)
    require_modifier_cases(path, "example-c", "softcap", "sinks")


def broken_modifier(library, feature, needles):
    """lib<library>.so, a modifier implemented wrongly: not certified, matches_reference among the
    failing checks, its shrunk counterexample carries the modifier and replays to the same verdict."""
    out = certify("--kernel", plugin(library), expect=1)
    require(out, "FAIL example-c matches_reference: ", "NOT CERTIFIED example-c: failed: ", *needles)
    # The property's counterexample: matches_reference__KERNEL__CASE.json (the shrunk case's id).
    saved = [doc for name, doc in saved_problems() if name.startswith("matches_reference__example-c__")]
    if len(saved) != 1:
        sys.exit("expected one matches_reference counterexample, found %d" % len(saved))
    problem = saved[0]["problem"]
    modifiers = problem["modifiers"]
    if not modifiers.get(feature):
        sys.exit("the counterexample has no %s: %s" % (feature, modifiers))
    print("%s: shrunk to Tq = %d, Tk = %d, %s = %s" % (library, problem["shape"]["q_len"], problem["shape"]["k_len"],
                                                       feature, modifiers[feature]))
    replay_all(plugin(library), expect=1)


def case_broken_softcap_after_mask():
    # Masked keys capped to -c take weight: a row that sees no key outputs a mean of values.
    broken_modifier("broken_softcap_after_mask", "softcap", ("FAIL example-c zero_masked_weight: ",
                                                             "FAIL example-c masked_inputs_have_no_influence: "))


def case_broken_sink_in_numerator():
    # The sink's share given to key 0's value: O is no longer sum_j p_j v_j.
    broken_modifier("broken_sink_in_numerator", "sinks", ("a row that sees no key but a sink must output 0",))


def merge_checked(*kernel_args):
    """The merge_equals_whole check of a certify of example-c that must say CERTIFIED."""
    path = os.path.join(WORK, "merge.json")
    certify(*kernel_args, "--budget", "40", "--json", path, expect=0)
    return checks_of(path)[1]["merge_equals_whole"]


def case_merge_c_plugin():
    # ABI 2.6: example_attention.c's merge is judged through the plugin (the kernel host) and
    # through the process protocol (example_process_kernel, the same C file); each broken merge
    # is NOT CERTIFIED by merge_equals_whole.
    for args in (("--kernel", plugin("example_attention")),
                 ("--kernel-cmd", os.path.join(EXAMPLES, "example_process_kernel"))):
        check = merge_checked(*args)
        if check["verdict"] != "pass" or check["effective_cases"] < 1:
            sys.exit("%s: merge_equals_whole %s" % (args[1], check))
        print("%s: merge_equals_whole passed, %d effective cases" %
              (os.path.basename(args[1]), check["effective_cases"]))
    for library in ("broken_merge_without_max", "broken_merge_empty_part_nan"):
        not_certified_quick(library, "example-c", "merge_equals_whole")


def case_packed_c_plugin():
    # ABI 2.8: packed_attention.c serves the packed varlen layout on the packed buffers through the
    # kernel host: CERTIFIED at quick with both packed checks run. Its twin reads cu_seqlens_q[batch + 1]
    # (a loop over b <= batch) without any effect on its outputs: only the guard page right after
    # cu_seqlens shows it, as a fault naming the buffer (without the guard it was CERTIFIED).
    path = os.path.join(WORK, "packed.json")
    out = certify("--kernel", plugin("packed_attention"), "--budget", "quick", "--json", path, expect=0)
    require(verdict_line(out, "packed-c"), "CERTIFIED packed-c for causal, key_padding, query_padding, gqa, lse")
    _, checks = checks_of(path)
    for name in ("packed_equals_padded", "sequences_do_not_interact"):
        if checks[name]["verdict"] != "pass" or checks[name]["effective_cases"] < 1:
            sys.exit("packed_attention: %s %s" % (name, checks[name]))
    out = certify("--kernel", plugin("broken_cu_seqlens_past_end"), "--budget", "quick", "--no-size-stages",
                  "--no-shrink", "--check", "packed_equals_padded,sequences_do_not_interact", expect=1)
    require(verdict_line(out, "packed-c-past-end"), "NOT CERTIFIED packed-c-past-end: failed: packed_equals_padded")
    require(out, "read outside cu_seqlens_q at byte offset")
    # ABI 2.10: the same kernel declaring and reading int64 offsets is CERTIFIED by the packed checks;
    # one declaring int64 but reading them as int32 (half of each offset) is not.
    packed_checks = ("--budget", "quick", "--no-size-stages", "--no-shrink", "--check",
                     "packed_equals_padded,sequences_do_not_interact")
    out = certify("--kernel", plugin("packed_attention_int64"), *packed_checks, expect=0)
    require(verdict_line(out, "packed-c-int64"), "CERTIFIED packed-c-int64")
    out = certify("--kernel", plugin("broken_int64_as_int32"), *packed_checks, expect=1)
    require(verdict_line(out, "packed-c-int64-as-int32"), "NOT CERTIFIED packed-c-int64-as-int32: failed: packed_")
    require(out, "[path: packed (varlen)]")  # the kernel's own name for its packed path


def numpy_variant(name, old, new):
    """A copy of the numpy example in WORK with one line replaced (which must occur exactly once)."""
    source = open(os.path.join(SOURCE, "ci/examples/process_python/numpy_kernel.py")).read()
    if source.count(old) != 1:
        sys.exit("numpy_kernel.py no longer has exactly one %r" % old)
    path = os.path.join(WORK, name + ".py")
    open(path, "w").write(source.replace(old, new))
    return "env PYTHONPATH=%s /usr/bin/python3 %s" % (os.path.join(SOURCE, "python"), path)


def case_modifiers_numpy():
    # The numpy example adds the bias, broadcast over batch and heads as the flags say, and masks
    # the keys whose bias is -inf before reading their scores.
    path = os.path.join(WORK, "numpy.json")
    out = certify("--kernel-cmd", PYTHON_KERNEL, "--budget", "40", "--json", path, expect=0)
    verdict = verdict_line(out, "example-numpy")
    require(verdict, "bias")
    require_modifier_cases(path, "example-numpy", "bias")


def case_broken_numpy_bias():
    # Each of these lines of the numpy example's bias matters: without it, certify fails.
    reshape = "bias = bias.reshape(B if bias_per_batch else 1, H if bias_per_head else 1, Tq, Tk)"
    for name, old, new, needle in (
            ("no_inf_mask", "mask = mask & (bias != -np.inf)", "pass", "got NaN"),
            ("batch0", reshape, reshape + "[:1]", "FAIL example-numpy ")):  # which property first: seed-dependent
        out = certify("--kernel-cmd", numpy_variant(name, old, new), "--budget", "20", expect=1)
        require(out, "NOT CERTIFIED example-numpy: failed: ", needle)
        print("numpy with bias bug %s: %s" % (name, verdict_line(out, "example-numpy")[:160]))


def case_baseline_blas():
    # The bench's peer baseline is a correct kernel for what it declares (masked NaN V rows do not
    # leak through its sgemm), and does not claim the mask terms its own mask code lacks.
    out = certify("--kernel", "baseline:blas", expect=0)
    verdict = verdict_line(out, "blas")
    require(verdict, "CERTIFIED blas for ", "not covered: chunk, lookahead")
    print(verdict[:200])


def protocol_forward(argv, payload):
    """Runs a process kernel as attest does (requests on descriptor 3, replies on 4), sends HELLO
    and one FORWARD with `payload`; returns the FORWARD_RESULT's status, path, o and lse."""
    import fcntl
    import struct
    requests, replies = os.pipe(), os.pipe()
    # Above 9 so that placing them on 3 and 4 in the child cannot overwrite one with the other.
    theirs = [fcntl.fcntl(requests[0], fcntl.F_DUPFD, 10), fcntl.fcntl(replies[1], fcntl.F_DUPFD, 10)]
    for fd in (requests[0], replies[1]):
        os.close(fd)
    kernel = subprocess.Popen(argv, stdin=subprocess.DEVNULL, pass_fds=(3, 4),
                              preexec_fn=lambda: (os.dup2(theirs[0], 3), os.dup2(theirs[1], 4)),
                              env=dict(os.environ, ATTEST_PROTOCOL_FDS="3,4"))
    for fd in theirs:
        os.close(fd)
    to_kernel, from_kernel = os.fdopen(requests[1], "wb"), os.fdopen(replies[0], "rb")

    def send(kind, data):
        to_kernel.write(struct.pack("<IIQ", 0x54535441, kind, len(data)) + data)
        to_kernel.flush()

    def receive(expected):
        magic, kind, size = struct.unpack("<IIQ", from_kernel.read(16))
        if magic != 0x54535441 or kind != expected:
            sys.exit("%s: frame type %d, expected %d" % (argv, kind, expected))
        return from_kernel.read(size)

    send(1, struct.pack("<I", 3))  # HELLO, protocol version 3 -> DESCRIPTOR
    receive(2)
    send(3, payload)  # FORWARD -> FORWARD_RESULT
    reply, at = receive(4), 0
    send(11, b"")  # BYE
    kernel.wait(timeout=30)

    def take(fmt):
        nonlocal at
        values = struct.unpack_from("<" + fmt, reply, at)
        at += struct.calcsize("<" + fmt)
        return values

    def text():
        return take("%ds" % take("I")[0])[0].decode()

    status, error, path = take("i")[0], text(), text()
    text()  # the fault message, empty when the status says all
    o = take("%df" % (take("Q")[0] // 4))
    lse = take("%df" % take("Q")[0])
    if status != 0:
        sys.exit("%s: status %d: %s" % (argv, status, error))
    return path, o, lse


def case_report_polish():
    # What a failing report must not say: an empty RapidCheck reproduce string after a
    # deterministic check, a RapidCheck seed line naming another seed than attest's, "-nan"; and
    # every failure line names the internal path that served the call.
    out = certify("--kernel", "mutant:no_max_subtraction", "--kernel", "mutant:causal_sees_next",
                  "--budget", "quick", expect=1)
    for bad in ('RC_PARAMS=""', "-nan", "expected nan, got nan"):
        if bad in out:
            sys.exit("%r in the report:\n%s" % (bad, out))
    for line in out.splitlines():
        if line.startswith("Using configuration:") and "seed=11" not in line:
            sys.exit("RapidCheck names another seed than attest's 11: %r" % line)
    fails = [line for line in out.splitlines() if line.strip().startswith("FAIL ") and "kernel failure" not in line]
    if not fails or any("[path: " not in line for line in fails):
        sys.exit("a failure line without its path:\n" + "\n".join(fails))
    # Columns fit a long kernel name: every table row of a kernel has the same verdict column.
    rows = [line for line in out.splitlines() if line.startswith("  property ")]
    starts = {row.index(" PASS") if " PASS" in row else row.index(" FAIL") for row in rows
              if " PASS" in row or " FAIL" in row}
    if len(starts) > 2:  # one per kernel at most
        sys.exit("verdict columns move within a table:\n" + "\n".join(rows))


def case_protocol_example():
    # impl/PROTOCOL.md's worked example (softcap and sinks) is true: its bytes, sent as they are to
    # the C example's process server and to the built-in loop kernel, give the reply it shows.
    section = open(os.path.join(SOURCE, "impl/PROTOCOL.md")).read().split("### A worked example")[1]
    blocks = section.split("```")
    payload = bytes.fromhex("".join(line.split("#")[0] for line in blocks[1].splitlines()))
    require(section, "The FORWARD payload, %d bytes" % len(payload))
    shown = {}
    for line in blocks[3].splitlines():
        if "=" in line and not line.startswith("status"):
            name, values = line.split("=")
            shown[name.strip()] = [float(x) for x in values.split()]
    for argv in ([os.path.join(EXAMPLES, "example_process_kernel")], [ATTEST, "kernel-host", "--builtin", "loop"]):
        path, o, lse = protocol_forward(argv, payload)
        for name, got in (("o", o), ("lse", lse)):
            if len(got) != len(shown[name]) or any(abs(a - b) > 1e-6 for a, b in zip(got, shown[name])):
                sys.exit("%s: %s = %s, PROTOCOL.md shows %s" % (argv[-1], name, got, shown[name]))
        print("%s (path %r): o = %s, lse = %s" % (os.path.basename(argv[-1]), path, o, lse))
    require(blocks[3], 'path "c-reference-loop"')


globals()["case_" + CASE]()
print("ok:", CASE)

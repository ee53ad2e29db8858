#!/usr/bin/env python3
"""A libFuzzer finding counts as a kill only when `attest replay` fails it again in a fresh
process with the same kernel. Stand-ins for the fuzz preset's binaries leave a chosen input as
their crash (or find nothing), so this runs in the default ctest without building clang's targets.

usage: fuzz_evidence_test.py ATTEST SOURCE_DIR"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

ATTEST, SOURCE = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="attest-fuzz-evidence-")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)  # nothing left in /tmp
TARGETS = ("fuzz_mask_leak", "fuzz_overflow", "fuzz_decode", "fuzz_differential", "fuzz_backward")
# Fails masked_inputs_have_no_influence on mutant:causal_sees_next, passes on correct kernels.
SEED = os.path.join(SOURCE, "corpus/fuzz_mask_leak/tile_edge_33_causal")
MUTANT = "mutant:causal_sees_next"

FAKE = """#!/bin/sh
# Stands in for a libFuzzer binary: records the kernel it was given, leaves its crash input.
for arg; do case "$arg" in -artifact_prefix=*) dir="${arg#-artifact_prefix=}";; esac; done
echo "$ATTEST_FUZZ_KERNEL" > "$dir/../kernel-seen"
echo "stat::number_of_executed_units: 1"
[ -n "INPUT" ] || exit 0
cp "INPUT" "${dir}crash-stand-in"
exit 1
"""


def fake_build():
    build = os.path.join(WORK, "build")
    os.makedirs(os.path.join(build, "fuzz"))
    for target in TARGETS:
        path = os.path.join(build, "fuzz", target)
        with open(path, "w") as f:
            f.write(FAKE.replace("INPUT", SEED if target == "fuzz_mask_leak" else ""))
        os.chmod(path, 0o755)
    return build


def run(*args, expect):
    p = subprocess.run([ATTEST, *args], cwd=WORK, capture_output=True, text=True, timeout=600)
    if p.returncode != expect:
        sys.exit("attest %s exited %d, expected %d\n%s\n%s" % (" ".join(args), p.returncode, expect, p.stdout,
                                                               p.stderr))
    return p.stdout


def require(text, *needles):
    for needle in needles:
        if needle not in text:
            sys.exit("missing %r in:\n%s" % (needle, text))


BUILD = fake_build()

# The mutant: decoded, saved, replayed in a fresh process that fails: counted, exit 1.
out = run("fuzz", "--target", "fuzz_mask_leak", "--seconds", "1", "--kernel", MUTANT, "--fuzz-build", BUILD,
          "--out", "one", expect=1)
require(out, "on " + MUTANT, "--kernel " + MUTANT + "): exit 1, FAIL", "counted: the replay fails")
with open(os.path.join(WORK, "one/fuzz/fuzz_mask_leak/kernel-seen")) as f:
    if f.read().strip() != MUTANT:
        sys.exit("the fuzzer did not get the kernel by its environment")

# A correct kernel on the same input: libFuzzer's finding is reported, not counted, exit 3.
out = run("fuzz", "--target", "fuzz_mask_leak", "--seconds", "1", "--kernel", "loop", "--fuzz-build", BUILD,
          "--out", "two", expect=3)
require(out, "FINDING fuzz_mask_leak", "not counted")

# A kernel that throws when decoded here (it writes past its output) is not fatal to attest:
# recorded as deterministic_and_in_bounds, and counted because the replay fails.
out = run("fuzz", "--target", "fuzz_mask_leak", "--seconds", "1", "--kernel", "mutant:write_past_output",
          "--fuzz-build", BUILD, "--out", "thrown", expect=1)
require(out, "deterministic_and_in_bounds on mutant:write_past_output", "counted: the replay fails")

# attest mutants records each target's replay; only the one that failed again counts.
report = os.path.join(WORK, "mutants.json")
out = run("mutants", "--only", "causal_sees_next", "--budget", "quick", "--seed", "1", "--fuzz-seconds", "1",
          "--fuzz-build", BUILD,
          "--out", "three", "--json", report, expect=0)
require(out, "fuzz: fuzz_mask_leak\n")
with open(report) as f:
    row = json.load(f)["mutants"][0]
fuzz = {t["target"]: t for t in row["fuzz"]}
mask = fuzz["fuzz_mask_leak"]
if not (mask["libfuzzer_finding"] and mask["counted"] and mask["replay_exit_code"] == 1
        and mask["kernel"] == MUTANT and mask["replay_kernel"] == MUTANT
        and mask["property"] == "masked_inputs_have_no_influence" and mask["replay_verdict"].startswith("FAIL")):
    sys.exit("fuzz_mask_leak evidence: %s" % mask)
# Only the targets the mutant's declaration can take: no decode, no backward.
if set(fuzz) != set(TARGETS) - {"fuzz_decode", "fuzz_backward"}:
    sys.exit("targets run: %s" % sorted(fuzz))
for target in sorted(set(fuzz) - {"fuzz_mask_leak"}):
    if fuzz[target]["libfuzzer_finding"] or fuzz[target]["counted"]:
        sys.exit("%s found nothing, yet: %s" % (target, fuzz[target]))
if row["fuzz_killed_by"] != ["fuzz_mask_leak"]:
    sys.exit("fuzz_killed_by: %s" % row["fuzz_killed_by"])

# A mutant the input does not catch: the finding is recorded, no fuzz kill.
out = run("mutants", "--only", "decode_skips_self", "--budget", "quick", "--seed", "1", "--fuzz-seconds", "1",
          "--fuzz-build", BUILD,
          "--out", "four", "--json", report, expect=0)
require(out, "fuzz: -\n")
with open(report) as f:
    mask = json.load(f)["mutants"][0]["fuzz"][0]
if not mask["libfuzzer_finding"] or mask["counted"] or mask["replay_exit_code"] is not None:
    sys.exit("a finding that violates nothing was counted or replayed: %s" % mask)
print("ok: fuzz findings count only after a failing fresh-process replay")

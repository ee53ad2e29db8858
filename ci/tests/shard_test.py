#!/usr/bin/env python3
"""Command-line tests of `attest certify --shard K/N` and `attest merge`, run by ctest one case
at a time:
    shard_test.py ATTEST SOURCE_DIR CASE
Shards merged must give the unsharded certificate (but for timings); a check's result must not
depend on which other checks ran; merge refuses what does not belong together with exit 2."""
import atexit
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

ATTEST, SOURCE, CASE = sys.argv[1:4]
WORK = tempfile.mkdtemp(prefix="attest-shard-")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)  # nothing left in /tmp
KERNELS = ["--kernel", "loop", "--kernel", "decode"]
# No long-stage time budget: what a shard reaches must not depend on how busy the machine is;
# lengths capped at 1024 instead, so the sanitizer pass runs these in seconds, not minutes.
SEED = ["--budget", "quick", "--seed", "7", "--long-seconds", "0", "--max-len", "1024"]
# merge's refusals only need certificates of the right form: two cases a property, no size stages.
CHEAP = ["--budget", "2", "--seed", "7", "--no-size-stages"]


# Every fleet engine's shard variables: none leaks in from the CI that runs this test.
ENGINE_VARIABLES = ("ATTEST_SHARD", "CI_NODE_INDEX", "CI_NODE_TOTAL", "JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID",
                    "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP",
                    "CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT")
CLEAN = {k: v for k, v in os.environ.items() if k not in ENGINE_VARIABLES}


def run(*args, expect, variables=None):
    cmd = [ATTEST] + list(args)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(CLEAN, **(variables or {})))
    if done.returncode < 0:
        sys.exit("attest died with signal %d: %s\n%s%s" % (-done.returncode, " ".join(cmd), done.stdout, done.stderr))
    if done.returncode != expect:
        sys.exit("exit %d, expected %d: %s\n%s%s" % (done.returncode, expect, " ".join(cmd), done.stdout, done.stderr))
    return done


def path(name):
    return os.path.join(WORK, name)


def certify(*args, out="out", expect=0, variables=None):
    return run("certify", *args, "--out", path(out), expect=expect, variables=variables)


def merge(*args, expect=0):
    return run("merge", *args, expect=expect)


def untimed(document):
    """The certificate without what only timing changes: when it was written and seconds per check."""
    document = json.loads(json.dumps(document))
    document.pop("created")
    for kernel in document["kernels"]:
        for check in kernel["checks"]:
            check.pop("seconds")
    return document


def load(name):
    return json.load(open(path(name)))


def same(merged, full):
    a, b = untimed(load(merged)), untimed(load(full))
    if a != b:
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                sys.exit("%s differs from %s in %r:\n%s\n%s" % (merged, full, key, json.dumps(a.get(key))[:3000],
                                                                json.dumps(b.get(key))[:3000]))
        sys.exit("%s differs from %s" % (merged, full))


def validate(*names):
    import jsonschema
    schema = json.load(open(os.path.join(SOURCE, "ci/schema/certificate.schema.json")))
    for name in names:
        jsonschema.validate(load(name), schema)


def fleet_engine(k, n):
    """Shard K of N as --shard auto reads it from a fleet engine's variables, a different engine
    for each K: (variables, the source the scope line must name)."""
    engines = [({"CIRCLE_NODE_INDEX": k - 1, "CIRCLE_NODE_TOTAL": n}, "CircleCI CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL"),
               ({"BUILDKITE_PARALLEL_JOB": k - 1, "BUILDKITE_PARALLEL_JOB_COUNT": n},
                "Buildkite BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT"),
               ({"SLURM_ARRAY_TASK_ID": 10 + 2 * (k - 1), "SLURM_ARRAY_TASK_COUNT": n, "SLURM_ARRAY_TASK_MIN": 10,
                 "SLURM_ARRAY_TASK_MAX": 10 + 2 * (n - 1), "SLURM_ARRAY_TASK_STEP": 2},
                "Slurm SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"),
               ({"CI_NODE_INDEX": k, "CI_NODE_TOTAL": n}, "GitLab CI_NODE_INDEX/CI_NODE_TOTAL")]
    variables, source = engines[(k - 1) % len(engines)]
    return {name: str(value) for name, value in variables.items()}, source


def shards_of(n, kernels=KERNELS, prefix="shard", out="out", expect=None, flags=SEED, from_environment=False):
    """Runs the N shards, given as K/N or (from_environment) as --shard auto with a fleet engine's
    variables; returns their certificate names. Each shard's verdict speaks for its share."""
    names = []
    for k in range(1, n + 1):
        name = "%s-%d-of-%d.json" % (prefix, k, n)
        variables, source = fleet_engine(k, n) if from_environment else ({}, None)
        done = certify(*kernels, *flags, "--shard", "auto" if from_environment else "%d/%d" % (k, n), "--json",
                       path(name), out=out, expect=0 if expect is None else expect[k - 1], variables=variables)
        lines = done.stdout.strip().splitlines()
        if not lines or not lines[-1].startswith("shard %d/%d: " % (k, n)):
            sys.exit("the shard's last line does not say it speaks for shard %d/%d:\n%s" % (k, n, done.stdout))
        if source and "; the shard from %s)" % source not in done.stdout:
            sys.exit("the scope line does not name %s as the shard's source:\n%s" % (source, done.stdout))
        document = load(name)
        if document.get("shard") != {"index": k, "count": n}:
            sys.exit("%s records shard %r" % (name, document.get("shard")))
        names.append(name)
    return names


def case_split_equals_full():
    certify(*KERNELS, *SEED, "--json", path("full.json"))
    if "shard" in load("full.json"):
        sys.exit("the unsharded certificate has a shard field")
    total = sum(len(k["checks"]) for k in load("full.json")["kernels"])
    for n in (2, 3):  # 3 shards from CircleCI's, Buildkite's and Slurm's variables
        names = shards_of(n, from_environment=n == 3)
        held = sum(len(k["checks"]) for name in names for k in load(name)["kernels"])
        if held != total:
            sys.exit("%d shards hold %d checks, the unsharded run %d" % (n, held, total))
        random.Random(n).shuffle(names)  # any order of the files
        merged = "merged-%d.json" % n
        done = merge(*[path(name) for name in names], "--json", path(merged), "--junit", path("merged.xml"))
        if not done.stdout.endswith("\nCERTIFIED\n"):
            sys.exit("merge did not end with CERTIFIED:\n" + done.stdout)
        same(merged, "full.json")
        validate(merged, *names)
    # The merged certificate gates like a certify run's.
    done = merge(*[path(n) for n in shards_of(2)], "--json", path("gated.json"), "--baseline", path("full.json"))
    if "no regression" not in done.stdout:
        sys.exit("merge --baseline did not gate:\n" + done.stdout)


def case_failing_check_same():
    # A mutant's failing checks: the same first failure, counterexample and RapidCheck line in the
    # shard that ran it as in the unsharded run (each run saves into its own folder).
    mutant = ["--kernel", "mutant:no_rescale"]
    certify(*mutant, *SEED, "--json", path("full.json"), out="out-full", expect=1)
    full = {c["check"]: c for c in load("full.json")["kernels"][0]["checks"]}
    failing = [name for name, check in full.items() if check["verdict"] == "fail"]
    if not failing:
        sys.exit("mutant:no_rescale did not fail at the quick budget, seed 7")
    in_shard = {}
    for k in (1, 2):
        name = "m-%d.json" % k
        # The exit code follows whether this shard's share holds a failing check.
        done = subprocess.run([ATTEST, "certify", *mutant, *SEED, "--shard", "%d/2" % k, "--json", path(name),
                               "--out", path("out-%d" % k)], capture_output=True, text=True, timeout=600)
        checks = load(name)["kernels"][0]["checks"]
        fails = any(c["verdict"] == "fail" for c in checks)
        if done.returncode != (1 if fails else 0):
            sys.exit("shard %d/2 exited %d with%s a failing check" % (k, done.returncode, "" if fails else "out"))
        for check in checks:
            in_shard[check["check"]] = (k, check)
    for name in failing:
        k, check = in_shard[name]
        want = full[name]
        for field in ("verdict", "cases", "effective_cases", "failures", "first_failure", "worst_utilisation", "seed",
                      "reproduce", "skipped", "feature_cases"):
            if check.get(field) != want.get(field):
                sys.exit("%s in shard %d/2: %s is %r, unsharded %r" %
                         (name, k, field, check.get(field), want.get(field)))
        saved, expected = json.load(open(check["counterexample"])), json.load(open(want["counterexample"]))
        if saved != expected:
            sys.exit("%s: shard %d/2 saved another counterexample than the unsharded run" % (name, k))
        if os.path.basename(check["counterexample"]) != os.path.basename(want["counterexample"]):
            sys.exit("%s: counterexample file names differ" % name)
    # Merged, the mutant's certificate is the unsharded one but for where counterexamples were saved.
    merge(path("m-1.json"), path("m-2.json"), "--json", path("merged.json"), expect=1)
    a, b = untimed(load("merged.json")), untimed(load("full.json"))
    for document in (a, b):
        for check in document["kernels"][0]["checks"]:
            if "counterexample" in check:
                check["counterexample"] = os.path.basename(check["counterexample"])
    if a != b:
        sys.exit("the merged mutant certificate differs from the unsharded one")


def case_merge_hostile():
    one, two = shards_of(2, flags=CHEAP)
    good = load(one)

    def write(name, content):
        with open(path(name), "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path(name)

    other_seed = load(two)
    other_seed["seed"] = 8  # as if run with --seed 8: refused before the checks are compared
    edited = load(two)
    edited["kernels"][0]["checks"][0]["verdict"] = "fail"
    inflated = load(two)
    inflated["kernels"][0]["checks"][0]["effective_cases"] = inflated["kernels"][0]["checks"][0]["cases"] + 1
    negative = load(two)
    negative["kernels"][0]["checks"][0]["seconds"] = -1.0
    # The coverage fields: a declared path whose predicate takes no problem, a negative count of
    # probes redone off their path.
    empty_path = load(two)
    empty_path["kernels"][0]["descriptor"]["declared_paths"] = [dict(
        path="split_kv", batch=[4, 1], heads=[0, 0], q_len=[0, 0], k_len=[0, 0], head_dim=[0, 0], value_dim=[0, 0],
        head_dim_multiple=0, value_dim_multiple=0, k_len_multiple=0, k_len_not_multiple=False, required=[], excluded=[],
        no_mask=False, summary="")]
    off_path = load(two)
    off_path["kernels"][0]["checks"][0]["probes_off_path"] = {"redone": -3, "kept": 0}
    # A cache policy attest does not know, and a window that keeps nothing.
    lru = load(two)
    lru["kernels"][0]["descriptor"]["cache"] = dict(policy="lru", sinks=0, recent=8, summary="")
    no_window = load(two)
    no_window["kernels"][0]["descriptor"]["cache"] = dict(policy="window", sinks=0, recent=0, summary="")
    three = shards_of(3, prefix="three", flags=CHEAP)
    certify(*KERNELS, *CHEAP, "--json", path("full.json"))
    depth = 70000
    cases = [
        ("missing shard", [path(one)], "shard 2/2 is missing"),
        ("duplicate index", [path(one), path(one), path(two)], "shard 1/2 is given twice"),
        ("mismatched seed", [path(one), write("seed8.json", other_seed)], "seed 8 differs"),
        ("a problem file", [path(one), write("problem.json", {"format": "attest-problem", "version": 1})],
         "not an attest certificate"),
        ("not JSON", [path(one), write("text.json", "certificate: yes\n")], "not valid JSON"),
        ("70,000-deep JSON", [path(one), write("deep.json", '{"a":' * depth + "1" + "}" * depth)], "nested deeper"),
        ("an unsharded certificate", [path(one), path("full.json")], "not a shard's certificate"),
        ("shard counts differ", [path(one), path(three[1])], "shard count 3 differs"),
        ("an edited verdict", [path(one), write("edited.json", edited)], "checks[0].verdict"),
        ("a field of the wrong type", [path(one), write("typed.json", dict(good, seed="7"))], "seed must be"),
        ("a missing file", [path(one), path("no-such.json")], "cannot open"),
        ("more effective cases than cases", [path(one), write(
            "inflated.json", inflated)], "effective_cases is more than cases"),
        ("negative seconds", [path(one), write("negative.json", negative)], "seconds is negative"),
        ("a declared path taking no problem", [path(one), write("empty_path.json", empty_path)],
         "declared_paths[0] path split_kv: an empty or negative range"),
        ("negative probes redone", [path(one), write("off_path.json", off_path)],
         "probes_off_path.redone must be a count"),
        ("an unknown cache policy", [path(one), write("lru.json", lru)], "descriptor.cache.policy must be"),
        ("a window keeping nothing", [path(one), write("no_window.json", no_window)], "recent must be >= 1"),
    ]
    for what, files, message in cases:
        out = path("out.json")
        done = merge(*files, "--json", out, expect=2)
        lines = done.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("attest: merge: ") or message not in lines[0]:
            sys.exit("%s: expected one line 'attest: merge: ...%s...', got:\n%s" % (what, message, done.stderr[-2000:]))
        if os.path.exists(out):
            sys.exit("%s: a certificate was written" % what)


def case_shard_flags():
    for bad in ("0/2", "3/2", "1/1001", "1/2x", "2", "", "-1/2", "1/2/3", "a/b"):
        done = certify("--kernel", "loop", "--budget", "0", "--shard", bad, expect=2)
        if "--shard" not in done.stderr or done.stderr.count("\n") != 1:
            sys.exit("--shard %r: not a one-line error naming the flag:\n%s" % (bad, done.stderr))
    # --shard auto: no shard, or engines that disagree, in the environment.
    for variables in ({}, {"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "2", "BUILDKITE_PARALLEL_JOB": "1",
                           "BUILDKITE_PARALLEL_JOB_COUNT": "2"}, {"SLURM_ARRAY_TASK_ID": "1"}):
        done = certify("--kernel", "loop", "--budget", "0", "--shard", "auto", expect=2, variables=variables)
        if "--shard auto" not in done.stderr or done.stderr.count("\n") != 1:
            sys.exit("--shard auto with %r: not a one-line error naming the flag:\n%s" % (variables, done.stderr))
    done = certify("--kernel", "loop", "--budget", "0", "--shard", "1/2", "--baseline", path("x.json"), expect=2)
    if "--baseline" not in done.stderr:
        sys.exit("--shard with --baseline was not refused:\n" + done.stderr)


globals()["case_" + CASE]()
print("ok:", CASE)

#!/usr/bin/env python3
"""The fleet workflows of docs/fleet/ run as written, one engine per ctest case:
    fleet_test.py ATTEST SOURCE_DIR github|gitlab|kubernetes
Each YAML file must parse; the shard and gate commands are taken from it (never a second copy
here) and run locally, every shard index with the variables that engine sets, on a cheap built-in
kernel and a few checks. The shards, merged by the YAML's own gate command (with the unsharded
certificate as its baseline), must equal the unsharded certificate but for timings."""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ATTEST, SOURCE, ENGINE = sys.argv[1:4]
FLEET = os.path.join(SOURCE, "docs", "fleet")
WORK = tempfile.mkdtemp(prefix="attest-fleet-")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)

# The cheap run the workflows' own kernel and flag variables are set to: one kernel, a few checks of
# several stages, so that every shard holds some (attest certify --list-checks names them).
TEST_VALUES = {
    "ATTEST_KERNELS": "--kernel loop",
    "ATTEST_FLAGS": "--budget quick --seed 7 --no-size-stages "
                    "--check golden,grid,matches_reference,rows_sum_to_one,output_in_convex_hull,"
                    "permutation_equivariance",
}


def fail(why):
    sys.exit("%s: %s" % (ENGINE, why))


def load_all(name):
    with open(os.path.join(FLEET, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def environment(variables):
    """The process environment with a variable set of the workflow, attest first on PATH."""
    env = dict(os.environ)
    env.update({k: str(v) for k, v in variables.items()})
    bin_dir = os.path.join(WORK, "bin")
    if not os.path.isdir(bin_dir):
        os.makedirs(bin_dir)
        os.symlink(os.path.abspath(ATTEST), os.path.join(bin_dir, "attest"))
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def overridden(variables, names):
    """The workflow's variables with the kernel and flags replaced by the cheap run's; each must be
    one the workflow defines, so that the test replaces its values, not its commands."""
    for name in names:
        if name not in variables:
            fail("the workflow does not define %s" % name)
    out = dict(variables)
    out.update({n: TEST_VALUES[n] for n in names if n in TEST_VALUES})
    return out


def run_shell(shell, script, variables, expect=0):
    done = subprocess.run(shell + [script], cwd=WORK, env=environment(variables), capture_output=True, text=True,
                          timeout=600)
    if done.returncode != expect:
        fail("exit %d, expected %d:\n%s\n%s%s" % (done.returncode, expect, script, done.stdout, done.stderr))
    return done


def unsharded(variables):
    """The unsharded certificate of the same kernel and flags, written where the gate's baseline is."""
    path = os.path.join(WORK, "unsharded.json")
    run_shell(["/bin/sh", "-c"], 'attest certify $ATTEST_KERNELS $ATTEST_FLAGS --out unsharded-out --json "%s"' % path,
              variables)
    return path


def untimed(path):
    """A certificate without what differs between runs of the same checks: when it was written,
    seconds per check."""
    document = json.load(open(path))
    document.pop("created")
    for kernel in document["kernels"]:
        for check in kernel["checks"]:
            check.pop("seconds")
    return document


def expect_same(merged, full, shards):
    if not os.path.exists(merged):
        fail("the gate wrote no merged certificate at " + merged)
    a, b = untimed(merged), untimed(full)
    if a != b:
        fail("the merged certificate differs from the unsharded one:\n%s\n%s" % (json.dumps(a)[:2000],
                                                                                 json.dumps(b)[:2000]))
    held = [len(json.load(open(s))["kernels"][0]["checks"]) for s in shards]
    if min(held) == 0:
        fail("a shard held no check (%r): the test would not show the split" % held)


def expression(text, context):
    """GitHub's ${{ ... }} expressions, the few the workflow uses; anything else fails the test."""
    def value(match):
        name = match.group(1).strip()
        if name not in context:
            fail("the test cannot evaluate ${{ %s }}" % name)
        return str(context[name])
    return re.sub(r"\$\{\{([^}]*)\}\}", value, str(text))


def steps_running(job, words):
    return [s for s in job["steps"] if "run" in s and any(w in s["run"] for w in words)]


def case_github():
    (workflow,) = load_all("github-actions.yml")
    certify, gate = workflow["jobs"]["certify"], workflow["jobs"]["gate"]
    if gate.get("needs") != "certify":
        fail("the gate does not wait for the shards")
    variables = overridden(workflow["env"], ["ATTEST_KERNELS", "ATTEST_FLAGS", "ATTEST_BASELINE"])
    variables["ATTEST_BASELINE"] = unsharded(variables)
    values = certify["strategy"]["matrix"]["shard"]
    for index, shard in enumerate(values):
        context = {"matrix.shard": shard, "strategy.job-total": len(values), "strategy.job-index": index}
        job_env = {k: expression(v, context) for k, v in certify["env"].items()}
        for step in steps_running(certify, ["attest certify"]):
            run_shell(["bash", "-e", "-c"], expression(step["run"], context), {**variables, **job_env})
    # upload-artifact then download-artifact (merge-multiple) hand the gate certificates/ as it is.
    summary = os.path.join(WORK, "summary.md")
    for step in steps_running(gate, ["attest merge", "attest report"]):
        run_shell(["bash", "-e", "-c"], step["run"], {**variables, "GITHUB_STEP_SUMMARY": summary})
    if "CERTIFIED" not in open(summary).read():
        fail("the job summary does not give the verdict")
    shards = [os.path.join(WORK, "certificates", "shard-%d.json" % s) for s in values]
    expect_same(os.path.join(WORK, "certificate.json"), variables["ATTEST_BASELINE"], shards)


def case_gitlab():
    (pipeline,) = load_all("gitlab-ci.yml")
    certify, gate = pipeline["certify"], pipeline["gate"]
    if pipeline["stages"].index(certify["stage"]) >= pipeline["stages"].index(gate["stage"]):
        fail("the gate's stage does not come after the shards'")
    variables = overridden(pipeline["variables"], ["ATTEST_KERNELS", "ATTEST_FLAGS", "ATTEST_BASELINE"])
    variables["ATTEST_BASELINE"] = unsharded(variables)
    total = certify["parallel"]
    for node in range(1, total + 1):  # GitLab numbers the parallel jobs from 1
        run_shell(["/bin/sh", "-e", "-c"], "\n".join(certify["script"]),
                  {**variables, "CI_NODE_INDEX": node, "CI_NODE_TOTAL": total})
    # A job of a later stage gets the artifacts of every job before it: certificates/ as written.
    run_shell(["/bin/sh", "-e", "-c"], "\n".join(gate["script"]), {**variables, "CI_NODE_TOTAL": 1})
    shards = [os.path.join(WORK, "certificates", "shard-%d.json" % n) for n in range(1, total + 1)]
    expect_same(os.path.join(WORK, "certificate.json"), variables["ATTEST_BASELINE"], shards)


def container_of(job):
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container, {e["name"]: e["value"] for e in container.get("env", [])}


def case_kubernetes():
    documents = load_all("kubernetes-certify.yaml")
    (job,) = [d for d in documents if d["kind"] == "Job"]
    (claim,) = [d for d in documents if d["kind"] == "PersistentVolumeClaim"]
    if job["spec"]["completionMode"] != "Indexed":
        fail("the certify Job is not Indexed")
    (gate_job,) = load_all("kubernetes-gate.yaml")
    container, declared = container_of(job)
    gate, gate_declared = container_of(gate_job)
    for pod, mounts in ((job, container), (gate_job, gate)):  # both on the one claim
        volumes = {v["name"]: v for v in pod["spec"]["template"]["spec"]["volumes"]}
        claims = [volumes[m["name"]].get("persistentVolumeClaim", {}).get("claimName") for m in mounts["volumeMounts"]]
        if claim["metadata"]["name"] not in claims:
            fail("%s does not mount the certificates' claim" % pod["metadata"]["name"])
    certificates = os.path.join(WORK, "certificates")  # stands for the claim's volume
    os.makedirs(certificates)
    variables = overridden(declared, ["ATTEST_KERNELS", "ATTEST_FLAGS", "CERTIFICATES"])
    variables["CERTIFICATES"] = certificates
    completions = job["spec"]["completions"]
    (script,) = container["args"]
    if "--shard auto/%d " % completions not in script:
        fail("the pods' --shard auto/N does not declare the Job's %d completions" % completions)
    for index in range(completions):  # Kubernetes numbers the completions from 0
        run_shell(container["command"], script, {**variables, "JOB_COMPLETION_INDEX": index})
    gate_variables = overridden(gate_declared, ["CERTIFICATES", "ATTEST_BASELINE"])
    gate_variables.update(CERTIFICATES=certificates, ATTEST_BASELINE=unsharded(variables))
    (gate_script,) = gate["args"]
    run_shell(gate["command"], gate_script, gate_variables)
    shards = [os.path.join(certificates, "shard-%d.json" % i) for i in range(completions)]
    expect_same(os.path.join(certificates, "certificate.json"), gate_variables["ATTEST_BASELINE"], shards)


{"github": case_github, "gitlab": case_gitlab, "kubernetes": case_kubernetes}[ENGINE]()

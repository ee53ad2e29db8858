#!/usr/bin/env python3
"""Re-runs a committed certificate of ONNX Runtime Web's WebGPU kernels (ci/results/webgpu_certificates/ort/
BUILD-EXPORT.json) at the quick budget on one check it failed (a full quick run of an ORT WebGPU kernel takes
minutes: each head width compiles its WGSL anew), and compares verdict and first failing check with the committed
ones, by ci/examples/onnxruntime/check_certificate.py's comparison (imported).

    check_ort_certificate.py ATTEST SOURCE_DIR BUILD EXPORT     (BUILD: webgpu, nosubgroups or jsep)

Exit 0 when both agree, 1 when they differ, 2 on bad input, 77 (ctest's skip) when chromium is absent or finds no
WebGPU adapter."""
import json
import os
import re
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "onnxruntime"))
from check_certificate import compare  # noqa: E402
from check_verdict import alive, no_adapter, tagged_processes  # noqa: E402

BUILDS = {"webgpu": "ci/examples/webgpu/ort_webgpu.mjs", "nosubgroups": "ci/examples/webgpu/ort_webgpu_nosubgroups.mjs",
          "jsep": "ci/examples/webgpu/ort_jsep.mjs"}
RESULTS = "ci/results/webgpu_certificates/ort"


def failing_check_flags(committed_path):
    """attest's options running one check the committed run failed: the size ladder's at the length of its failing
    case when it failed (one length: seconds), else the first failing check. None when it failed none (CERTIFIED)
    or cannot be read (compare() then says so)."""
    try:
        with open(committed_path) as f:
            checks = json.load(f)["kernels"][0]["checks"]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    failing = [c for c in checks if c.get("verdict") == "fail"]
    ladder = [c for c in failing if c.get("stage") == "ladder"]
    if ladder:
        length = re.search(r"\bTk=(\d+)", ladder[0].get("failing_case", ""))
        return ["--check", ladder[0]["check"]] + (["--lengths", length.group(1)] if length else [])
    return ["--no-size-stages", "--check", failing[0]["check"]] if failing else None


def main(argv):
    if len(argv) != 5 or argv[3] not in BUILDS:
        print("usage: check_ort_certificate.py ATTEST SOURCE_DIR webgpu|nosubgroups|jsep EXPORT", file=sys.stderr)
        return 2
    attest, source, build, export = argv[1], os.path.abspath(argv[2]), argv[3], argv[4]
    committed_path = os.path.join(source, RESULTS, "%s-%s.json" % (build, export))
    flags = failing_check_flags(committed_path)
    if flags is None and os.path.exists(committed_path):
        print("check_ort_certificate: %s is CERTIFIED: a quick re-run of every check is too slow for a ctest"
              % committed_path, file=sys.stderr)
        return 2
    reason = no_adapter(source)
    if reason:
        print("SKIP: %s" % reason)
        return 77
    command = [attest, "certify", "--kernel-cmd", "node js/attest-kernel/serve.js %s:%s" % (BUILDS[build], export),
               "--budget", "quick", "--seed", "1", "--no-shrink"] + (flags or [])
    tag = "attest-webgpu-test-%s" % uuid.uuid4().hex  # inherited by everything the run starts
    os.environ["ATTEST_WEBGPU_TEST_TAG"] = tag
    code = compare(committed_path, command, source, "%s (%s)" % (export, build))
    deadline = time.monotonic() + 10  # a killed browser may take a moment to go
    left = [pid for pid in tagged_processes(tag) if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [pid for pid in left if alive(pid)]
    if left:
        print("processes left behind: %s" % left)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Certifies one WebGPU kernel through the browser host at the quick budget (no size stages) and checks
its verdict, then that no process it started (node, chromium and its GPU and renderer processes) is left.

    check_verdict.py ATTEST SOURCE_DIR MODULE:EXPORT EXPECTED [ATTEST_OPTION...]

EXPECTED is CERTIFIED, or NOT CERTIFIED optionally followed by ': TEXT' that the report must contain
(e.g. 'NOT CERTIFIED: hang'). Exit 0 when all holds, 1 when not, 2 on bad input, 77 (ctest's skip)
when chromium is absent or finds no WebGPU adapter (browser.js --probe exits 2)."""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import uuid

SKIP = 77
HOST = "js/attest-kernel/browser.js"


def tagged_processes(tag):
    """Process ids whose environment carries tag: everything the certification started inherits it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as f:
                if tag.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            pass
    return found


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def no_adapter(source):
    """Why the WebGPU tests cannot run here (no chromium, or it finds no adapter), or None when they can.
    A probe failing otherwise raises: that is a failure, not a skip."""
    if not os.path.exists("/usr/bin/chromium") and "ATTEST_CHROMIUM" not in os.environ:
        return "no /usr/bin/chromium (ci/install-deps.sh installs it): the WebGPU tests need a browser"
    probe = subprocess.run(["node", HOST, "--probe"], cwd=source, capture_output=True, text=True, timeout=120)
    if probe.returncode == 2:
        return "chromium cannot serve WebGPU here: %s" % probe.stderr.strip()
    if probe.returncode != 0:
        raise RuntimeError("browser.js --probe exited %d:\n%s" % (probe.returncode, probe.stderr[-2000:]))
    return None


def main(argv):
    if len(argv) < 5 or not (argv[4] == "CERTIFIED" or argv[4].startswith("NOT CERTIFIED")):
        print("usage: check_verdict.py ATTEST SOURCE_DIR MODULE:EXPORT CERTIFIED|'NOT CERTIFIED[: TEXT]' [OPTION...]",
              file=sys.stderr)
        return 2
    attest, source, kernel, expected, options = argv[1], os.path.abspath(argv[2]), argv[3], argv[4], argv[5:]
    reason = no_adapter(source)
    if reason:
        print("SKIP: %s" % reason)
        return SKIP
    tag = "attest-webgpu-test-%s" % uuid.uuid4().hex
    env = dict(os.environ, ATTEST_WEBGPU_TEST_TAG=tag)
    with tempfile.TemporaryDirectory() as scratch:
        certificate = os.path.join(scratch, "certificate.json")
        command = [attest, "certify", "--kernel-cmd", "node %s %s" % (HOST, kernel), "--budget", "quick",
                   "--no-size-stages", "--seed", "1", "--out", os.path.join(scratch, "out"), "--json",
                   certificate] + options
        started = time.monotonic()
        run = subprocess.run(command, cwd=source, capture_output=True, text=True, env=env)
        seconds = time.monotonic() - started
        if run.returncode not in (0, 1) or not os.path.exists(certificate):
            print("attest exited %d:\n%s" % (run.returncode, run.stderr[-3000:]))
            return 1
        with open(certificate) as f:
            kernel_result = json.load(f)["kernels"][0]
    left = [pid for pid in tagged_processes(tag) if alive(pid)]
    deadline = time.monotonic() + 10
    while left and time.monotonic() < deadline:  # a killed browser may take a moment to go
        time.sleep(0.2)
        left = [pid for pid in left if alive(pid)]
    verdict = "CERTIFIED" if kernel_result["certified"] else "NOT CERTIFIED"
    failing = [c for c in kernel_result["checks"] if c.get("verdict") == "fail"]
    first = "%s: %s" % (failing[0]["check"], failing[0].get("first_failure", "")) if failing else "none"
    print("%s: %s in %.0f s; first failing check %s" % (kernel_result["name"], verdict, seconds, first[:300]))
    ok = True
    want, _, text = expected.partition(": ")
    if verdict != want:
        print("expected %s: %s" % (want, shlex.quote(" ".join(command))))
        ok = False
    if text and text not in run.stdout + run.stderr:
        print("expected the report to say %r; it ends:\n%s" % (text, run.stdout[-2000:]))
        ok = False
    if left:
        print("processes left behind: %s" % left)
        for pid in left:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

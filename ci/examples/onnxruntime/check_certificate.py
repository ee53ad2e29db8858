#!/usr/bin/env python3
"""Re-runs one committed ONNX Runtime certificate at the quick budget (no size stages) and compares its verdict and
its first failing check with the committed ones (ci/results/onnxruntime_certificates/EXPORT.json).

    check_certificate.py ATTEST SOURCE_DIR EXPORT

Exit 0 when both agree, 1 when they differ (both printed), 2 on bad input."""
import json
import os
import subprocess
import sys
import tempfile

KERNELS = "ci/examples/onnxruntime/kernels.mjs"


def summary(certificate):
    """(certified, first failing check or None) of a certificate's single kernel."""
    kernel = certificate["kernels"][0]
    failing = [c["check"] for c in kernel["checks"] if c.get("verdict") == "fail"]
    return kernel["certified"], failing[0] if failing else None


def describe(s):
    return "%s, first failing check %s" % ("CERTIFIED" if s[0] else "NOT CERTIFIED", s[1] or "none")


def compare(committed_path, command, cwd, label):
    """Runs `command` (attest certify at quick, with --json in a scratch folder appended) in `cwd` and compares its
    summary with the certificate at `committed_path`; the exit code of main. Shared with ci/examples/ggml."""
    try:
        with open(committed_path) as f:
            committed = summary(json.load(f))
    except (OSError, ValueError, KeyError, IndexError) as e:
        print("check_certificate: cannot read %s: %s" % (committed_path, e), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        certificate = os.path.join(scratch, "certificate.json")
        run = subprocess.run(command + ["--out", os.path.join(scratch, "out"), "--json", certificate], cwd=cwd,
                             capture_output=True, text=True)
        if run.returncode not in (0, 1):
            print("attest exited %d:\n%s" % (run.returncode, run.stderr[-3000:]))
            return 1
        with open(certificate) as f:
            now = summary(json.load(f))
    print("%s: committed (default budget) %s; now (quick) %s" % (label, describe(committed), describe(now)))
    return 0 if now == committed else 1


def main(argv):
    if len(argv) != 4:
        print("usage: check_certificate.py ATTEST SOURCE_DIR EXPORT", file=sys.stderr)
        return 2
    attest, source, export = argv[1], os.path.abspath(argv[2]), argv[3]
    committed_path = os.path.join(source, "ci/results/onnxruntime_certificates", export + ".json")
    command = [attest, "certify", "--kernel-cmd", "node js/attest-kernel/serve.js %s:%s" % (KERNELS, export),
               "--budget", "quick", "--no-size-stages", "--seed", "1"]
    return compare(committed_path, command, source, export)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

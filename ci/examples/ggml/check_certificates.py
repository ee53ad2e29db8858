#!/usr/bin/env python3
"""Re-runs one committed ggml certificate (ci/results/ggml_certificates/PLUGIN.json) at the quick budget
(no size stages) on the plugin built here, and compares its verdict and first failing check with the
committed ones: ONNX Runtime's check (ci/examples/onnxruntime/check_certificate.py) for a C plugin.

    check_certificates.py ATTEST SOURCE_DIR BUILD_DIR PLUGIN

Exit 0 when both agree, 1 when they differ (both printed), 2 on bad input, 77 (skipped) when the npm
packages it needs are not installed."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnxruntime"))
from check_certificate import summary  # noqa: E402  (the same reading of a certificate)

INSTALLED = "ci/examples/ggml/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"


def describe(s):
    return "%s, first failing check %s" % ("CERTIFIED" if s[0] else "NOT CERTIFIED", s[1] or "none")


def main(argv):
    if len(argv) != 5:
        print("usage: check_certificates.py ATTEST SOURCE_DIR BUILD_DIR PLUGIN", file=sys.stderr)
        return 2
    attest, source, build, plugin = argv[1], os.path.abspath(argv[2]), argv[3], argv[4]
    if not os.path.exists(os.path.join(source, INSTALLED)):
        print("skipped: ggml's npm packages are not installed (bash ci/install-npm-deps.sh, then reconfigure)")
        return 77
    committed_path = os.path.join(source, "ci/results/ggml_certificates", plugin + ".json")
    library = os.path.join(build, "lib%s.so" % plugin)
    try:
        with open(committed_path) as f:
            committed = summary(json.load(f))
    except (OSError, ValueError, KeyError, IndexError) as e:
        print("check_certificates: cannot read %s: %s" % (committed_path, e), file=sys.stderr)
        return 2
    if not os.path.exists(library):
        print("check_certificates: %s is not built" % library, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        certificate = os.path.join(scratch, "certificate.json")
        command = [attest, "certify", "--kernel", library, "--budget", "quick", "--no-size-stages", "--seed", "1",
                   "--out", os.path.join(scratch, "out"), "--json", certificate]
        run = subprocess.run(command, cwd=source, capture_output=True, text=True)
        if run.returncode not in (0, 1):
            print("attest exited %d:\n%s" % (run.returncode, run.stderr[-3000:]))
            return 1
        with open(certificate) as f:
            now = summary(json.load(f))
    print("%s: committed (default budget) %s; now (quick) %s" % (plugin, describe(committed), describe(now)))
    return 0 if now == committed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

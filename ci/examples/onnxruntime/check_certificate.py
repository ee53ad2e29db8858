#!/usr/bin/env python3
"""Re-runs one committed ONNX Runtime certificate at the quick budget (no size stages) and compares its verdict and
its first failing check with the committed ones (ci/results/onnxruntime_certificates/EXPORT.json for the native
build, .../wasm/EXPORT.json for onnxruntime-web's wasm build).

    check_certificate.py ATTEST SOURCE_DIR EXPORT [native|wasm]

Exit 0 when both agree, 1 when they differ (both printed), 2 on bad input."""
import json
import os
import subprocess
import sys
import tempfile

# Each build: the module serving its kernels, the folder of its committed certificates.
BUILDS = {"native": ("ci/examples/onnxruntime/kernels.mjs", "ci/results/onnxruntime_certificates"),
          "wasm": ("ci/examples/onnxruntime/kernels_wasm.mjs", "ci/results/onnxruntime_certificates/wasm")}


def summary(certificate):
    """(certified, [failing checks in report order]) of a certificate's single kernel."""
    kernel = certificate["kernels"][0]
    return kernel["certified"], [c["check"] for c in kernel["checks"] if c.get("verdict") == "fail"]


def describe(s):
    return "%s, first failing check %s" % ("CERTIFIED" if s[0] else "NOT CERTIFIED", s[1][0] if s[1] else "none")


def agree(committed, now):
    """The quick run agrees with the committed one: the same verdict, and a failing quick run fails first on a check
    the committed run failed too (its first failing check may be one quick does not run, e.g. the long stage's)."""
    return committed[0] == now[0] and (now[0] or (bool(now[1]) and now[1][0] in committed[1]))


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
    return 0 if agree(committed, now) else 1


def main(argv):
    if len(argv) not in (4, 5) or (len(argv) == 5 and argv[4] not in BUILDS):
        print("usage: check_certificate.py ATTEST SOURCE_DIR EXPORT [native|wasm]", file=sys.stderr)
        return 2
    attest, source, export = argv[1], os.path.abspath(argv[2]), argv[3]
    build = argv[4] if len(argv) == 5 else "native"
    kernels, results = BUILDS[build]
    committed_path = os.path.join(source, results, export + ".json")
    command = [attest, "certify", "--kernel-cmd", "node js/attest-kernel/serve.js %s:%s" % (kernels, export),
               "--budget", "quick", "--no-size-stages", "--seed", "1"]
    return compare(committed_path, command, source, "%s (%s)" % (export, build))


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Re-runs one committed ggml certificate (ci/results/ggml_certificates/PLUGIN.json) at the quick budget
(no size stages) on the plugin built here, and compares its verdict and first failing check with the
committed ones: ONNX Runtime's check (ci/examples/onnxruntime/check_certificate.py) for a C plugin.

    check_certificates.py ATTEST SOURCE_DIR BUILD_DIR PLUGIN

Exit 0 when both agree, 1 when they differ (both printed), 2 on bad input, 77 (skipped) when the npm
packages it needs are not installed."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnxruntime"))
from check_certificate import compare  # noqa: E402  (the same comparison, for a C plugin)

INSTALLED = "ci/examples/ggml/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"


def main(argv):
    if len(argv) != 5:
        print("usage: check_certificates.py ATTEST SOURCE_DIR BUILD_DIR PLUGIN", file=sys.stderr)
        return 2
    attest, source, build, plugin = argv[1], os.path.abspath(argv[2]), argv[3], argv[4]
    if not os.path.exists(os.path.join(source, INSTALLED)):
        print("skipped: ggml's npm packages are not installed (bash ci/install-npm-deps.sh, then reconfigure)")
        return 77
    library = os.path.join(build, "lib%s.so" % plugin)
    if not os.path.exists(library):
        print("check_certificates: %s is not built" % library, file=sys.stderr)
        return 2
    command = [attest, "certify", "--kernel", library, "--budget", "quick", "--no-size-stages", "--seed", "1"]
    return compare(os.path.join(source, "ci/results/ggml_certificates", plugin + ".json"), command, source, plugin)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

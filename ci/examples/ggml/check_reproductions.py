#!/usr/bin/env python3
"""Runs every reproduction ci/results/ggml_certificates/README.md shows (a line "`repro/NAME.c`:"
followed by a ``` block) from the build folder, where CMake built it as NAME, and checks it prints
that block exactly.

    check_reproductions.py SOURCE_DIR BUILD_DIR

Exit 0 when every one does, 1 naming each that differs, 2 on bad input, 77 (skipped) when ggml's
npm packages are not installed."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnxruntime"))
from check_reproductions import check_shown  # noqa: E402  (the same comparison, for C programs)

SHOWN = re.compile(r"`repro/([a-z0-9_]+)\.c`:\n\n```\n(.*?)```", re.S)


def main(argv):
    if len(argv) != 3:
        print("usage: check_reproductions.py SOURCE_DIR BUILD_DIR", file=sys.stderr)
        return 2
    source, build = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    if not os.path.isdir(os.path.join(source, "ci/examples/ggml/node_modules/@node-llama-cpp/linux-x64")):
        print("skipped: ggml's npm packages are not installed (bash ci/install-npm-deps.sh, then reconfigure)")
        return 77
    run = lambda name: subprocess.run([os.path.join(build, name)], capture_output=True, text=True, timeout=60)
    return check_shown(os.path.join(source, "ci/results/ggml_certificates/README.md"), SHOWN, run,
                       lambda name: "repro/%s.c" % name)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

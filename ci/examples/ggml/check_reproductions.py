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

SHOWN = re.compile(r"`repro/([a-z0-9_]+)\.c`:\n\n```\n(.*?)```", re.S)


def main(argv):
    if len(argv) != 3:
        print("usage: check_reproductions.py SOURCE_DIR BUILD_DIR", file=sys.stderr)
        return 2
    source, build = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    if not os.path.isdir(os.path.join(source, "ci/examples/ggml/node_modules/@node-llama-cpp/linux-x64")):
        print("skipped: ggml's npm packages are not installed (bash ci/install-npm-deps.sh, then reconfigure)")
        return 77
    try:
        with open(os.path.join(source, "ci/results/ggml_certificates/README.md")) as f:
            shown = SHOWN.findall(f.read())
    except OSError as e:
        print("check_reproductions: %s" % e, file=sys.stderr)
        return 2
    if not shown:
        print("check_reproductions: the README shows no reproduction", file=sys.stderr)
        return 2
    failures = 0
    for name, expected in shown:
        run = subprocess.run([os.path.join(build, name)], capture_output=True, text=True, timeout=60)
        if run.returncode != 0 or run.stdout != expected:
            failures += 1
            print("DIFFERS: repro/%s.c (exit %d)\n--- README\n%s--- printed\n%s%s" % (name, run.returncode, expected,
                                                                                  run.stdout, run.stderr[-1000:]))
        else:
            print("ok: repro/%s.c prints what the README shows" % name)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

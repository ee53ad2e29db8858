#!/usr/bin/env python3
"""Runs every reproduction ci/results/onnxruntime_certificates/README.md shows (a line
"`node repro/NAME.mjs`:" followed by a ``` block) and checks it prints that block exactly.

    check_reproductions.py SOURCE_DIR

Exit 0 when every one does, 1 naming each that differs, 2 on bad input."""
import os
import re
import subprocess
import sys

SHOWN = re.compile(r"`node (repro/[a-z_]+\.mjs)`:\n\n```\n(.*?)```", re.S)


def main(argv):
    if len(argv) != 2:
        print("usage: check_reproductions.py SOURCE_DIR", file=sys.stderr)
        return 2
    source = os.path.abspath(argv[1])
    example = os.path.join(source, "ci/examples/onnxruntime")
    try:
        with open(os.path.join(source, "ci/results/onnxruntime_certificates/README.md")) as f:
            shown = SHOWN.findall(f.read())
    except OSError as e:
        print("check_reproductions: %s" % e, file=sys.stderr)
        return 2
    if not shown:
        print("check_reproductions: the README shows no reproduction", file=sys.stderr)
        return 2
    failures = 0
    for script, expected in shown:
        run = subprocess.run(["node", script], cwd=example, capture_output=True, text=True, timeout=120)
        if run.returncode != 0 or run.stdout != expected:
            failures += 1
            print("DIFFERS: node %s (exit %d)\n--- README\n%s--- printed\n%s%s" % (script, run.returncode, expected,
                                                                              run.stdout, run.stderr[-1000:]))
        else:
            print("ok: node %s prints what the README shows" % script)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Runs every reproduction ci/results/onnxruntime_certificates/README.md shows (a line
"`node repro/NAME.mjs`:" followed by a ``` block) and checks it prints that block exactly.

    check_reproductions.py SOURCE_DIR

Exit 0 when every one does, 1 naming each that differs, 2 on bad input."""
import os
import re
import subprocess
import sys
import tempfile

SHOWN = re.compile(r"`node (repro/[a-z0-9_]+\.mjs)`:\n\n```\n(.*?)```", re.S)


def check_shown(readme, shown_pattern, run, label):
    """Runs each reproduction `readme` shows (shown_pattern's groups: its name, the block it prints) with
    run(name), a CompletedProcess, and compares; the exit code of main. Shared with ci/examples/ggml."""
    try:
        with open(readme) as f:
            shown = shown_pattern.findall(f.read())
    except OSError as e:
        print("check_reproductions: %s" % e, file=sys.stderr)
        return 2
    if not shown:
        print("check_reproductions: the README shows no reproduction", file=sys.stderr)
        return 2
    failures = 0
    for name, expected in shown:
        result = run(name)
        if result.returncode != 0 or result.stdout != expected:
            failures += 1
            print("DIFFERS: %s (exit %d)\n--- README\n%s--- printed\n%s%s" % (label(name), result.returncode, expected,
                                                                              result.stdout, result.stderr[-1000:]))
        else:
            print("ok: %s prints what the README shows" % label(name))
    return 1 if failures else 0


def main(argv):
    if len(argv) != 2:
        print("usage: check_reproductions.py SOURCE_DIR", file=sys.stderr)
        return 2
    source = os.path.abspath(argv[1])
    example = os.path.join(source, "ci/examples/onnxruntime")

    def run(script):
        # ONNX Runtime leaves a .ses file and empty mat-debug-PID.log files in TMPDIR: a directory of the
        # script's own, removed after it.
        with tempfile.TemporaryDirectory() as tmp:
            return subprocess.run(["node", script], cwd=example, capture_output=True, text=True, timeout=120,
                                  env=dict(os.environ, TMPDIR=tmp))
    return check_shown(os.path.join(source, "ci/results/onnxruntime_certificates/README.md"), SHOWN, run,
                       lambda script: "node " + script)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

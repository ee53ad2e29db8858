#!/usr/bin/env python3
"""Every Python file git tracks passes pycodestyle at 120 columns (the C++ column limit), one line per
problem.

usage: python_style_test.py SOURCE_DIR
Exit 0: clean; 1: problems (named); 2: bad usage; 77: no pycodestyle or no git checkout.

pycodestyle's default ignores stay ignored (line breaks around binary operators, one-line defs,
continuation-line details it leaves to taste), and so does E731: a named lambda is how these
scripts bind a one-line helper."""
import os
import shutil
import subprocess
import sys

IGNORED = "E121,E123,E126,E226,E24,E704,W503,W504,E731"


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: python_style_test.py SOURCE_DIR", file=sys.stderr)
        return 2
    source = sys.argv[1]
    if not shutil.which("pycodestyle"):
        print("python_style_test: skipped, no pycodestyle")
        return 77
    listed = subprocess.run(["git", "-C", source, "ls-files", "-z", "*.py"], capture_output=True)
    if listed.returncode != 0:
        print("python_style_test: skipped, %s is not a git checkout" % source)
        return 77
    files = [f for f in listed.stdout.decode().split("\0") if f]
    run = subprocess.run(["pycodestyle", "--max-line-length=120", "--ignore=" + IGNORED] + files, cwd=source,
                         capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    print("python_style_test: %d Python files, %s" % (len(files), "clean" if run.returncode == 0 else "problems above"))
    return 0 if run.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Every C/C++ file of the repository is formatted as .clang-format says: clang-format --dry-run over
the files git tracks, one line per file that differs.

usage: format_test.py SOURCE_DIR [CLANG_FORMAT]
Exit 0: all formatted; 1: files differ (named); 2: bad usage; 77: no clang-format or no git checkout
(a source tarball has nothing to compare against).
"""
import os
import shutil
import subprocess
import sys

EXTENSIONS = (".c", ".cc", ".cpp", ".h", ".hpp")


def main():
    if len(sys.argv) not in (2, 3) or not os.path.isdir(sys.argv[1]):
        print("usage: format_test.py SOURCE_DIR [CLANG_FORMAT]", file=sys.stderr)
        return 2
    source = sys.argv[1]
    tool = sys.argv[2] if len(sys.argv) == 3 else (shutil.which("clang-format-14") or shutil.which("clang-format"))
    if not tool or not shutil.which(tool):
        print("format_test: skipped, no clang-format")
        return 77
    listed = subprocess.run(["git", "-C", source, "ls-files", "-z"], capture_output=True)
    if listed.returncode != 0:
        print("format_test: skipped, %s is not a git checkout" % source)
        return 77
    files = [f for f in listed.stdout.decode().split("\0") if f.endswith(EXTENSIONS)]
    differing = []
    # Batches keep the command line short; --dry-run -Werror names the first difference per file.
    for start in range(0, len(files), 64):
        batch = files[start:start + 64]
        run = subprocess.run([tool, "--dry-run", "-Werror"] + batch, cwd=source, capture_output=True, text=True)
        if run.returncode != 0:
            differing += [f for f in batch if subprocess.run([tool, "--dry-run", "-Werror", f], cwd=source,
                                                             capture_output=True).returncode != 0]
    for f in differing:
        print("%s: not formatted as .clang-format says (run: git clang-format or clang-format -i %s)" % (f, f))
    print("format_test: %d of %d C/C++ files formatted" % (len(files) - len(differing), len(files)))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())

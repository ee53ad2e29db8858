#!/usr/bin/env python3
"""ci/clang-tidy.sh can fail: in a scratch git repository holding the script and the repo's
.clang-tidy, a commit of clean code passes, and a commit planting a bugprone finding (strcmp's result
used as a truth value) and a 151-line function fails naming both checks; a
commit changing only a header is checked through a source that includes it (b.cpp, itself clean).

usage: clang_tidy_test.py SOURCE_DIR
Exit 0: as expected; 1: not; 2: bad usage; 77: no clang-tidy-14.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CLEAN = "int twice(int x) { return 2 * x; }\n"
COMPARE = ("#include <cstring>\n"
           "int differ(const char* a, const char* b) { if (std::strcmp(a, b)) return 1; return 0; }\n")
LONG = "int long_one(int x) {\n" + "  x += 1;\n" * 150 + "  return x;\n}\n"


def git(tree, *args):
    subprocess.run(["git", "-C", tree, "-c", "user.name=t", "-c", "user.email=t@t"] + list(args),
                   check=True, capture_output=True)


def write(tree, name, text):
    path = os.path.join(tree, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def tidy(tree):
    done = subprocess.run(["bash", "ci/clang-tidy.sh", "build/tidy"], cwd=tree, capture_output=True, text=True,
                          timeout=120)
    return done.returncode, done.stdout + done.stderr


def main():
    if len(sys.argv) != 2 or not os.path.isfile(os.path.join(sys.argv[1], "ci/clang-tidy.sh")):
        print("usage: clang_tidy_test.py SOURCE_DIR (a tree with ci/clang-tidy.sh)", file=sys.stderr)
        return 2
    if not shutil.which("clang-tidy-14"):
        print("clang_tidy_test: skipped, no clang-tidy-14")
        return 77
    source = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tree:
        os.makedirs(os.path.join(tree, "ci"))
        shutil.copy(os.path.join(source, "ci/clang-tidy.sh"), os.path.join(tree, "ci"))
        shutil.copy(os.path.join(source, ".clang-tidy"), tree)
        units = ["impl/a.cpp", "impl/b.cpp"]
        db = [{"directory": tree, "file": os.path.join(tree, u),
               "command": f"g++ -std=c++20 -I{tree}/impl/include -c {os.path.join(tree, u)}"} for u in units]
        write(tree, "build/tidy/compile_commands.json", json.dumps(db))
        write(tree, ".gitignore", "build/\n")
        write(tree, "impl/include/planted.h", "#pragma once\n")
        write(tree, "impl/a.cpp", CLEAN)
        write(tree, "impl/b.cpp", "#include \"planted.h\"\n" + CLEAN.replace("twice", "thrice"))
        git(tree, "init", "-q")
        git(tree, "add", ".")
        git(tree, "commit", "-q", "-m", "base")
        write(tree, "impl/a.cpp", CLEAN + "int four(int x) { return 4 * x; }\n")
        git(tree, "commit", "-q", "-am", "clean change")
        code, out = tidy(tree)
        if code != 0 or "1 translation unit(s) clean" not in out:
            failures.append(f"a clean commit: expected exit 0, one unit clean; got {code}:\n{out}")
        write(tree, "impl/a.cpp", COMPARE + LONG)
        git(tree, "commit", "-q", "-am", "planted findings")
        code, out = tidy(tree)
        for check in ("bugprone-suspicious-string-compare", "readability-function-size"):
            if code != 1 or f"[{check}" not in out:
                failures.append(f"planted {check}: expected exit 1 naming it; got {code}:\n{out}")
        write(tree, "impl/include/planted.h", "#pragma once\n#include <cstring>\n"
              "inline int same(const char* a, const char* b) { if (std::strcmp(a, b)) return 0; return 1; }\n")
        git(tree, "commit", "-q", "-am", "a header only")
        code, out = tidy(tree)
        if code != 1 or "planted.h" not in out or "bugprone-suspicious-string-compare" not in out:
            failures.append(f"a finding in a changed header: expected exit 1 naming it; got {code}:\n{out}")
    for f in failures:
        print(f)
    if failures:
        return 1
    print("clang-tidy.sh: a clean commit passes; planted findings fail (strcmp as a truth value, a long function,"
          " a header)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

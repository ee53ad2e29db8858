#!/usr/bin/env python3
"""The layering check can fail: on a copy of the tree's sources it passes or fails as the tree
does, and with one upward include added to the problem model (the lowest layer) it fails naming
that file and line; a header put directly under attest/ and included as "attest/x.h" (no layer
prefix) fails too.

usage: layering_upward_test.py SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "layering_test.py")
VICTIM = "impl/model/src/problem.cpp"
UPWARD = '#include "attest/properties/harness.h"\n'  # properties/include: two layers up
UNPREFIXED = "impl/model/include/attest/unprefixed.h"  # a model header without attest/model/


def run(tree):
    return subprocess.run([sys.executable, CHECK, tree], capture_output=True, text=True, timeout=60)


def main():
    if len(sys.argv) != 2 or not os.path.isfile(os.path.join(sys.argv[1], VICTIM)):
        print(f"usage: layering_upward_test.py SOURCE_DIR (a tree with {VICTIM})", file=sys.stderr)
        return 2
    source = sys.argv[1]
    with tempfile.TemporaryDirectory() as scratch:
        tree = os.path.join(scratch, "tree")
        ignore = shutil.ignore_patterns(".git", "build*", "python", "js", "corpus", "node_modules")
        shutil.copytree(source, tree, ignore=ignore)
        clean = run(tree)
        original = run(source)
        if clean.returncode != original.returncode:
            print(f"the copy gives {clean.returncode}, the tree {original.returncode}:\n{clean.stdout}")
            return 1
        path = os.path.join(tree, VICTIM)
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        lines.insert(1, UPWARD)  # line 2, after the file's own header
        lines.insert(2, '#include "attest/unprefixed.h"\n')
        with open(os.path.join(tree, UNPREFIXED), "w", encoding="utf-8") as f:
            f.write("#pragma once\n")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(lines)
        bad = run(tree)
    expected = (f"{VICTIM}:2: includes properties/include/attest/properties/harness.h: "
                "layer impl/model may not depend on properties")
    unprefixed = f'{VICTIM}:3: "attest/unprefixed.h" names no layer: {UNPREFIXED} is in impl/model'
    got = bad.stdout.splitlines()
    if bad.returncode != 1 or expected not in got or not any(g.startswith(unprefixed) for g in got):
        print(f"expected exit 1 and the lines\n  {expected}\n  {unprefixed}...\n"
              f"got exit {bad.returncode}:\n{bad.stdout}{bad.stderr}")
        return 1
    print(f"upward include refused: {expected}\nunprefixed include refused: {unprefixed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Give each layer's headers its own include prefix (issue 42, point 3): a header of
impl/kernels/include/attest/ moves (git mv) to impl/kernels/include/attest/kernels/, and every
"attest/kernel.h" in the tracked files becomes "attest/kernels/kernel.h"; the same for model/,
mutants/, abi/, reference/ and properties/. The public entry points stay where users include them:
attest/attest_abi.h (the C ABI a plugin includes) and ci/api's attest/certify_api.h, attest/gtest.h.

Idempotent, so it can be re-run after merging branches that still use the old names: it moves
whatever header is still at the old place and rewrites whatever old name is still written.
CHANGELOG.md and ci/results/ (records of the past) and this script are left as they are. The C/C++ files it
rewrites are run through clang-format-14, as an include's new name can change the sorted order.

usage: layer_include_prefixes.py [SOURCE_DIR]   (default: the repository this script is in)
Exit 0: done (what it did is printed); 1: a name is in two layers; 2: bad usage.
"""
import os
import re
import shutil
import subprocess
import sys

# Folder whose include/attest/ holds its headers, and the prefix they move under.
LAYERS = {
    "impl/model": "model",
    "impl/kernels": "kernels",
    "impl/mutants": "mutants",
    "impl/abi": "abi",
    "reference": "reference",
    "properties": "properties",
}
# Headers that stay directly under attest/: the installed public entry points.
PUBLIC = {"impl/abi": {"attest_abi.h"}}
UNTOUCHED = ("CHANGELOG.md", "ci/results/", "python/tools/layer_include_prefixes.py")
CPP = (".c", ".cc", ".cpp", ".h", ".hpp")


def git(root, *args):
    return subprocess.run(["git", "-C", root] + list(args), check=True, capture_output=True, text=True).stdout


def tracked(root):
    return [f for f in git(root, "ls-files", "-z").split("\0") if f]


def move_headers(root, files):
    """git mv each header still directly under a layer's include/attest/; the moves made."""
    moves = []
    for folder, prefix in LAYERS.items():
        base = f"{folder}/include/attest/"
        for f in files:
            if not f.startswith(base) or f[len(base):].startswith(prefix + "/"):
                continue
            rest = f[len(base):]
            if rest in PUBLIC.get(folder, set()):
                continue
            target = f"{base}{prefix}/{rest}"
            os.makedirs(os.path.dirname(os.path.join(root, target)), exist_ok=True)
            git(root, "mv", f, target)
            moves.append((f, target))
    return moves


def renames(root, files):
    """Each name under a layer prefix (first path part: a header or a folder) -> its prefix."""
    names = {}
    for folder, prefix in LAYERS.items():
        base = f"{folder}/include/attest/{prefix}/"
        for f in files:
            if f.startswith(base):
                name = f[len(base):].split("/")[0]
                if names.get(name, prefix) != prefix:
                    raise ValueError(f"attest/{name} is in two layers: {names[name]} and {prefix}")
                names[name] = prefix
    return names


def rewrite(root, files, names):
    """Replace attest/NAME by attest/PREFIX/NAME in every tracked text file; the files changed."""
    if not names:
        return []
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    # Not after a word character (libattest/), not followed by one (attest/kernel.hpp is not kernel.h).
    pattern = re.compile(r"(?<![\w.-])attest/(" + alternatives + r")(?![\w.-])")
    changed = []
    for f in files:
        if f.startswith(UNTOUCHED) or not os.path.isfile(os.path.join(root, f)):
            continue
        path = os.path.join(root, f)
        try:
            with open(path, encoding="utf-8") as text:
                before = text.read()
        except UnicodeDecodeError:
            continue  # binary
        after = pattern.sub(lambda m: f"attest/{names[m.group(1)]}/{m.group(1)}", before)
        if after != before:
            with open(path, "w", encoding="utf-8") as text:
                text.write(after)
            changed.append(f)
    return changed


def main():
    if len(sys.argv) > 2:
        print("usage: layer_include_prefixes.py [SOURCE_DIR]", file=sys.stderr)
        return 2
    root = sys.argv[1] if len(sys.argv) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
    root = os.path.normpath(root)
    if not os.path.isdir(os.path.join(root, "impl/model/include")):
        print(f"layer_include_prefixes: {root} is not an attest source tree", file=sys.stderr)
        return 2
    moves = move_headers(root, tracked(root))
    files = tracked(root)
    try:
        names = renames(root, files)
    except ValueError as error:
        print(f"layer_include_prefixes: {error}", file=sys.stderr)
        return 1
    changed = rewrite(root, files, names)
    sources = [f for f in changed if f.endswith(CPP)]
    tool = shutil.which("clang-format-14")
    if sources and tool:
        subprocess.run([tool, "-i"] + sources, cwd=root, check=True)
    elif sources:
        print("layer_include_prefixes: no clang-format-14; run git clang-format for the include order")
    print(f"{len(moves)} header(s) moved, {len(changed)} file(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())

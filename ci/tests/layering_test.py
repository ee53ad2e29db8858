#!/usr/bin/env python3
"""The layers of docs/design.md#layers, checked: every quoted include ("attest/x.h", "x.h", and
<attest/x.h>) of every C/C++ file is resolved to the file it names, and an include that reaches a
folder its own folder may not depend on fails, naming the file and line. An "attest/..." include
must name its layer: attest/model/, attest/kernels/, ... (PREFIXES), or be one of the public
entry points that stay directly under attest/ (PUBLIC).

usage: layering_test.py SOURCE_DIR
Exit 0: no upward include; 1: upward (or unresolvable) includes, one line each; 2: bad usage.
"""
import os
import re
import sys

# Each folder and the folders it may include directly; what those may include it may include too.
# A file belongs to the longest folder of this table its path starts with.
LAYERS = {
    "impl/model": [],
    "impl/kernels": ["impl/model"],
    "impl/abi": ["impl/kernels"],
    "impl/mutants": ["impl/kernels"],
    "reference": ["impl/model"],
    "properties": ["impl/kernels", "reference"],
    "fuzz": ["properties", "impl/mutants", "impl/abi"],
    "ci/certify": ["fuzz"],
    "ci/isolation": ["properties", "impl/abi", "impl/mutants"],
    "ci/bench": ["properties", "ci/isolation"],
    "ci/selfcheck": ["ci/certify", "ci/isolation"],
    "ci/api": ["ci/certify", "ci/isolation"],
    "ci/cli": ["ci/certify", "ci/isolation", "ci/selfcheck", "ci/bench"],
    # Tests sit on top of what they test; they may name mutants (a check is shown to fail).
    "impl/tests": ["impl/abi", "impl/mutants"],
    "reference/tests": ["reference"],
    "properties/tests": ["properties", "impl/mutants"],
    "fuzz/tests": ["fuzz"],
    "ci/tests": ["ci/api", "ci/selfcheck", "ci/cli"],
    # Example kernels see only what a user of the installed package sees.
    "ci/examples": ["ci/api", "impl/abi"],
}
# The include prefix of each layer that exports headers (python/tools/layer_include_prefixes.py).
PREFIXES = {
    "attest/model/": "impl/model",
    "attest/kernels/": "impl/kernels",
    "attest/mutants/": "impl/mutants",
    "attest/abi/": "impl/abi",
    "attest/reference/": "reference",
    "attest/properties/": "properties",
}
# The installed entry points users include, directly under attest/.
PUBLIC = {"attest/attest_abi.h": "impl/abi", "attest/certify_api.h": "ci/api", "attest/gtest.h": "ci/api"}
SOURCE_SUFFIXES = (".c", ".h", ".cpp", ".hpp", ".cc", ".def", ".inc")
SKIPPED_DIRS = {".git", "build", "python", "js", "node_modules", "corpus"}
INCLUDE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<(attest/[^>]+)>)')


def reachable():
    """Each folder's transitive closure, itself included."""
    closure = {}

    def visit(folder, seen):
        for lower in LAYERS[folder]:
            if lower not in seen:
                seen.add(lower)
                visit(lower, seen)
        return seen

    for folder in LAYERS:
        closure[folder] = visit(folder, {folder})
    return closure


def layer_of(path):
    best = None
    for folder in LAYERS:
        if (path == folder or path.startswith(folder + "/")) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def named_layer(name):
    """The layer an "attest/..." include names by its prefix, or None."""
    if name in PUBLIC:
        return PUBLIC[name]
    return next((folder for prefix, folder in PREFIXES.items() if name.startswith(prefix)), None)


def source_files(root):
    for directory, subdirs, names in os.walk(root):
        rel_dir = os.path.relpath(directory, root)
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith("build"))
        for name in sorted(names):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.normpath(os.path.join(rel_dir, name))


def check(root):
    files = list(source_files(root))
    known = set(files)
    by_suffix = {}
    for f in files:
        parts = f.split("/")
        for i in range(len(parts)):
            by_suffix.setdefault("/".join(parts[i:]), []).append(f)
    closure = reachable()
    problems = []
    for f in files:
        layer = layer_of(f)
        if layer is None:
            problems.append(f"{f}: its folder has no layer in ci/tests/layering_test.py (add it to LAYERS)")
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as text:
            for number, line in enumerate(text, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                name = match.group(1) or match.group(2)
                beside = os.path.normpath(os.path.join(os.path.dirname(f), name))
                candidates = [beside] if beside in known else by_suffix.get(name, [])
                if not candidates:
                    continue  # a system or third-party header
                if len(candidates) > 1:
                    problems.append(f"{f}:{number}: \"{name}\" is ambiguous: {', '.join(candidates)}")
                    continue
                target = candidates[0]
                target_layer = layer_of(target)
                if name.startswith("attest/") and named_layer(name) != target_layer:
                    problems.append(f"{f}:{number}: \"{name}\" names no layer: {target} is in {target_layer}, "
                                    "its include should be attest/<layer>/ (python/tools/layer_include_prefixes.py)")
                    continue
                if target_layer not in closure[layer]:
                    problems.append(f"{f}:{number}: includes {target}: layer {layer} may not depend on {target_layer}")
    return len(files), problems


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: layering_test.py SOURCE_DIR (an attest source tree)", file=sys.stderr)
        return 2
    count, problems = check(sys.argv[1])
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) against the layers of docs/design.md#layers")
        return 1
    print(f"{count} files: every include goes down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())

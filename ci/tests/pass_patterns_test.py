#!/usr/bin/env python3
"""Every ctest pass/fail pattern in the CMake files is one regular expression. ctest splits a
PASS_REGULAR_EXPRESSION at each ';' into patterns of which any one passes, so "CERTIFIED x[^\\n]*; y"
passes on any output holding " y" (a NOT CERTIFIED one too). Lists one line per pattern with a ';'.
usage: pass_patterns_test.py SOURCE_DIR [CMAKE_FILE...]   (files: every tracked CMakeLists.txt/*.cmake)"""
import pathlib
import re
import subprocess
import sys

PROPERTY = re.compile(r'(PASS|FAIL)_REGULAR_EXPRESSION\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', re.S)


def cmake_files(root):
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "*CMakeLists.txt", "*.cmake"],
                            capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return [root / line for line in listed.stdout.split()]
    return [p for p in root.rglob("*") if p.name == "CMakeLists.txt" or p.suffix == ".cmake"
            if "build" not in p.parts and "node_modules" not in p.parts]


def main():
    root = pathlib.Path(sys.argv[1])
    files = [pathlib.Path(f) for f in sys.argv[2:]] or cmake_files(root)
    bad = 0
    for path in files:
        text = path.read_text()
        for match in PROPERTY.finditer(text):
            if ";" in match.group(2):
                line = text.count("\n", 0, match.start()) + 1
                print(f"{path}:{line}: a {match.group(1)}_REGULAR_EXPRESSION holds ';' (ctest splits it into "
                      "alternatives, any of which passes): write '.' for it")
                bad += 1
    print(f"{len(files)} CMake files, {bad} pattern(s) with ';'")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""docs/properties.md against `attest certify --list-checks`: every property check has its row in
the page's tables, every row names a check attest has, and every other stage's check is named
in the page's text. Usage: catalogue_page_test.py ATTEST PAGE"""
import re
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        print("usage: catalogue_page_test.py ATTEST docs/properties.md", file=sys.stderr)
        return 2
    attest, page = sys.argv[1:]
    listed = subprocess.run([attest, "certify", "--list-checks"], capture_output=True, text=True, check=True).stdout
    checks = [line.split() for line in listed.splitlines() if line.strip()]
    text = open(page, encoding="utf-8").read()
    rows = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, re.MULTILINE))
    properties = {name for stage, name in checks if stage == "property"}
    problems = [f"{name}: a property check with no row in {page}" for name in sorted(properties - rows)]
    problems += [f"{name}: a row of {page} that names no check of attest" for name in sorted(rows - properties)]
    problems += [f"{stage} {name}: not named in {page}" for stage, name in checks
                 if stage != "property" and f"`{stage} {name}`" not in text]
    for p in problems:
        print(p)
    print(f"{len(properties)} property checks, {len(rows)} rows, {len(checks)} checks listed: "
          + ("the page agrees" if not problems else f"{len(problems)} differences"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs every shell block that README.md and docs/*.md mark as runnable, as a reader would.

A block is runnable when the line before its ```sh fence is `<!-- runnable -->`. Each block runs
with bash (-e, -u, pipefail) in a scratch copy of the source tree (its top-level entries linked,
so the block's own outputs land in the scratch folder) where `build/release/ci/attest` is the
binary under test: a command in the docs runs exactly as written from a clone's root after the
build. Blocks that install packages or build the whole project (./ci/certify.sh, ./ci/test.sh)
must not be marked: the test refuses them rather than run them.

Usage: runnable_docs_test.py --source DIR --attest PATH [--list]"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

MARKER = "<!-- runnable -->"
FORBIDDEN = re.compile(r"(^|[\s;&|(])(\./)?ci/(certify|test|install-deps)\.sh\b")
BLOCK_TIMEOUT_SECONDS = 240  # each block takes seconds; a hang must still end the test


def documents(source):
    yield source / "README.md"
    yield from sorted((source / "docs").glob("*.md"))


def runnable_blocks(path):
    """(line number, text) of each marked ```sh block of a file."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = i + 1
        if fence >= len(lines) or lines[fence].strip() not in ("```sh", "```bash"):
            raise ValueError(f"{path}:{i + 1}: {MARKER} must be followed by a ```sh fence")
        end = next((k for k in range(fence + 1, len(lines)) if lines[k].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{path}:{fence + 1}: unterminated ```sh block")
        text = "\n".join(lines[fence + 1:end])
        if FORBIDDEN.search(text):
            raise ValueError(f"{path}:{fence + 1}: a runnable block may not install or build everything")
        blocks.append((fence + 1, text))
    return blocks


def scratch_tree(source, attest, folder):
    """The source tree's top-level entries linked into folder, with the binary under test at
    build/release/ci/attest."""
    for entry in source.iterdir():
        if entry.name not in ("build", ".git"):
            (folder / entry.name).symlink_to(entry)
    binary = folder / "build" / "release" / "ci" / "attest"
    binary.parent.mkdir(parents=True)
    binary.symlink_to(attest)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="the repository root")
    parser.add_argument("--attest", required=True, help="the attest binary under test")
    parser.add_argument("--list", action="store_true", help="print the blocks without running them")
    args = parser.parse_args()
    source = pathlib.Path(args.source).resolve()
    attest = pathlib.Path(args.attest).resolve()
    if not (source / "README.md").is_file():
        print(f"runnable_docs_test: no README.md in {source}", file=sys.stderr)
        return 2
    if not os.access(attest, os.X_OK):
        print(f"runnable_docs_test: {attest} is not an executable", file=sys.stderr)
        return 2
    try:
        blocks = [(doc, line, text) for doc in documents(source) for line, text in runnable_blocks(doc)]
    except ValueError as e:
        print(f"runnable_docs_test: {e}", file=sys.stderr)
        return 1
    if not blocks:
        print("runnable_docs_test: no block is marked runnable; nothing would be checked", file=sys.stderr)
        return 1
    failures = 0
    for doc, line, text in blocks:
        where = f"{doc.relative_to(source)}:{line}"
        if args.list:
            print(f"--- {where}\n{text}")
            continue
        with tempfile.TemporaryDirectory(prefix="attest-docs-") as scratch:
            scratch_tree(source, attest, pathlib.Path(scratch))
            start = time.monotonic()
            try:
                run = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=scratch,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     timeout=BLOCK_TIMEOUT_SECONDS)
                code, output = run.returncode, run.stdout
            except subprocess.TimeoutExpired as e:
                code, output = "timeout", (e.stdout or b"").decode(errors="replace")
            seconds = time.monotonic() - start
        if code == 0:
            print(f"ok    {where} ({seconds:.1f} s)")
        else:
            failures += 1
            tail = "\n".join(output.rstrip().split("\n")[-15:])
            print(f"FAIL  {where} (exit {code}, {seconds:.1f} s)\n{text}\n--- last output:\n{tail}")
    if not args.list:
        print(f"{len(blocks) - failures}/{len(blocks)} runnable blocks ran as written")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Runs every shell block that README.md and docs/*.md mark as runnable, as a reader would.

A block is runnable when the line before its ```sh fence is `<!-- runnable -->`. Each block runs
with bash (-e, -u, pipefail) in a scratch copy of the source tree (its top-level entries linked,
so the block's own outputs land in the scratch folder) where `build/release/ci/attest` is the
binary under test: a command in the docs runs exactly as written from a clone's root after the
build. Blocks that install packages or build the whole project (./ci/certify.sh, ./ci/test.sh)
must not be marked: the test refuses them rather than run them.

A block marked `<!-- runnable, output below -->` is followed by a plain ``` block: the sample of
what the commands print on stdout. The run must print exactly that, but for the scratch folder's
path (written `$PWD`), durations ("3 s", "0.4s") and decimal numbers (err/bound: the last digits
follow the machine's SIMD width), so a sample in the docs is a real run's output and cannot
fall behind the report's format.

Usage: runnable_docs_test.py --source DIR --attest PATH [--list]"""

import argparse
import difflib
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

MARKER = "<!-- runnable -->"
MARKER_WITH_OUTPUT = "<!-- runnable, output below -->"
FORBIDDEN = re.compile(r"(^|[\s;&|(])(\./)?ci/(certify|test|install-deps)\.sh\b")
BLOCK_TIMEOUT_SECONDS = 240  # each block takes seconds; a hang must still end the test


def documents(source):
    yield source / "README.md"
    yield from sorted((source / "docs").glob("*.md"))


def fenced(path, lines, fence, opening):
    """The text of the block whose fence is lines[fence] and the line after its end."""
    if fence >= len(lines) or lines[fence].strip() not in opening:
        raise ValueError(f"{path}:{fence}: the marker must be followed by a {' or '.join(opening)} fence")
    end = next((k for k in range(fence + 1, len(lines)) if lines[k].strip() == "```"), None)
    if end is None:
        raise ValueError(f"{path}:{fence + 1}: unterminated block")
    return "\n".join(lines[fence + 1:end]), end + 1


def runnable_blocks(path):
    """(line number, text, expected stdout or None) of each marked ```sh block of a file."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() not in (MARKER, MARKER_WITH_OUTPUT):
            continue
        text, after = fenced(path, lines, i + 1, ("```sh", "```bash"))
        if FORBIDDEN.search(text):
            raise ValueError(f"{path}:{i + 2}: a runnable block may not install or build everything")
        expected = fenced(path, lines, after, ("```",))[0] + "\n" if line.strip() == MARKER_WITH_OUTPUT else None
        blocks.append((i + 2, text, expected))
    return blocks


def normalised(text, scratch):
    """What a sample and a run must agree on: not the scratch path, durations or decimal digits."""
    text = text.replace(os.path.realpath(scratch), "$PWD").replace(scratch, "$PWD")
    text = re.sub(r"\b\d+(\.\d+)? ?s\b", "<seconds>", text)
    return re.sub(r"\b\d+\.\d+(e[-+]?\d+)?\b", "<decimal>", text)


def output_difference(expected, output, scratch):
    """A unified diff of the sample against the run (normalised), or "" when they agree."""
    want, got = normalised(expected, scratch), normalised(output, scratch)
    if want == got:
        return ""
    return "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "the sample", "the run"))


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
        blocks = [(doc, line, text, expected) for doc in documents(source)
                  for line, text, expected in runnable_blocks(doc)]
    except ValueError as e:
        print(f"runnable_docs_test: {e}", file=sys.stderr)
        return 1
    if not blocks:
        print("runnable_docs_test: no block is marked runnable; nothing would be checked", file=sys.stderr)
        return 1
    failures = 0
    for doc, line, text, expected in blocks:
        where = f"{doc.relative_to(source)}:{line}"
        if args.list:
            print(f"--- {where}\n{text}")
            continue
        with tempfile.TemporaryDirectory(prefix="attest-docs-") as scratch:
            scratch_tree(source, attest, pathlib.Path(scratch))
            start = time.monotonic()
            # A sample is of stdout alone (progress lines go to stderr).
            try:
                run = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=scratch,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL if expected else subprocess.STDOUT, text=True,
                                     timeout=BLOCK_TIMEOUT_SECONDS)
                code, output = run.returncode, run.stdout
            except subprocess.TimeoutExpired as e:
                code, output = "timeout", (e.stdout or b"").decode(errors="replace")
            seconds = time.monotonic() - start
            difference = output_difference(expected, output, scratch) if expected and code == 0 else ""
        if difference:
            failures += 1
            print(f"FAIL  {where}: the sample below the block is not what it prints ({seconds:.1f} s)\n{difference}")
        elif code == 0:
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

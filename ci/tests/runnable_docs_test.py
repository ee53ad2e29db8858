"""Runs every shell block that README.md and docs/*.md mark as runnable, as a reader would.

Every shell block (```sh, ```bash, ```shell, ```console) must be marked on the line before its
fence: `<!-- runnable -->` (this test runs it), or `<!-- checked elsewhere: REASON -->`, where
REASON names what runs it instead (CI's .ci/run, a ctest, a run by hand on a fresh clone recorded
in ci/results/docs_commands.txt) or why nothing here can. A block with neither fails the test, so
a new command cannot slip in unchecked; a REASON that cites docs_commands.txt must find each of
the block's commands recorded there word for word.

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
fall behind the report's format. A sample may elide: a line that is only `...` stands for one or
more lines of the run, and `...` inside a line for any text on that line.

Usage: runnable_docs_test.py --source DIR --attest PATH [--list]"""

import argparse
import difflib
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import textwrap
import time

MARKER = "<!-- runnable -->"
MARKER_WITH_OUTPUT = "<!-- runnable, output below -->"
CHECKED_ELSEWHERE = re.compile(r"^<!-- checked elsewhere: (?P<reason>.*\S.*) -->$")
SHELL_FENCES = ("```sh", "```bash", "```shell", "```console")
COMMAND_RECORD = "ci/results/docs_commands.txt"
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


def commands(text):
    """A block's command lines: neither blank nor a comment, each without a trailing comment."""
    lines = (re.sub(r"\s+#\s.*$", "", line).strip() for line in text.split("\n"))
    return [line for line in lines if line and not line.startswith("#")]


def runnable_blocks(path, record=""):
    """(line number, text, expected stdout or None) of each runnable ```sh block of a file.
    Raises ValueError at a shell block marked neither runnable nor checked elsewhere, and at one
    whose reason cites the command record (record: its text) when a command is not in it."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks = []
    opening = None  # the line of the fence the scan is inside, if any
    for i, line in enumerate(lines):
        stripped = line.strip()
        if opening is not None:
            opening = None if stripped == "```" else opening
            continue
        if stripped in (MARKER, MARKER_WITH_OUTPUT) or CHECKED_ELSEWHERE.match(stripped):
            fenced(path, lines, i + 1, SHELL_FENCES)  # a marker must sit on the fence's line before
        if not stripped.startswith("```"):
            continue
        opening = i
        if stripped not in SHELL_FENCES:
            continue
        marker = lines[i - 1].strip() if i > 0 else ""
        if marker in (MARKER, MARKER_WITH_OUTPUT):
            text, after = fenced(path, lines, i, SHELL_FENCES)
            if FORBIDDEN.search(text):
                raise ValueError(f"{path}:{i + 1}: a runnable block may not install or build everything")
            expected = fenced(path, lines, after, ("```",))[0] + "\n" if marker == MARKER_WITH_OUTPUT else None
            blocks.append((i + 1, text, expected))
            continue
        elsewhere = CHECKED_ELSEWHERE.match(marker)
        if not elsewhere:
            raise ValueError(f"{path}:{i + 1}: a shell block neither marked `{MARKER}` nor "
                             "`<!-- checked elsewhere: REASON -->` (what runs it, or why nothing can)")
        if COMMAND_RECORD.rsplit("/", 1)[-1] in elsewhere["reason"]:
            text = fenced(path, lines, i, SHELL_FENCES)[0]
            missing = [c for c in commands(text) if c not in record]
            if missing:
                raise ValueError(f"{path}:{i + 1}: not recorded in {COMMAND_RECORD}: {missing[0]}")
    return blocks


def normalised(text):
    """What a sample and a run must agree on: not durations or decimal digits."""
    text = re.sub(r"\b\d+(\.\d+)? ?s\b", "<seconds>", text)
    return re.sub(r"\b\d+\.\d+(e[-+]?\d+)?\b", "<decimal>", text)


def sample_pattern(sample):
    """A regular expression of a normalised sample: a line of only `...` stands for one or more
    lines, `...` inside a line for any text on that line."""
    parts = []
    for line in sample.split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?[^\n]*")
        else:
            parts.append("[^\\n]*?".join(re.escape(piece) for piece in line.split("...")))
    return re.compile("\n".join(parts))


def output_difference(expected, output):
    """A unified diff of the sample against the run (normalised), or "" when they agree."""
    want, got = normalised(expected), normalised(output)
    if sample_pattern(want).fullmatch(got):
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


def run_block(source, attest, text, stdout_only):
    """(exit code, output with the scratch folder written `$PWD`, seconds) of a block run in a
    fresh scratch tree; a sample is of stdout alone (progress lines go to stderr)."""
    with tempfile.TemporaryDirectory(prefix="attest-docs-") as scratch:
        scratch_tree(source, attest, pathlib.Path(scratch))
        start = time.monotonic()
        try:
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=scratch, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL if stdout_only else subprocess.STDOUT, text=True,
                                 timeout=BLOCK_TIMEOUT_SECONDS)
            code, output = run.returncode, run.stdout
        except subprocess.TimeoutExpired as e:
            code, output = "timeout", (e.stdout or b"").decode(errors="replace")
        output = output.replace(os.path.realpath(scratch), "$PWD").replace(scratch, "$PWD")
        return code, output, time.monotonic() - start


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
    record_path = source / COMMAND_RECORD
    record = record_path.read_text(encoding="utf-8") if record_path.is_file() else ""
    try:
        blocks = [(doc, line, text, expected) for doc in documents(source)
                  for line, text, expected in runnable_blocks(doc, record)]
    except ValueError as e:
        print(f"runnable_docs_test: {e}", file=sys.stderr)
        return 1
    if not blocks:
        print("runnable_docs_test: no block is marked runnable; nothing would be checked", file=sys.stderr)
        return 1
    failures = 0
    runs = {}  # a block repeated word for word (README, indented in a list, and its page) runs once
    for doc, line, text, expected in blocks:
        where = f"{doc.relative_to(source)}:{line}"
        if args.list:
            print(f"--- {where}\n{text}")
            continue
        key = (textwrap.dedent(text), expected is not None)
        again = key in runs
        if not again:
            runs[key] = run_block(source, attest, text, expected is not None)
        code, output, seconds = runs[key]
        took = "ran above" if again else f"{seconds:.1f} s"
        difference = output_difference(expected, output) if expected and code == 0 else ""
        if difference:
            failures += 1
            print(f"FAIL  {where}: the sample below the block is not what it prints ({took})\n{difference}")
        elif code == 0:
            print(f"ok    {where} ({took})")
        else:
            failures += 1
            tail = "\n".join(output.rstrip().split("\n")[-15:])
            print(f"FAIL  {where} (exit {code}, {took})\n{text}\n--- last output:\n{tail}")
    if not args.list:
        print(f"{len(blocks) - failures}/{len(blocks)} runnable blocks ran as written")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

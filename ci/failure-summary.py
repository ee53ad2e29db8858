#!/usr/bin/env python3
"""Prints, after a failed ctest run, the machine's facts and the end of each failing test's
output, so that the last screen of a CI log says why (CI logs are often shown tail only).
Usage: failure-summary.py BUILD_DIR [LINES]"""
import os
import re
import subprocess
import sys

build, lines = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25


def shell(command):
    try:
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return "(%s)" % e


print("==== failure summary: the machine")
print("user %s, nproc %s, %s" % (shell("id -un"), shell("nproc"), shell("uname -r")))
print(shell("grep -m1 'model name' /proc/cpuinfo"))
flags = shell("grep -m1 '^flags' /proc/cpuinfo").split()
print("cpu: " + " ".join(f for f in flags if re.match(r"(avx|fma|f16c|amx)", f)))
print(shell("free -m | head -2"))
print(shell("df -h %s /tmp | tail -n +2" % build))
print("limits: " + shell("ulimit -a 2>&1 | grep -E 'processes|virtual|stack|open files' | tr -s ' ' | tr '\\n' ';'"))
print("pids.max: " + shell("cat /sys/fs/cgroup/pids.max 2>/dev/null"))

log = os.path.join(build, "Testing", "Temporary", "LastTest.log")
try:
    text = open(log, errors="replace").read()
except OSError as e:
    sys.exit("no ctest log: %s" % e)
# One section per test: from "N/M Testing: NAME" to its '"NAME" end time' line.
for m in re.finditer(r"^\d+/\d+ Testing: (.+?)\n(.*?)^Test (Passed|Failed)\.?", text, re.M | re.S):
    name, body, verdict = m.group(1), m.group(2), m.group(3)
    if verdict == "Passed":
        continue
    output = body.split("Output:\n", 1)[-1].split("<end of output>", 1)[0].splitlines()
    output = [line for line in output if not line.startswith("-----")]
    print("==== %s: the last %d of %d lines" % (name, min(lines, len(output)), len(output)))
    for line in output[-lines:]:
        print("  " + line[:300])

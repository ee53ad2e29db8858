"""The size ladder and the long stage as a user sees them (issue 16).

Usage: long_stage_test.py ATTEST WORKDIR CASE
  default_tiled  default certify of builtin:tiled (no time budget): cases past 2 x 128 queries and
                 2 x 64 keys, a long stage reaching T >= 16384, and the per-path table on stdout
  paths          a kernel with two paths gets each path's cases in every property, and the table
  flags          --max-len, --lengths, --head-dims, --jobs: honoured, and bad values refused
"""
import json
import os
import subprocess
import sys

ATTEST, WORK, CASE = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)


def run(*args, expect=0):
    cmd = [ATTEST, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != expect:
        sys.exit("exit %d, expected %d: %s\n%s%s" % (done.returncode, expect, " ".join(cmd), done.stdout, done.stderr))
    return done


def certificate(*args, expect=0):
    path = os.path.join(WORK, "certificate.json")
    done = run("certify", "--seed", "5", "--out", os.path.join(WORK, "out"), "--json", path, *args, expect=expect)
    with open(path) as f:
        return json.load(f), done.stdout


def check(doc, stage, name):
    for c in doc["kernels"][0]["checks"]:
        if c["stage"] == stage and c["check"] == name:
            return c
    sys.exit("no %s/%s check in the certificate" % (stage, name))


def case_default_tiled():
    # No time budget: what this asserts is which lengths the stage has, not what a machine affords.
    doc, out = certificate("--kernel", "tiled", "--long-seconds", "0")
    ladder = check(doc, "ladder", "sizes")
    long = check(doc, "long", "sampled_rows")
    for c in (ladder, long):
        if c["verdict"] != "pass" or c["effective_cases"] < 1:
            sys.exit("%s: %s" % (c["check"], c))
    if not (ladder["longest"]["q_len"] > 2 * 128 and ladder["longest"]["k_len"] > 2 * 64):
        sys.exit("the ladder stops at %s" % ladder["longest"])
    if long["longest"]["k_len"] < 16384 or long["longest"]["q_len"] < 16384:
        sys.exit("the long stage stops at %s" % long["longest"])
    if "time_budget_seconds" in long or long.get("not_reached") or long["reached_length"] < 32768:
        sys.exit("--long-seconds 0 still budgeted the long stage: %s" % long)
    if long["required_length"] != 1024:  # default: max(1024, 4 x the 128-query tile)
        sys.exit("required length %s" % long["required_length"])
    if "max Tq x Tk" not in out or "\n  path " not in out:
        sys.exit("no length column or path table on stdout:\n" + out)
    if not doc["kernels"][0]["certified"]:
        sys.exit("builtin:tiled not certified:\n" + out)


def case_paths():
    # tiled-scalar (32 x 32 tiles) reports single-tile and multi-tile: every property reaches both.
    doc, out = certificate("--kernel", "tiled-scalar", "--budget", "20", "--max-len", "1024")
    paths = {p["path"] for p in doc["kernels"][0]["paths"]}
    if paths != {"single-tile", "multi-tile"}:
        sys.exit("paths %s" % paths)
    for c in doc["kernels"][0]["checks"]:
        if c["stage"] != "property" or c["verdict"] == "not covered":
            continue
        if c["verdict"] != "pass" or c.get("path_shortfall"):
            sys.exit("%s: %s" % (c["check"], c))
    for line in ("single-tile", "multi-tile"):
        if "\n  %s " % line not in out:
            sys.exit("no %s row in the path table:\n%s" % (line, out))


def case_flags():
    doc, _ = certificate("--kernel", "tiled", "--budget", "0", "--lengths", "129,200", "--head-dims", "32,128",
                         "--jobs", "1")
    ladder = check(doc, "ladder", "sizes")
    if ladder["longest"] != {"q_len": 200, "k_len": 200 + 64 + 1}:
        sys.exit("--lengths 129,200: ladder longest %s" % ladder["longest"])
    doc, _ = certificate("--kernel", "loop", "--budget", "0", "--max-len", "64")
    if check(doc, "long", "sampled_rows")["verdict"] != "not covered":
        sys.exit("--max-len 64 still ran long cases")
    for bad in (["--max-len", "0"], ["--max-len", "12x"], ["--lengths", "5,-1"], ["--head-dims", "2000"],
                ["--jobs", "0"]):
        done = run("certify", "--kernel", "loop", *bad, expect=2)
        if bad[0] not in done.stderr:
            sys.exit("%s: the error does not name the flag: %s" % (bad, done.stderr))


{"default_tiled": case_default_tiled, "paths": case_paths, "flags": case_flags}[CASE]()
print("ok")

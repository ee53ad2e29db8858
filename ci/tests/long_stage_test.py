"""The size ladder and the long stage as a user sees them.

Usage: long_stage_test.py ATTEST WORKDIR CASE
  default_tiled  default certify of builtin:tiled (no time budget): cases past 2 x 128 queries and
                 2 x 64 keys, a long stage reaching T >= 16384, and the per-path table on stdout
  paths          a kernel with two paths gets each path's cases in every property, and the table
  flags          --max-len, --lengths, --head-dims, --jobs: honoured, and bad values refused
  backward       the long stage runs the backward past the ladder on sampled rows (quick: to 4096
                 with a window), and kills a backward wrong only past Tk 2048, which the ladder misses
  eviction       an evicting cache gets long decode sessions judged on sampled steps (quick: 4096
                 tokens), and they kill a cache that drops its sinks only from position 5000
  paged          a block-table decoder gets long paged decode sessions judged on sampled steps (quick:
                 to 2048 tokens, its square limit), and at the default budget's 8192 they kill a
                 decoder whose copy of a table holds 256 entries
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
        if "\n  path %s " % line not in out:
            sys.exit("no line for path %s in the report:\n%s" % (line, out))


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


def long_check(doc, name, longest):
    c = check(doc, "long", name)
    if c["verdict"] != "pass" or c["effective_cases"] < 1 or c["longest"]["k_len"] < longest:
        sys.exit("%s: %s" % (name, c))
    if c.get("not_reached") or c["reached_length"] < longest:
        sys.exit("%s: not every length was reached (a quiet machine affords it): %s" % (name, c))
    if not any(k.startswith("sampled rows per case") for k in c.get("feature_cases", {})):
        sys.exit("%s: the certificate does not say how many rows were sampled: %s" % (name, c))
    return c


def killed_by(mutant, expected):
    path = os.path.join(WORK, "mutant.json")
    run("mutants", "--only", mutant, "--seed", "20261129", "--out", os.path.join(WORK, "mutants"), "--json", path)
    with open(path) as f:
        row = json.load(f)["mutants"][0]
    if not row["expected_caught"] or row["killed_by"][0] != expected:
        sys.exit("%s: killed by %s, expected %s first" % (mutant, row["killed_by"], expected))


def case_backward():
    doc, out = certificate("--kernel", "tiled", "--budget", "quick", "--long-seconds", "0")
    long_check(doc, "backward_sampled_rows", 4096)
    if "backward_sampled_rows" not in out:
        sys.exit("no backward_sampled_rows line on stdout:\n" + out)
    # dQ 1% off only past Tk 2048: the ladder (to 512) passes it; only the long stage's backward fails it.
    killed_by("backward_dq_wrong_past_2048", "backward_sampled_rows")


def case_eviction():
    doc, out = certificate("--kernel", "decode_sinks_recent", "--budget", "quick", "--long-seconds", "0")
    long_check(doc, "eviction_sampled_steps", 4096)
    # The sinks dropped from position 5000: far past what eviction_matches_retained_set decodes.
    killed_by("sinks_evicted_from_5000", "eviction_sampled_steps")


def case_paged():
    doc, out = certificate("--kernel", "decode_q8", "--budget", "quick", "--long-seconds", "0")
    long_check(doc, "paged_sampled_steps", 2048)
    # Keys past 4096 tokens read through the table's entry 255: past what the block-table properties
    # decode (4096 tokens at most); only the long stage's paged sessions (8192 at default) reach it.
    killed_by("kv_table_copy_of_256", "paged_sampled_steps")


{"default_tiled": case_default_tiled, "paths": case_paths, "flags": case_flags, "backward": case_backward,
 "eviction": case_eviction, "paged": case_paged}[CASE]()
print("ok")

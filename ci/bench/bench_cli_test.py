#!/usr/bin/env python3
"""Command-line tests of `attest bench`, run by ctest one case at a time:
    bench_cli_test.py ATTEST EXAMPLES_DIR CASE
They check what is run and reported (shapes, where a plugin runs, the statistics' consistency)
and that bad flags are refused; never how fast anything is."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

ATTEST, EXAMPLES, CASE = sys.argv[1:4]
PLUGIN = os.path.join(EXAMPLES, "libexample_attention.so")
WORK = tempfile.mkdtemp(prefix="attest-bench-")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)  # nothing left in /tmp
# Tiny cells, timed a few times each: the test takes well under a second of kernel time.
QUICK = ["--lengths", "16,40", "--dims", "8", "--min-time", "0", "--repetitions", "3", "--max-seconds", "60"]


def bench(*args, expect):
    cmd = [ATTEST, "bench"] + list(args)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if run.returncode < 0:
        sys.exit("attest itself died with signal %d:\n%s%s" % (-run.returncode, run.stdout, run.stderr))
    if run.returncode != expect:
        sys.exit("exit %d, expected %d: %s\n%s%s" % (run.returncode, expect, " ".join(cmd), run.stdout, run.stderr))
    return run


def require(text, *needles):
    for needle in needles:
        if needle not in text:
            sys.exit("expected %r in:\n%s" % (needle, text))


def check_rows(path, batch, heads, plugin_runs):
    doc = json.load(open(path))
    if doc["version"] != 2 or doc["batch"] != batch or doc["heads"] != heads or doc["kv_heads"] != heads:
        sys.exit("wrong header: %r" % {k: v for k, v in doc.items() if k != "rows"})
    if doc["plugins"] != plugin_runs:
        sys.exit("plugins: %r, expected %r" % (doc["plugins"], plugin_runs))
    rows = doc["rows"]
    kernels = {r["kernel"] for r in rows}
    if kernels != {"tiled", "example-c"}:
        sys.exit("kernels measured: %r" % kernels)
    # prefill at 2 lengths x 2 causal settings, decode at 2 lengths, for each kernel; the backward
    # beside each prefill for tiled, which declares one
    if len(rows) != 16 or sum(r["mode"] == "backward" and r["kernel"] == "tiled" for r in rows) != 4:
        sys.exit("%d rows, expected 16 (4 of them tiled's backward):\n%s" % (len(rows), json.dumps(rows, indent=1)))
    for r in rows:
        want = plugin_runs if r["kernel"] == "example-c" else "in-process"
        if r["runs"] != want:
            sys.exit("%s runs %s, expected %s" % (r["kernel"], r["runs"], want))
        if r["kernel"] == "example-c" and r["peak_extra_bytes"] is not None:
            sys.exit("a plugin's memory is not metered, yet peak_extra_bytes = %r" % r["peak_extra_bytes"])
        # decode sessions time 32 steps; other cells at least --repetitions calls
        if r["calls"] < 3 or not (r["min_seconds"] <= r["q1_seconds"] <= r["median_seconds"] <= r["q3_seconds"]
                                  <= r["max_seconds"]):
            sys.exit("inconsistent statistics: %r" % r)
        # GFLOP/s counts every batch and head: 4 B H Tq Tk D (halved when causal) per median second
        tq = 1 if r["mode"] == "decode" else r["length"]
        flops = 4.0 * batch * heads * tq * r["length"] * r["head_dim"] * \
            (0.5 if r["causal"] and r["mode"] != "decode" else 1)
        flops *= 2.5 if r["mode"] == "backward" else 1  # the backward counts 2.5 forwards
        if abs(r["gflops"] * 1e9 * r["median_seconds"] - flops) > 1e-6 * flops:
            sys.exit("GFLOP/s does not count B = %d, H = %d: %r" % (batch, heads, r))
        # a decode step makes one token per sequence; the cache's bytes per token of one sequence
        if r["mode"] == "decode":
            if abs(r["tokens_per_second"] * r["median_seconds"] - batch) > 1e-9 * batch:
                sys.exit("tokens/s is not B / the step's time: %r" % r)
            if abs(r["kv_bytes_per_token"] * batch * r["length"] - r["kv_cache_bytes"]) > 1e-6 * r["kv_cache_bytes"]:
                sys.exit("KV bytes per token is not the cache over B x T: %r" % r)
        elif r["tokens_per_second"] is not None:
            sys.exit("tokens/s on a %s row: %r" % (r["mode"], r))


def case_flags():
    out = os.path.join(WORK, "bench.json")
    run = bench("--kernel", "tiled", "--kernel", PLUGIN, "--batch", "2", "--heads", "3", "--json", out, *QUICK,
                expect=0)
    require(run.stdout, "B = 2, H = Hkv = 3", "median of n calls (at least 3", "interquartile range",
            "plugins: in a child process", "median s", "IQR %")
    check_rows(out, 2, 3, "child-process")


def case_in_process():
    out = os.path.join(WORK, "bench.json")
    run = bench("--kernel", "tiled", "--kernel", PLUGIN, "--in-process", "--heads", "2", "--json", out, *QUICK,
                expect=0)
    require(run.stdout, "B = 1, H = Hkv = 2", "plugins: in process (--in-process)")
    for line in run.stdout.splitlines():
        if line.startswith("example-c") and " in-proc " not in line:
            sys.exit("the plugin's row does not say it ran in process: %r" % line)
    check_rows(out, 1, 2, "in-process")
    # A plugin attest cannot load in process is a load error, as in a child process.
    run = bench("--kernel", os.path.join(EXAMPLES, "libbroken_abi_version.so"), "--in-process", *QUICK, expect=2)
    require(run.stderr, "kernel ABI version 3")


def case_bad_values():
    for args, message in [
        (["--batch", "0"], "--batch: must be an integer in [1, 65536], got '0'"),
        (["--batch", "-2"], "--batch: must be an integer"),
        (["--heads", "2x"], "--heads: must be an integer in [1, 65536], got '2x'"),
        (["--heads", "1.5"], "--heads: must be an integer"),
        (["--heads", ""], "--heads: must be an integer"),
        (["--lengths", "16,abc"], "--lengths: must be an integer"),
        (["--dims", "0"], "--dims: must be an integer"),
        (["--causal", "2"], "--causal: must be an integer in [0, 1]"),
        (["--repetitions", "0"], "--repetitions: must be an integer"),
        (["--min-time", "nan"], "--min-time: must be a number"),
        (["--max-seconds", "0"], "--max-seconds: must be a number of seconds"),
        (["--batch", "65536", "--heads", "65536"], "elements per input, more than"),
    ]:
        quick = [x for i, x in enumerate(QUICK) if args[0] not in QUICK[i - (i % 2):i - (i % 2) + 1]]
        run = bench("--kernel", "tiled", *(quick + args), expect=2)
        require(run.stderr, message)
        if "kernel" in run.stdout:
            sys.exit("%s: refused only after measuring:\n%s" % (" ".join(args), run.stdout))


globals()["case_" + CASE]()

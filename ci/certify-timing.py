#!/usr/bin/env python3
"""Times `attest certify` on the example kernels, per stage, optionally beside CPU hogs or on one core.

Usage: ci/certify-timing.py [--build build/release] [--budgets default,quick] [--hogs N] [--one-core]
                            [--kernels c,fp16_kv,numpy]
Prints one line per run: wall seconds, each stage's seconds (from the certificate's per-check
seconds), how far the long stage reached, and the verdict with attest's exit code. The verdict
must not change with --hogs or --one-core; the seconds are what docs/performance.md quotes."""
import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kernels(build):
    examples = os.path.join(build, "ci", "examples")
    return {
        "c": ["--kernel", os.path.join(examples, "libexample_attention.so")],
        "fp16_kv": ["--kernel", os.path.join(examples, "libfp16_kv_attention.so")],
        "numpy": ["--kernel-cmd",
                  "/usr/bin/python3 %s" % os.path.join(ROOT, "ci/examples/process_python/numpy_kernel.py")],
    }


def hog():
    while True:
        pass


def run(attest, name, args, budget, one_core):
    with tempfile.TemporaryDirectory() as work:
        cert = os.path.join(work, "certificate.json")
        cmd = [attest, "certify", *args, "--budget", budget, "--seed", "1", "--out", work, "--json", cert]
        if one_core:
            cmd = ["taskset", "-c", "0"] + cmd
        start = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - start
        verdict = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
        if not os.path.exists(cert):
            return "%-8s %-8s %6.1f s  exit %d  %s  (no certificate: %s)" % (
                name, budget, wall, done.returncode, verdict, done.stderr.strip().splitlines()[-1:])
        doc = json.load(open(cert))
        stages = {}
        reach = ""
        for check in doc["kernels"][0]["checks"]:
            stages[check["stage"]] = stages.get(check["stage"], 0) + check["seconds"]
            if check["stage"] == "long" and "reached_length" in check:
                reach = "long to T = %d (%d not reached)" % (check["reached_length"], len(check.get("not_reached", [])))
        per_stage = ", ".join("%s %.1f s" % (stage, seconds) for stage, seconds in stages.items())
        fields = (name, budget, wall, done.returncode, verdict, per_stage, reach)
        return "%-8s %-8s %6.1f s  exit %d  %s  [%s; %s]" % fields


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build/release"))
    parser.add_argument("--budgets", default="default,quick")
    parser.add_argument("--kernels", default="c,fp16_kv,numpy")
    parser.add_argument("--hogs", type=int, default=0, help="CPU-bound processes running beside attest")
    parser.add_argument("--one-core", action="store_true", help="attest and its kernels on core 0 (taskset)")
    options = parser.parse_args()
    attest = os.path.join(options.build, "ci", "attest")
    known = kernels(options.build)
    hogs = [multiprocessing.Process(target=hog, daemon=True) for _ in range(options.hogs)]
    for h in hogs:
        h.start()
    print("# %s; %d CPU hogs%s; load %.1f" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), options.hogs,
                                              ", taskset -c 0" if options.one_core else "", os.getloadavg()[0]))
    failed = False
    try:
        for budget in options.budgets.split(","):
            for name in options.kernels.split(","):
                line = run(attest, name, known[name], budget, options.one_core)
                failed = failed or " exit 0 " not in line
                print(line, flush=True)
    finally:
        for h in hogs:
            h.terminate()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

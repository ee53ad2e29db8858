#!/usr/bin/env python3
"""The compact report and the check selection, as a user sees them (docs/reading-a-report.md):
    report_test.py ATTEST WORKDIR CASE
  compact       the default report: a "checks:" line instead of not-covered rows, the closing
                summary, progress only for checks that ran; --verbose the full report; JSON keeps all
  failing       a failing run's "Failing checks:" list: each failure once, its case id, a replay
                command that runs as printed and fails again
  replay_as_printed  the replay command of the report, --verbose, --markdown and --html starts with
                attest as the user ran it, and runs as printed from another directory
  list_checks   --list-checks: every check once, with its stage
  check_errors  --check with an unknown name, a bad or an unmatched expression: one line, exit 2
  plan          --plan agrees with a run's certificate check by check, and follows --check
  markdown      attest report CERT --markdown FILE: the summary, a row per kernel, the failing checks
                with their replay commands; a file that is not a certificate is one line, exit 2
"""
import html
import json
import os
import re
import shlex
import subprocess
import sys

ATTEST, WORK, CASE = sys.argv[1:4]
os.makedirs(WORK, exist_ok=True)
# Cheap: the quick budget, lengths to 256, no time budget (the same checks on a busy machine).
SMALL = ["--budget", "quick", "--seed", "11", "--max-len", "256", "--long-seconds", "0"]


def run(*args, expect):
    cmd = [ATTEST, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != expect:
        sys.exit("exit %d, expected %d: %s\n%s%s" % (done.returncode, expect, " ".join(cmd), done.stdout, done.stderr))
    return done


def certify(*args, expect, json_name="cert.json"):
    path = os.path.join(WORK, json_name)
    done = run("certify", "--out", os.path.join(WORK, "out"), "--json", path, *SMALL, *args, expect=expect)
    with open(path) as f:
        return done, {c["check"]: c for c in json.load(f)["kernels"][0]["checks"]}


def need(text, *needles):
    for needle in needles:
        if needle not in text:
            sys.exit("expected %r in:\n%s" % (needle, text))


def refuse(text, *needles):
    for needle in needles:
        if needle in text:
            sys.exit("did not expect %r in:\n%s" % (needle, text))


def progress_checks(stderr):
    """The checks named by progress lines: '[   1.2s] KERNEL STAGE CHECK: verdict (...)', or in a log
    without --verbose a stage's passes: '[   1.2s] KERNEL STAGE: 2 pass: CHECK CHECK (slowest ...)'."""
    checks = []
    for m in re.finditer(r"^\[ *[0-9.]+s\] \S+ \S+(?: (\S+): | \d+ pass: ([^(]*) \()", stderr, re.M):
        checks += [m.group(1)] if m.group(1) else m.group(2).split()
    return checks


CHOSEN = "golden,grid,decode_matches_prefill,ragged_batch_equals_single,gradient_matches_reference"


def case_compact():
    # blocked declares neither decode nor backward: 2 of the 5 chosen checks run.
    done, checks = certify("--kernel", "blocked", "--check", CHOSEN, "--no-size-stages", expect=0)
    out = done.stdout
    need(out, "  checks: 2 ran, 3 not covered [2: the kernel does not declare decode] "
         "[1: the kernel does not declare backward]\n",
         "; 2 of 5 checks apply; only the checks --check chose (%s)\n" % CHOSEN, "\n1 kernel: 1 CERTIFIED (seed 11, ")
    if not out.endswith("\nCERTIFIED\n"):
        sys.exit("the last line is not CERTIFIED:\n" + out)
    refuse(out, "not covered: gradient")
    skipped = r"^  property +(decode_matches_prefill|ragged_batch_equals_single|gradient_matches_reference) "
    if re.search(skipped, out, re.M):
        sys.exit("a row for a check that did not run:\n" + out)
    if progress_checks(done.stderr) != ["golden", "grid"]:
        sys.exit("progress lines for other checks than the two that ran:\n" + done.stderr)
    if sorted(checks) != sorted(CHOSEN.split(",")) or checks["decode_matches_prefill"]["verdict"] != "not covered":
        sys.exit("the certificate does not keep every chosen check: %s" % checks)
    # --verbose: a row and a line for each check that did not run, and progress for each.
    verbose, _ = certify("--kernel", "blocked", "--check", CHOSEN, "--no-size-stages", "--verbose", expect=0)
    need(verbose.stdout, "  not covered: decode_matches_prefill (the kernel does not declare decode)",
         "  declares: causal")
    if not re.search(r"\n  property +decode_matches_prefill +0 +0 +not covered ", verbose.stdout):
        sys.exit("--verbose: no row for decode_matches_prefill:\n" + verbose.stdout)
    refuse(verbose.stdout, "  checks: ")
    if progress_checks(verbose.stderr) != CHOSEN.split(","):
        sys.exit("--verbose: not a progress line per check:\n" + verbose.stderr)


def case_failing():
    done, checks = certify("--kernel", "mutant:causal_sees_next", "--check", "grid,matches_reference",
                           "--no-size-stages", expect=1)
    out = done.stdout
    report, _, failing = out.partition("\nFailing checks:\n")
    if not failing:
        sys.exit("no 'Failing checks:' list:\n" + out)
    if re.search(r"^  FAIL ", report, re.M):  # each failure is listed once, at the end
        sys.exit("a failure listed in the kernel's report too:\n" + out)
    need(report, "1 kernel: 0 CERTIFIED, 1 NOT CERTIFIED (seed 11, ")
    need(failing, "  FAIL mutant:causal_sees_next grid: ", "  FAIL mutant:causal_sees_next matches_reference: ")
    for name in ("grid", "matches_reference"):
        case = checks[name].get("failing_case", "")
        if not re.match(r"^(B=\d+ )?(H=\d+(/\d+)? )?Tq=\d+ Tk=\d+ (D=\d+|Dk=\d+ Dv=\d+) mask=", case):
            sys.exit("%s: failing case %r is not a one-line case id" % (name, case))
        need(failing, "    case: " + case + "\n")
    need(done.stderr, " at Tq=")  # the failing check's progress line names its case
    replays = re.findall(r"^    replay: (.* replay .*)$", failing, re.M)
    if len(replays) != 2:
        sys.exit("expected a replay command per failing check:\n" + failing)
    for command in replays:
        fails_again_as_printed(command, os.getcwd(), os.environ["PATH"])


def fails_again_as_printed(command, cwd, path):
    """Runs a printed replay command through the shell, as a user pastes it: it must fail again."""
    again = subprocess.run(["sh", "-c", command], cwd=cwd, env=dict(os.environ, PATH=path), capture_output=True,
                           text=True, timeout=120)
    if again.returncode != 1:
        sys.exit("%s (in %s) exited %d, expected 1 (fails again)\n%s%s" % (command, cwd, again.returncode, again.stdout,
                                                                           again.stderr))


def printed_replays(argv0, cwd, path):
    """Certify a failing mutant with attest started as `argv0` from `cwd` under this PATH; the replay
    commands the text report, --verbose, --markdown and --html print."""
    out, cert = os.path.join(WORK, "out"), os.path.join(WORK, "printed.json")
    common = ["certify", "--out", out, *SMALL, "--kernel", "mutant:causal_sees_next", "--check", "grid",
              "--no-size-stages"]
    commands = []
    for extra in ([], ["--verbose"]):
        done = subprocess.run([argv0, *common, "--json", cert, *extra], executable=ATTEST, cwd=cwd,
                              env=dict(os.environ, PATH=path), capture_output=True, text=True, timeout=300)
        if done.returncode != 1:
            sys.exit("exit %d, expected 1:\n%s%s" % (done.returncode, done.stdout, done.stderr))
        commands += re.findall(r"^    replay: (.*)$", done.stdout, re.M)
        commands += re.findall(r"^    counterexample: \S+  \((.*)\)$", done.stdout, re.M)
    md, page = os.path.join(WORK, "printed.md"), os.path.join(WORK, "printed.html")
    subprocess.run([argv0, "report", cert, "--markdown", md, "--html", page], executable=ATTEST, cwd=cwd,
                   env=dict(os.environ, PATH=path), check=True, timeout=60)
    commands += re.findall(r"^  - replay: `(.*)`$", open(md).read(), re.M)
    commands += [html.unescape(c) for c in re.findall(r"replay: <code>([^<]*)</code>", open(page).read())]
    if len(commands) != 4:
        sys.exit("expected the replay command in the report, --verbose, --markdown and --html: %s" % commands)
    return commands


def case_replay_as_printed():
    # Each printed replay command runs as printed, in another directory, with attest not on PATH.
    bare_path = "/usr/bin:/bin"
    elsewhere, home = os.path.join(WORK, "elsewhere"), os.path.dirname(ATTEST)
    os.makedirs(elsewhere, exist_ok=True)
    program = os.path.realpath(ATTEST)
    # Started by its path: the path as given. Started as "attest" by a program (not found on PATH):
    # the executable's resolved path. Found on PATH as "attest": the name.
    local = "./" + os.path.basename(ATTEST)
    for argv0, cwd, path, first_word in ((ATTEST, WORK, bare_path, ATTEST),
                                         (local, home, bare_path, local),
                                         ("attest", WORK, bare_path, program),
                                         ("attest", WORK, home + ":" + bare_path, "attest")):
        for command in printed_replays(argv0, cwd, path):
            if shlex.split(command)[0] != first_word:
                sys.exit("started as %s in %s: printed %r, expected it to start with %s" % (argv0, cwd, command,
                                                                                            first_word))
            # A path as given is the user's shell's: it runs where they ran attest.
            fails_again_as_printed(command, cwd if first_word.startswith("./") else elsewhere, path)


def case_list_checks():
    lines = run("certify", "--list-checks", expect=0).stdout.splitlines()
    rows = [line.split() for line in lines]
    if any(len(row) != 2 for row in rows):
        sys.exit("not 'STAGE NAME' on every line:\n" + "\n".join(lines))
    names = [name for _, name in rows]
    if len(set(names)) != len(names):
        sys.exit("a check is listed twice:\n" + "\n".join(lines))
    stages = dict((name, stage) for stage, name in rows)
    for name, stage in (("golden", "deterministic"), ("sizes", "ladder"), ("eviction_sampled_steps", "long"),
                        ("matches_reference", "property"), ("gradient_overflow_safe", "property"),
                        ("fuzz_backward", "fuzz")):
        if stages.get(name) != stage:
            sys.exit("%s: stage %s, expected %s" % (name, stages.get(name), stage))


def case_check_errors():
    for items, message in (("nosuch", "unknown check 'nosuch'"), ("golden,nosuch", "unknown check 'nosuch'"),
                           ("([", "neither a check name nor a regular expression"), ("zz.*", "matches no check")):
        done = run("certify", "--kernel", "loop", "--check", items, expect=2)
        lines = done.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("attest: --check: ") or message not in lines[0]:
            sys.exit("--check %s: expected one line naming --check and %r, got:\n%s" % (items, message, done.stderr))
        if done.stdout:
            sys.exit("--check %s: something ran:\n%s" % (items, done.stdout))
    # Checks that exist but that the kernel does not have: nothing ran, and no evidence is no pass
    # (this was "CERTIFIED blocked for nothing" and exit 0).
    done, checks = certify("--kernel", "blocked", "--check", "gradient_.*", expect=1)
    need(done.stdout, "  checks: 0 ran, ", "NOT CERTIFIED blocked: no check ran: every check is not covered")
    if any(c["verdict"] != "not covered" for c in checks.values()):
        sys.exit("a gradient check ran on a kernel without a backward: %s" % checks)


def plan_of(*args):
    """--plan's lines for one kernel: {check: (outcome, why)}."""
    out = run("certify", "--plan", *SMALL, *args, expect=0).stdout
    plan = {}
    for line in out.splitlines()[1:]:
        m = re.match(r"^  \S+ +(\S+)  +(runs|not covered: |not run: )(.*)$", line)
        if m:
            plan[m.group(1)] = (m.group(2).rstrip(": "), m.group(3))
    return out, plan


def case_plan():
    # What --plan says of a decode-only kernel with an evicting cache, check by check, is what the run does.
    out, plan = plan_of("--kernel", "decode_sinks_recent")
    _, checks = certify("--kernel", "decode_sinks_recent", expect=0)
    for name, (outcome, why) in plan.items():
        got = checks.get(name)
        if outcome == "not run" and got is not None:
            sys.exit("--plan: %s does not run (%s), but the run has it: %s" % (name, why, got))
        if outcome == "runs" and (got is None or got["verdict"] == "not covered"):
            sys.exit("--plan: %s runs, but the run says %s" % (name, got))
        if outcome == "not covered" and (got is None or got.get("not_covered") != why):
            sys.exit("--plan: %s not covered (%s), but the run says %s" % (name, why, got))
    if set(checks) - set(plan):
        sys.exit("checks the plan does not list: %s" % (set(checks) - set(plan)))
    ran = sum(1 for outcome, _ in plan.values() if outcome == "runs")
    need(out, "decode_sinks_recent (decode_sinks_recent): %d of %d checks apply" % (ran, len(checks)))
    # --check: a regular expression chooses the gradient checks, and the plan says so of the others.
    _, plan = plan_of("--kernel", "tiled", "--check", "gradient_.*")
    chosen = {name for name, (outcome, _) in plan.items() if outcome != "not run"}
    if not chosen or any(not name.startswith("gradient_") for name in chosen):
        sys.exit("--check gradient_.*: chosen %s" % chosen)
    if plan["golden"] != ("not run", "--check left it out"):
        sys.exit("golden: %s" % (plan["golden"],))


def case_markdown():
    path = os.path.join(WORK, "two.json")
    run("certify", "--out", os.path.join(WORK, "out"), "--json", path, *SMALL, "--kernel", "blocked", "--kernel",
        "mutant:causal_sees_next", "--check", "golden,grid,decode_matches_prefill", "--no-size-stages", expect=1)
    markdown = os.path.join(WORK, "summary.md")
    run("report", path, "--markdown", markdown, expect=0)
    text = open(markdown).read()
    need(text, "## attest: 2 kernels: 1 CERTIFIED, 1 NOT CERTIFIED (seed 11)\n",
         "| blocked | CERTIFIED | 2 | 1 |", "| mutant:causal_sees_next | **NOT CERTIFIED** | 2 | 1 |",
         "### Failing checks", "- **mutant:causal_sees_next** `grid`: tq1_tk17", "  - case: `",
         "  - replay: `%s replay " % ATTEST, "`CERTIFIED blocked for ",
         "; only the checks --check chose (golden,grid,decode_matches_prefill)`",
         "| deterministic | grid | 251 | 251 | PASS |")
    refuse(text, "| property | decode_matches_prefill |")  # the table holds the checks that ran
    # The same document on stdout; a file that is no certificate: one line, exit 2, nothing written.
    if run("report", path, "--markdown", "-", expect=0).stdout != text:
        sys.exit("--markdown - differs from the file")
    bad = os.path.join(WORK, "bad.json")
    open(bad, "w").write('{"format": "something else"}')
    done = run("report", bad, "--markdown", os.path.join(WORK, "bad.md"), expect=2)
    if done.stderr.count("\n") != 1 or "not an attest certificate" not in done.stderr:
        sys.exit("not a one-line error:\n" + done.stderr)
    if os.path.exists(os.path.join(WORK, "bad.md")):
        sys.exit("a summary was written for a bad certificate")


{"compact": case_compact, "failing": case_failing, "replay_as_printed": case_replay_as_printed,
 "list_checks": case_list_checks, "check_errors": case_check_errors, "plan": case_plan,
 "markdown": case_markdown}[CASE]()
print("ok")

"""Certify a kernel from a test suite: `assert_certified(kernel)` fails a test unless attest certifies it.

    from attest_kernel.testing import assert_certified

    def test_my_kernel_is_certified():
        assert_certified(my_module.attention)            # a function carrying @declare(Declaration(...))
        assert_certified("./my_server --threads 4")      # or a command speaking the process protocol
        assert_certified("build/libmy_attention.so")     # or a plugin

The pytest fixture `attest_certify` does the same with the counterexamples in the test's tmp_path and
attest's report in the test's captured output; enable it with `pytest_plugins = ["attest_kernel.testing"]`
in the suite's top conftest.py, which also adds the options --attest PATH and --attest-budget BUDGET.

The attest executable: the `attest` argument, else the ATTEST environment variable, else `attest` on
PATH. attest's exit code 2 (a usage error, a kernel that cannot load, a declaration attest refuses)
raises AttestError with attest's message: never a pass, and not a failed assertion either."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import NamedTuple, Optional

try:
    import pytest
except ImportError:  # certify() and assert_certified() work without pytest
    pytest = None

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the folder holding attest_kernel/

# Options of `attest certify` that configure the size stages (the ladder and the long stage): naming one
# keeps them on at the quick budget.

__all__ = ["AttestError", "Check", "Result", "assert_certified", "attest_certify", "certify", "find_attest",
           "kernel_argument", "serve_command"]


class AttestError(RuntimeError):
    """attest could not judge the kernel: no executable, a usage or load error (exit 2), a crash."""


class Check(NamedTuple):
    """One row of the certificate."""
    name: str                      # golden, grid, or a property of the catalogue
    stage: str                     # deterministic, ladder, long, property, fuzz
    verdict: str                   # pass, fail, not covered, insufficient
    cases: int
    effective_cases: int
    explanation: str               # fail: the first failure; insufficient: why the evidence is short; else ""
    counterexample: Optional[str]  # the problem file `attest replay` re-runs, if any
    kernel: str = ""               # the kernel's own name


class Result:
    """What `attest certify` said about one kernel."""

    def __init__(self, certified, verdict, report, checks, replay, certificate, certificate_path, out_dir, command,
                 returncode, stderr):
        self.certified = certified                # bool
        self.verdict = verdict                    # "CERTIFIED name for ..." / "NOT CERTIFIED name: failed: ..."
        self.report = report                      # attest's stdout: the verdict table
        self.checks = checks                      # [Check]
        self.failures = [c for c in checks if c.verdict in ("fail", "insufficient")]
        self.replay = replay                      # {counterexample file: its replay command}
        self.replay_commands = list(replay.values())  # ["attest replay FILE --kernel-cmd CMD", ...]
        self.certificate = certificate            # the JSON certificate (ci/schema/certificate.schema.json)
        self.certificate_path = certificate_path
        self.out_dir = out_dir                    # counterexamples/, certificate.json, report.txt
        self.command = command                    # attest's argv
        self.returncode = returncode
        self.stderr = stderr                      # attest's progress lines and the kernel's stderr

    def __repr__(self):
        return "<attest_kernel.testing.Result %s>" % self.verdict

    def failure_message(self):
        """The verdict, each failing or insufficient check with its explanation, and how to replay it."""
        lines = [self.verdict]
        for c in self.failures:
            lines.append("  %s %s (%s): %s" % (c.verdict.upper(), c.name, c.stage, c.explanation or "-"))
            if c.counterexample in self.replay:
                lines.append("    " + self.replay[c.counterexample])
        lines.append("attest's report: %s" % os.path.join(self.out_dir, "report.txt"))
        return "\n".join(lines)


def find_attest(attest=None):
    """The attest executable: `attest`, else $ATTEST, else `attest` on PATH."""
    for value, where in ((attest, "the attest argument"),
                         (os.environ.get("ATTEST"), "the ATTEST environment variable")):
        if not value:
            continue
        value = os.fspath(value)
        path = os.path.abspath(value) if os.sep in value else shutil.which(value)
        if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise AttestError("%s names %r, which is not an executable file" % (where, value))
        return path  # absolute: the replay commands run from any folder
    path = shutil.which("attest")
    if path:
        return path
    raise AttestError("no attest executable: pass attest=PATH, set the ATTEST environment variable to the attest "
                      "binary (e.g. build/release/ci/attest), or put attest on PATH")


def _python_path_prefix(needed):
    """`env PYTHONPATH=... ` when a folder the kernel process imports from is not on PYTHONPATH already."""
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    have = {os.path.abspath(p) for p in current}
    missing = [d for d in dict.fromkeys(needed) if d not in have]
    if not missing:
        return ""
    return "env PYTHONPATH=%s " % shlex.quote(os.pathsep.join(missing + [os.path.abspath(p) for p in current]))


def _function_target(function):
    """(MODULE:FUNCTION as `serve` takes it, folders the kernel process must import from)."""
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if name is None or "<" in name:
        raise TypeError("%r is not a module-level function: attest runs the kernel in another process, which imports "
                        "it by name (define it at the top level of a module)" % (function,))
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    source = getattr(module, "__file__", None)
    if module is None or not source or not source.endswith(".py"):
        raise TypeError("%s is not defined in a .py file another process can import" % name)
    value = module
    for part in name.split("."):
        value = getattr(value, part, None)
    if value is not function:
        raise TypeError("%s.%s is not the function passed (is it redefined or wrapped?)" % (module.__name__, name))
    source = os.path.abspath(source)
    dotted = module.__name__
    if dotted == "__main__" or "." not in dotted:
        return "%s:%s" % (source, name), []  # serve puts the file's folder on sys.path
    # A module of a package: imported by its dotted name from the folder above the package.
    root = os.path.dirname(source)
    for _ in range(dotted.count(".") + (os.path.basename(source) == "__init__.py")):
        root = os.path.dirname(root)
    return "%s:%s" % (dotted, name), [root]


def serve_command(kernel):
    """The --kernel-cmd serving `kernel`: a function carrying a Declaration (@attest_kernel.declare), or a
    "MODULE:FUNCTION" string as `python3 -m attest_kernel serve` takes it. PYTHONPATH is set in the command
    when the package (or the function's package root) is not on it already, so the command runs by itself."""
    needed = [PACKAGE_PARENT]
    if isinstance(kernel, str):
        target = kernel
    else:
        from .declaration import Declaration
        if not isinstance(getattr(kernel, "declaration", None), Declaration):
            raise TypeError("%r carries no declaration: decorate it with @attest_kernel.declare(Declaration(...))"
                            % (kernel,))
        target, roots = _function_target(kernel)
        needed += roots
    return "%s%s -m attest_kernel serve %s" % (_python_path_prefix(needed), shlex.quote(sys.executable),
                                               shlex.quote(target))


def kernel_argument(kernel):
    """(option, value) naming `kernel` to attest: ("--kernel", PATH) for a plugin .so, ("--kernel-cmd", CMD)
    for a command string (an optional "cmd:" prefix is dropped) or a function carrying a declaration."""
    if isinstance(kernel, (str, os.PathLike)):
        text = os.fspath(kernel)
        if text.startswith("cmd:"):
            return "--kernel-cmd", text[4:]
        if text.endswith((".so", ".dylib")) and not any(c.isspace() for c in text):
            return "--kernel", os.path.abspath(text)
        if not text.strip():
            raise ValueError("an empty kernel command")
        return "--kernel-cmd", text
    if callable(kernel):
        return "--kernel-cmd", serve_command(kernel)
    raise TypeError("a kernel is a command string, a plugin .so path or a function carrying a declaration, not %r"
                    % (kernel,))


def _explanation(check):
    if check.get("verdict") == "fail":
        return check.get("first_failure", "")
    if check.get("verdict") != "insufficient":
        return ""
    why = []
    if check.get("effective_cases", 0) < check.get("floor", 0):
        skipped = "; ".join("%d x %s" % (n, reason) for reason, n in sorted(check.get("skipped", {}).items()))
        why.append("%d of %d cases exercised it (at least %d needed); the others: %s"
                   % (check["effective_cases"], check["cases"], check["floor"], skipped or "-"))
    why += ["path %s" % s for s in check.get("path_shortfall", [])]
    if check.get("reached_length", 0) < check.get("required_length", 0):
        why.append("reached T = %d, this budget level needs T >= %d"
                   % (check["reached_length"], check["required_length"]))
    for path, coverage in sorted(check.get("coverage", {}).items()):
        if coverage.get("uncovered"):
            why.append("path %s: no effective case for %s" % (path, ", ".join(coverage["uncovered"])))
    return "; ".join(why)


def _attest_message(stderr):
    lines = stderr.splitlines()
    said = [line for line in lines if line.startswith("attest: ") or line.startswith("Error:")]
    return "\n".join(said or lines[-20:]) or "(nothing on stderr)"


def certify(kernel, budget="quick", seed=1, attest=None, out_dir=None, extra_args=(), size_stages=None,
            timeout=None):
    """Run `attest certify` on one kernel and return its Result (certified or not).

    kernel: a command speaking the process protocol (what --kernel-cmd takes), a plugin .so path, or a
    function carrying a declaration (served by `python3 -m attest_kernel serve`). budget: quick, default,
    thorough or a number of cases per property. seed: attest's seed (None: from the clock). out_dir: where
    counterexamples, certificate.json and report.txt go (default: a new temporary folder, removed when
    the kernel is certified). size_stages: run the size ladder and the long stage (default: yes, as the
    command line does; False passes --no-size-stages, and the verdict line then says "no size stages"). extra_args:
    more `attest certify` options, e.g. ["--require", "causal,gqa"]. timeout: seconds for the whole run.
    Raises AttestError when attest cannot judge the kernel (exit 2: its message)."""
    executable = find_attest(attest)
    option, value = kernel_argument(kernel)
    temporary = out_dir is None
    out_dir = tempfile.mkdtemp(prefix="attest-") if temporary else os.path.abspath(os.fspath(out_dir))
    os.makedirs(out_dir, exist_ok=True)
    certificate_path = os.path.join(out_dir, "certificate.json")
    if os.path.exists(certificate_path):
        os.remove(certificate_path)  # never read an earlier run's certificate
    extra = [str(a) for a in extra_args]
    if size_stages is None:  # as the command line: on at every budget (off, the verdict line says so)
        size_stages = True
    command = [executable, "certify", option, value, "--budget", str(budget), "--out", out_dir,
               "--json", certificate_path]
    if seed is not None:
        command += ["--seed", str(seed)]
    if not size_stages and "--no-size-stages" not in extra:
        command.append("--no-size-stages")
    command += extra

    def fail(message):
        if temporary:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise AttestError(message)

    try:
        run = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("attest certify %s %r did not finish in %s s" % (option, value, timeout))
    if run.returncode not in (0, 1):
        what = "exit %d" % run.returncode if run.returncode > 0 else "signal %d" % -run.returncode
        fail("attest could not certify %s %s (%s): %s" % (option, value, what, _attest_message(run.stderr)))
    with open(os.path.join(out_dir, "report.txt"), "w") as f:
        f.write(run.stdout)
    try:
        with open(certificate_path) as f:
            certificate = json.load(f)
    except (OSError, ValueError) as e:
        fail("attest exited %d without a readable certificate (%s): %s"
             % (run.returncode, e, _attest_message(run.stderr)))

    checks = []
    for k in certificate.get("kernels", []):
        for c in k.get("checks", []):
            checks.append(Check(c["check"], c["stage"], c["verdict"], c["cases"], c["effective_cases"],
                                _explanation(c), c.get("counterexample") or None, k.get("name", "")))
    verdict_lines = [line for line in run.stdout.splitlines()
                     if re.match(r"^(shard \d+/\d+: )?(NOT )?CERTIFIED \S", line)]
    certified = run.returncode == 0 and certificate.get("certified") is True
    verdict = "\n".join(verdict_lines) or ("CERTIFIED" if certified else "NOT CERTIFIED")

    # What attest itself tells a user to run for a counterexample of an external kernel.
    shown = "attest" if shutil.which("attest") == executable else executable
    replay = {}
    for c in checks:
        if c.counterexample and c.counterexample not in replay:
            replay[c.counterexample] = "%s replay %s %s %s" % (shlex.quote(shown), shlex.quote(c.counterexample),
                                                               option, shlex.quote(value))

    result = Result(certified, verdict, run.stdout, checks, replay, certificate, certificate_path, out_dir,
                    command, run.returncode, run.stderr)
    if certified and temporary:
        shutil.rmtree(out_dir, ignore_errors=True)
    return result


def assert_certified(kernel, budget="quick", **kw):
    """certify(kernel, budget, **kw); AssertionError with the verdict, each failing check's explanation and
    its replay command unless certified (the Result is the error's .result). Returns the Result."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this frame
    result = certify(kernel, budget=budget, **kw)
    if not result.certified:
        error = AssertionError(result.failure_message())
        error.result = result
        raise error
    return result


# pytest plugin: `pytest_plugins = ["attest_kernel.testing"]` in the suite's top conftest.py.

def pytest_addoption(parser):
    group = parser.getgroup("attest", "attest_certify fixture (attest_kernel.testing)")
    group.addoption("--attest", dest="attest_executable", default=None, metavar="PATH",
                    help="the attest executable (default: $ATTEST, else attest on PATH)")
    group.addoption("--attest-budget", dest="attest_budget", default=None, metavar="BUDGET",
                    help="budget of attest_certify calls that name none (default: quick)")


if pytest is not None:
    @pytest.fixture
    def attest_certify(request, tmp_path):
        """attest_certify(kernel, budget=None, **kw): assert_certified with the counterexamples under the
        test's tmp_path and attest's report in the test's captured stdout (shown when it fails)."""
        runs = []

        def run(kernel, budget=None, **kw):
            __tracebackhide__ = True
            kw.setdefault("out_dir", str(tmp_path / ("attest-%d" % (len(runs) + 1))))
            kw.setdefault("attest", request.config.getoption("attest_executable", default=None))
            budget = budget or request.config.getoption("attest_budget", default=None) or "quick"
            try:
                result = certify(kernel, budget=budget, **kw)
            finally:
                runs.append(kernel)
            print(result.report)
            if not result.certified:
                error = AssertionError(result.failure_message())
                error.result = result
                raise error
            return result

        return run

#!/usr/bin/env python3
"""`pip install ./python` works offline into a fresh virtual environment, and what it installs is
the whole package: `python3 -m attest_kernel --version` there names the protocol and ABI of the
interface table, the installed metadata's version is the package's, and a kernel served from the
installed package (not from the checkout) is CERTIFIED by attest at the quick budget.

usage: python_pip_install_test.py SOURCE_DIR ATTEST
Exit 0: all of that holds; 1: a step failed (named, with its output); 2: bad usage.

The venv sees Debian's site packages (numpy, pip, setuptools, wheel: ci/install-deps.sh), so pip
needs no index and no build isolation. The package is copied first: setuptools builds in the
source folder, and the test must not leave build/ or *.egg-info in the checkout."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

KERNEL = "examples/causal_gqa.py:attention"  # imports attest_kernel: from the venv, nothing else
VERSION_DEF = "impl/abi/include/attest/abi/interface/version.def"


class Failed(Exception):
    pass


def run(what, command, cwd, env, timeout):
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise Failed("%s exited %d:\n%s%s" % (what, done.returncode, done.stdout, done.stderr))
    return done.stdout


def table_version(source):
    """(abi_major, abi_minor, protocol) as the interface table states them."""
    with open(os.path.join(source, VERSION_DEF)) as f:
        found = re.search(r"^ATTEST_INTERFACE_VERSION\((\d+), (\d+), (\d+)\)", f.read(), re.M)
    if not found:
        raise Failed("no ATTEST_INTERFACE_VERSION row in %s" % VERSION_DEF)
    return tuple(int(x) for x in found.groups())


def install(source, scratch, env):
    """The venv's python, with ./python installed into it from a copy."""
    package = os.path.join(scratch, "python")
    shutil.copytree(os.path.join(source, "python"), package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".pytest_cache"))
    venv = os.path.join(scratch, "venv")
    run("python3 -m venv", ["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", venv],
        scratch, env, 60)
    python = os.path.join(venv, "bin", "python")
    run("pip install", [python, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-cache-dir",
                        "--disable-pip-version-check", "-q", package], scratch, env, 120)
    return python, venv, package


def check_installed(python, venv, scratch, env, source):
    where = run("import", [python, "-c", "import attest_kernel, importlib.metadata as m; "
                           "print(attest_kernel.__file__); print(attest_kernel.__version__); "
                           "print(m.version('attest-kernel'))"], scratch, env, 60).split("\n")
    if not os.path.realpath(where[0]).startswith(os.path.realpath(venv) + os.sep):
        raise Failed("attest_kernel imported from %s, not from the venv" % where[0])
    if where[1] != where[2]:
        raise Failed("attest_kernel.__version__ is %s, the installed metadata says %s" % (where[1], where[2]))
    major, minor, protocol = table_version(source)
    said = run("--version", [python, "-m", "attest_kernel", "--version"], scratch, env, 60).strip()
    wanted = "attest_kernel %s: process protocol %d, C ABI %d.%d" % (where[1], protocol, major, minor)
    if said != wanted:
        raise Failed("--version says %r, the interface table wants %r" % (said, wanted))
    print("python_pip_install: %s (from %s)" % (said, os.path.dirname(where[0])))


def main():
    if len(sys.argv) != 3 or not os.path.isdir(os.path.join(sys.argv[1], "python")) \
            or not os.access(sys.argv[2], os.X_OK):
        print("usage: python_pip_install_test.py SOURCE_DIR ATTEST", file=sys.stderr)
        return 2
    source, attest = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env["PIP_NO_INPUT"] = "1"
    with tempfile.TemporaryDirectory() as scratch:
        try:
            python, venv, package = install(source, scratch, env)
            shutil.rmtree(os.path.join(package, "attest_kernel"))  # the kernel must find the installed copy
            check_installed(python, venv, scratch, env, source)
            command = "%s -m attest_kernel serve %s" % (python, os.path.join(package, KERNEL))
            out = run("attest certify", [attest, "certify", "--budget", "quick", "--no-size-stages", "--kernel-cmd",
                                         command, "--out", os.path.join(scratch, "out")], scratch, env, 300)
        except (Failed, subprocess.TimeoutExpired) as e:
            print("python_pip_install: FAILED: %s" % e)
            return 1
    verdict = [line for line in out.splitlines() if "CERTIFIED" in line]
    if not verdict or not verdict[0].startswith("CERTIFIED"):
        print("python_pip_install: FAILED: no CERTIFIED verdict:\n%s" % out)
        return 1
    print(verdict[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())

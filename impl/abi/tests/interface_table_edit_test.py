#!/usr/bin/env python3
"""Edits a copy of the interface table and expects every language's check to fail naming the edit.

    interface_table_edit_test.py CXX SOURCE_DIR

For each edit: the C/C++ check (interface_table_test.cpp, compiled against the copy), the
Python check (python/tests/test_interface_table.py, reading the copy) and the JavaScript check
(python/tools/interface_table_js.py --check: js/attest-kernel/interface.js against the copy) must
pass on the unedited copy and fail on the edited one, each with the edited row's name in its output."""
import os
import shutil
import subprocess
import sys
import tempfile

# (file, the row appended or replaced, the replacement or None to append, the name each check must print);
# the last edit dates a row after the table's own version (2.11, newer than any ABI minor so far).
EDITS = [
    ("capabilities.def", None, "ATTEST_CAPABILITY(paged_kv, PAGED_KV, 17, 2, 4)", ("PAGED_KV", "paged_kv")),
    ("formats.def", "ATTEST_FORMAT(q4, Q4, 6, 2, 4)", "ATTEST_FORMAT(q4, Q4, 9, 2, 4)", ("q4", "'q4'")),
    ("messages.def", "ATTEST_MESSAGE(Retained, 17, 2, 4)", "ATTEST_MESSAGE(Retained, 17, 2, 11)",
     ("Retained", "RETAINED")),
]


def cxx_check(cxx, source, table_parent):
    command = [cxx, "-std=c++20", "-fsyntax-only", "-I", table_parent, "-I", os.path.join(source, "impl/abi/include"),
               os.path.join(source, "impl/abi/tests/interface_table_test.cpp")]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def python_check(source, table):
    env = dict(os.environ, ATTEST_INTERFACE_DIR=table, PYTHONPATH=os.path.join(source, "python"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               os.path.join(source, "python/tests/test_interface_table.py")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=os.path.join(source, "python"))
    return done.returncode, done.stdout + done.stderr


def javascript_check(source, table):
    command = [sys.executable, os.path.join(source, "python/tools/interface_table_js.py"), "--table", table, "--check"]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def main():
    if len(sys.argv) != 3:
        print("usage: interface_table_edit_test.py CXX SOURCE_DIR", file=sys.stderr)
        return 2
    cxx, source = sys.argv[1], os.path.abspath(sys.argv[2])
    original = os.path.join(source, "impl/abi/include/attest/abi/interface")
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        table = os.path.join(scratch, "attest/abi/interface")  # the include names it: "attest/abi/interface/x.def"
        shutil.copytree(original, table)
        for check, run in (("C++", lambda: cxx_check(cxx, source, scratch)),
                           ("Python", lambda: python_check(source, table)),
                           ("JavaScript", lambda: javascript_check(source, table))):
            code, output = run()
            if code != 0:
                failures.append("%s check fails on the unedited copy:\n%s" % (check, output[-3000:]))
        for name, old, new, expected in EDITS:
            path = os.path.join(table, name)
            with open(os.path.join(original, name)) as f:
                text = f.read()
            if old is None:
                edited = text + new + "\n"
            else:
                if old not in text:
                    failures.append("%s has no row %s to edit" % (name, old))
                    continue
                edited = text.replace(old, new)
            with open(path, "w") as f:
                f.write(edited)
            for check, run, word in (("C++", lambda: cxx_check(cxx, source, scratch), expected[0]),
                                     ("Python", lambda: python_check(source, table), expected[1]),
                                     ("JavaScript", lambda: javascript_check(source, table), expected[1])):
                code, output = run()
                if code == 0 or word not in output:
                    failures.append("%s check after %s in %s: exit %d, %r %s in its output"
                                    % (check, new, name, code, word, "found" if word in output else "not found"))
                else:
                    print("ok: %s check fails on %s (%s)" % (check, new, name))
            with open(path, "w") as f:
                f.write(text)
    for failure in failures:
        print("FAIL: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

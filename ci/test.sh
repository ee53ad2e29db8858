#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs the whole test suite from a clean build: the GCC
# release build and its ctest, the installed package used by a GoogleTest project of its own
# (ci/package-test.sh), the same tests built with AddressSanitizer and UBSan (asan
# preset; `slow` tests and the end-to-end `verdict` tests whose code other tests run there run once,
# in the release pass), then the fuzz stage (clang 14 libFuzzer
# targets built by the OSS-Fuzz script, whose ctest check `oss_fuzz_build` the stage runs).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's start, in seconds since this script began: where CI's time goes.
stage() { echo "== ci/test.sh: $1 at ${SECONDS} s ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"; }
stage "install dependencies"
bash ci/install-deps.sh
bash ci/install-npm-deps.sh  # the pinned npm packages of ci/examples (skipped without node)
stage "release build"
cmake --preset release
cmake --build --preset release
# On a failure the log ends with the machine's facts and each failing test's last lines.
run_tests() {
  ctest --preset "$1" --parallel "$(nproc)" "${@:2}" || { python3 ci/failure-summary.py "build/$1"; return 1; }
}
stage "release tests"
run_tests release --label-exclude oss-fuzz
stage "installed package"
bash ci/package-test.sh
stage "asan build"
cmake --preset asan
cmake --build --preset asan
stage "asan tests"
run_tests asan --label-exclude "slow|verdict"
stage "fuzz stage"
bash ci/fuzz-stage.sh
stage "done"

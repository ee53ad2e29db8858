#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs the whole test suite from a clean build, each test once:
# the GCC release build with the tests labelled `slow` or `verdict` (end-to-end verdicts, timings of
# the shipped build, tests too slow under the sanitizers), the installed package used by a GoogleTest
# project of its own (ci/package-test.sh), then every other test built with AddressSanitizer and
# UBSan (asan preset: the same sources, each unit test with the sanitizers watching), then the fuzz
# stage (clang 14 libFuzzer targets built by the OSS-Fuzz script, whose ctest check `oss_fuzz_build`
# the stage runs). The two passes together are the whole suite: `ctest -N` in either build lists it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's start, in seconds since this script began: where CI's time goes.
stage() { echo "== ci/test.sh: $1 at ${SECONDS} s ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg))"; }
stage "install dependencies"
bash ci/install-deps.sh
bash ci/install-npm-deps.sh  # the pinned npm packages of ci/examples (skipped without node)
stage "release build"
cmake --preset release
cmake --build --preset release --target release_pass  # all but the unit-test binaries (cmake/release_pass.cmake)
# On a failure the log ends with the machine's facts and each failing test's last lines.
run_tests() {
  ctest --preset "$1" --parallel "$(nproc)" "${@:2}" || { python3 ci/failure-summary.py "build/$1"; return 1; }
}
stage "release tests"
run_tests release --label-regex "slow|verdict" --label-exclude oss-fuzz
stage "installed package"
bash ci/package-test.sh
stage "asan build"
cmake --preset asan
cmake --build --preset asan
# The release pass listed every slow or verdict test the full build has: a test binary the release
# build skipped by mistake would otherwise drop its tests without a word.
verdict_tests() { ctest --test-dir "build/$1" -N -L "slow|verdict" -LE oss-fuzz | grep -E '^ *Test +#' | awk '{print $3}' | sort; }
if ! diff <(verdict_tests release) <(verdict_tests asan) >&2; then
  echo "ci/test.sh: the release pass missed the slow or verdict tests above (< release, > full build):" \
    "name their binary with attest_verdict_test_binary()" >&2
  exit 1
fi
stage "asan tests"
run_tests asan --label-exclude "slow|verdict"
stage "fuzz stage"
bash ci/fuzz-stage.sh
stage "done"

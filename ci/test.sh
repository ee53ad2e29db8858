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
stage "clang-tidy (the C/C++ files the last commit changed; ci/clang-tidy.sh --all: every file)"
bash ci/clang-tidy.sh
stage "release build"
cmake --preset release
cmake --build --preset release --target release_pass  # all but the unit-test binaries (cmake/release_pass.cmake)
# On a failure the log ends with the machine's facts and each failing test's last lines.
# Each pass runs with a TMPDIR of its own that must be empty when the pass ends: a test, a kernel or
# a browser leaving temporary files behind fails the run. GoogleTest cases keep the reports they
# write (certificates, counterexamples) under ::testing::TempDir(), TEST_TMPDIR: the build tree.
# run_tests PRESET LANES [ctest options...]
run_tests() {
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/attest-ci-$1.XXXXXX")
  mkdir -p "build/$1/gtest-outputs"
  TEST_TMPDIR=$PWD/build/$1/gtest-outputs TMPDIR=$tmp ctest --preset "$1" --parallel "$2" "${@:3}" ||
    { python3 ci/failure-summary.py "build/$1"; return 1; }
  # The ASan pass is not held to it yet: in run AF2 it left two empty attest-kernel-* directories (made
  # by a test not yet found, whose kernel's attest ended without end_contained or exit()).
  if [ "$1" = release ] && [ -n "$(ls -A "$tmp")" ]; then
    echo "ci/test.sh: the $1 pass left temporary files behind: $(ls -A "$tmp" | head -20 | tr '\n' ' ')" >&2
    return 1
  fi
  rm -rf "$tmp"
}
# The release pass runs one and a half tests per core: an end-to-end test spends much of its time
# waiting (a kernel process starting, a browser, a deadline, a sleeping hostile kernel; one process
# waits while the other computes). In run AE1 its tests, two at a time on two cores, used 1,795 s of
# CPU in 3,071 s of test time: 58 % of the cores. No verdict depends on speed and every timeout is at
# least 4x a quiet run's time, so a third lane costs a CPU-bound test time, never its verdict. Run AE2
# (two CPU hogs beside it): 160 of 161 passed, the release pass in 1,428 s; the one failure was a limit
# of a test's own (python_pytest_helper's hang case, past 8x its quiet time), since widened. The ASan
# pass waits even more: in run AE1 its tests used 556 s of CPU in 1,576 s of test time (35 %), one
# sanitized process starting, another waiting on a kernel host. Both passes run 1.5 tests per core.
lanes=$(( $(nproc) * 3 / 2 ))
# A build of the next pass runs beside the tests at the lowest priority: much of a pass's time is
# spent waiting (kernel processes starting, browsers, deadlines, sleeping hostile kernels), and the
# build takes only what the tests leave. It is killed, with its compilers, if this script stops.
background=()
trap 'for g in "${background[@]}"; do kill -- "-$g" 2>/dev/null || true; done' EXIT
# setsid makes the build a session of its own, and where the kernel schedules by autogroup (one group per
# session) a session competes with the rest as an equal whatever its processes' nice: the build got half
# the CPU beside the tests. So the session's group gets nice 19 too, set from inside it.
in_background() {  # LOG COMMAND...: runs COMMAND in a process group of its own, niced
  setsid sh -c 'echo 19 > /proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' in_background "${@:2}" > "$1" 2>&1 &
  background+=("$!")
}
finish_background() {  # LOG: waits for the build started last; prints its log if it failed
  local status=0 group=${background[-1]}
  # The tests are over: the build gets normal priority back, or on a busy machine it would starve.
  echo 0 > "/proc/$group/autogroup" 2>/dev/null || true
  renice -n 0 -g "$group" > /dev/null 2>&1 || true
  wait "$group" || status=$?
  unset 'background[-1]'
  [ "$status" -eq 0 ] || { tail -50 "$1" >&2; echo "ci/test.sh: $1 failed (exit $status)" >&2; exit 1; }
}
stage "release tests"
cmake --preset asan
in_background build/asan-build.log cmake --build --preset asan
run_tests release "$lanes" --label-regex "slow|verdict" --label-exclude oss-fuzz
stage "installed package"
bash ci/package-test.sh
stage "asan build (started beside the release tests)"
finish_background build/asan-build.log
# The release pass listed every slow or verdict test the full build has: a test binary the release
# build skipped by mistake would otherwise drop its tests without a word.
verdict_tests() { ctest --test-dir "build/$1" -N -L "slow|verdict" -LE oss-fuzz | grep -E '^ *Test +#' | awk '{print $3}' | sort; }
if ! diff <(verdict_tests release) <(verdict_tests asan) >&2; then
  echo "ci/test.sh: the release pass missed the slow or verdict tests above (< release, > full build):" \
    "name their binary with attest_verdict_test_binary()" >&2
  exit 1
fi
stage "asan tests"
# The fuzz stage's clang build (OSS-Fuzz's script) likewise runs beside the sanitizer tests.
in_background build/oss-fuzz-build.log env ATTEST_OSS_FUZZ_OPT=-O2 bash fuzz/tests/oss_fuzz_build_test.sh build/oss-fuzz
run_tests asan "$lanes" --label-exclude "slow|verdict"
stage "fuzz stage (its build started beside the sanitizer tests)"
finish_background build/oss-fuzz-build.log
ATTEST_FUZZ_PREBUILT=1 bash ci/fuzz-stage.sh
stage "done"

#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs the whole test suite from a clean build: the GCC
# release build and its ctest, the same tests built with AddressSanitizer and UBSan (asan
# preset; `slow` tests run once, in the release pass), then the fuzz stage (clang 14 libFuzzer
# targets built by the OSS-Fuzz script, whose ctest check `oss_fuzz_build` the stage runs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
cmake --preset release
cmake --build --preset release
# On a failure the log ends with the machine's facts and each failing test's last lines.
run_tests() {
  ctest --preset "$1" "${@:2}" || { python3 ci/failure-summary.py "build/$1"; return 1; }
}
run_tests release --label-exclude oss-fuzz
cmake --preset asan
cmake --build --preset asan
run_tests asan --label-exclude slow
bash ci/fuzz-stage.sh

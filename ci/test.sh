#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs the whole test suite from a clean build: the GCC
# release build and its ctest, the same tests built with AddressSanitizer and UBSan (asan
# preset; the `slow` OSS-Fuzz build test runs once, in the release pass), then the fuzz stage
# (clang 14 libFuzzer targets).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
cmake --preset release
cmake --build --preset release
ctest --preset release
cmake --preset asan
cmake --build --preset asan
ctest --preset asan --label-exclude slow
bash ci/fuzz-stage.sh

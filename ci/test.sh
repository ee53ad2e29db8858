#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and runs the whole test suite from a clean build:
# the GCC release build and ctest, then the fuzz stage (clang 14 libFuzzer targets).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
cmake --preset release
cmake --build --preset release
ctest --preset release
bash ci/fuzz-stage.sh

#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds attest and certifies the built-in kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target attest
./build/release/ci/attest certify "$@"

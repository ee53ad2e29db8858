#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds attest and certifies the built-in kernels.
# Certifying needs no PyTorch, so the minimal install leaves it out (ci/test.sh installs everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh --minimal
cmake --preset release >/dev/null
cmake --build --preset release --target attest
./build/release/ci/attest certify "$@"

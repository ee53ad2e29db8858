#!/usr/bin/env bash
# Installs the npm packages the JavaScript examples pin (ci/examples/*/package-lock.json), with
# `npm ci` from the committed lock files only: nothing outside them is fetched, and no package's
# install script runs (onnxruntime-node's only fetches GPU providers; the CPU library ships in the
# package; node-llama-cpp's postinstall would download or build llama.cpp, and ci/examples/ggml
# uses only its prebuilt libraries and source bundle). Without node and npm it says so and
# succeeds: everything else builds and runs without.
#   ci/install-npm-deps.sh            every ci/examples/*/ with a package-lock.json
#   ci/install-npm-deps.sh DIR...     those folders only
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-npm-deps: node or npm not found; the JavaScript examples' tests will be skipped"
  exit 0
fi
if [ "$#" -eq 0 ]; then
  set -- $(find ci/examples -mindepth 2 -maxdepth 2 -name package-lock.json -printf '%h\n' | sort)
fi
for dir in "$@"; do
  if [ ! -f "$dir/package-lock.json" ]; then
    echo "install-npm-deps: $dir has no package-lock.json" >&2
    exit 2
  fi
  started=$SECONDS
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "install-npm-deps: $dir installed in $((SECONDS - started)) s"
done

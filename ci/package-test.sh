#!/usr/bin/env bash
# attest as a kernel engineer's CMake project uses it: `cmake --install` the release build, then
# configure, build and run ci/examples/gtest_consumer (a separate project: find_package(attest
# CONFIG), a certified kernel and an off-by-one one asserted NOT CERTIFIED, a plugin served by the
# installed bin/attest). Needs build/release built.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
prefix=$root/build/package
consumer=$PWD/build/gtest-consumer
rm -rf "$prefix" "$consumer"
cmake --install build/release --prefix "$prefix" >/dev/null
cmake -S ci/examples/gtest_consumer -B "$consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$consumer"
cd "$consumer"
ATTEST_EXAMPLE_PLUGIN=$root/build/release/ci/examples/libexample_attention.so ./attention_test

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
# Every test must run to its end: a suite cut short by an exit(0) (a kernel's, in the test process)
# would otherwise pass.
tests=$(./attention_test --gtest_list_tests | grep -c '^  ')
ATTEST_EXAMPLE_PLUGIN=$root/build/release/ci/examples/libexample_attention.so ./attention_test | tee attention_test.log
grep -q "^\[  PASSED  \] $tests tests\.$" attention_test.log ||
  { echo "package-test: the consumer's suite did not run all $tests tests to their end" >&2; exit 1; }

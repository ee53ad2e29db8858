#!/bin/bash -eu
# OSS-Fuzz / ClusterFuzzLite build of the attest fuzz targets. Follows their conventions:
# compiler and flags from $CC, $CXX, $CFLAGS, $CXXFLAGS; the engine from $LIB_FUZZING_ENGINE;
# targets, <target>_seed_corpus.zip and <target>.options into $OUT. Builds only the libraries
# and the fuzz targets (ATTEST_BUILD_TOOLS=OFF): no tests, no command line.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${WORK:-$(mktemp -d)}/attest-oss-fuzz-build"
# Every target: the kernel fuzzers (fuzz/targets/) and attest's own readers (fuzz/harness/,
# ci/certify/fuzz_baseline.cpp).
targets=$(cd "$root" && ls fuzz/targets/fuzz_*.cpp fuzz/harness/fuzz_*.cpp ci/certify/fuzz_*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')

cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="${CFLAGS:-}" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DATTEST_BUILD_TOOLS=OFF -DATTEST_FUZZ=ON -DATTEST_FUZZ_ENGINE="$LIB_FUZZING_ENGINE"
cmake --build "$build" --target fuzz_all -j"$(nproc)"

for target in $targets; do
  cp "$build/fuzz/$target" "$OUT/"
  # Seeds and fixed regressions together; zip -j flattens, -q quiet, empty folders are skipped.
  files=$(find "$root/corpus/$target" "$root/corpus/regressions/$target" -type f 2>/dev/null || true)
  if [ -n "$files" ]; then
    rm -f "$OUT/${target}_seed_corpus.zip"
    # shellcheck disable=SC2086
    zip -q -j "$OUT/${target}_seed_corpus.zip" $files
  fi
  [ -f "$root/fuzz/$target.options" ] && cp "$root/fuzz/$target.options" "$OUT/"
done
echo "attest fuzz targets in $OUT: $targets"

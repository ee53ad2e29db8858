#!/usr/bin/env bash
# Runs ci/oss-fuzz/build.sh as OSS-Fuzz would, with clang 14's libFuzzer, and checks that
# every target and its seed corpus land in $OUT and that a target runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CC=clang-14 CXX=clang++-14
export CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=address -fsanitize=fuzzer-no-link"
export CXXFLAGS="$CFLAGS"
export LIB_FUZZING_ENGINE="-fsanitize=fuzzer" OUT="$tmp/out" WORK="$tmp/work"
mkdir -p "$OUT" "$WORK"
bash "$root/ci/oss-fuzz/build.sh"
for target in fuzz_mask_leak fuzz_overflow fuzz_decode fuzz_differential; do
  test -x "$OUT/$target" || { echo "missing $OUT/$target"; exit 1; }
  test -s "$OUT/${target}_seed_corpus.zip" || { echo "missing ${target}_seed_corpus.zip"; exit 1; }
  test -f "$OUT/$target.options" || { echo "missing $target.options"; exit 1; }
  unzip -l "$OUT/${target}_seed_corpus.zip" | tail -1
done
# The built target runs its seeds.
mkdir "$tmp/seeds" && (cd "$tmp/seeds" && unzip -q "$OUT/fuzz_differential_seed_corpus.zip")
"$OUT/fuzz_differential" -runs=0 "$tmp/seeds"
echo "oss-fuzz build: ok"

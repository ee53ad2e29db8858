#!/usr/bin/env bash
# Runs ci/oss-fuzz/build.sh as OSS-Fuzz would, with clang 14's libFuzzer (ASan and UBSan), and
# checks that every target and its seed corpus land in $OUT and that a target runs.
# usage: oss_fuzz_build_test.sh [DIR]   DIR keeps the build (DIR/work/attest-oss-fuzz-build, the
# fuzz stage's targets) and DIR/out; without it everything goes to a temporary folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ $# -ge 1 ]; then
  mkdir -p "$1"
  tmp=$(cd "$1" && pwd)
  rm -rf "$tmp/out" "$tmp/seeds"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi
export CC=clang-14 CXX=clang++-14
# OSS-Fuzz builds at -O1; CI's fuzz stage asks for -O2 (ATTEST_OSS_FUZZ_OPT), twice the executions.
export CFLAGS="${ATTEST_OSS_FUZZ_OPT:--O1} -fno-omit-frame-pointer -gline-tables-only -fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link"
export CXXFLAGS="$CFLAGS"
export LIB_FUZZING_ENGINE="-fsanitize=fuzzer" OUT="$tmp/out" WORK="$tmp/work"
mkdir -p "$OUT" "$WORK"
bash "$root/ci/oss-fuzz/build.sh"
targets=$(cd "$root" && ls fuzz/targets/fuzz_*.cpp fuzz/harness/fuzz_*.cpp ci/certify/fuzz_*.cpp | xargs -n1 basename | sed 's/\.cpp$//')
for target in $targets; do
  test -x "$OUT/$target" || { echo "missing $OUT/$target"; exit 1; }
  test -s "$OUT/${target}_seed_corpus.zip" || { echo "missing ${target}_seed_corpus.zip"; exit 1; }
  unzip -l "$OUT/${target}_seed_corpus.zip" | tail -1
done
for target in $(cd "$root/fuzz" && ls targets/fuzz_*.cpp | xargs -n1 basename | sed 's/\.cpp$//'); do
  test -f "$OUT/$target.options" || { echo "missing $target.options"; exit 1; }
done
# The kernels' vector code runs on any x86-64: outside a runtime-dispatched clone (GCC's
# target_clones), attest::kernels::simd holds no AVX register (clang 14 once compiled it all as
# AVX-512 with no dispatch, and the fuzz stage died of SIGILL on a machine without it).
if objdump -d --no-show-raw-insn "$OUT/fuzz_differential" |
  awk '/^[0-9a-f]+ <_ZN6attest7kernels4simd[^.>]*>:$/ {name = $2; next} /^[0-9a-f]+ </ {name = ""}
       name != "" && /%[yz]mm/ {print name; found = 1} END {exit !found}' | sort -u | grep .; then
  echo "fuzz_differential: the functions above use AVX registers with no runtime dispatch"
  exit 1
fi
# The built target runs its seeds.
mkdir "$tmp/seeds" && (cd "$tmp/seeds" && unzip -q "$OUT/fuzz_differential_seed_corpus.zip")
"$OUT/fuzz_differential" -runs=0 "$tmp/seeds"
echo "oss-fuzz build: ok"

#!/usr/bin/env bash
# Fuzz throughput, exec/s per target and kernel: the fuzz-fast preset (libFuzzer, no sanitizers;
# for long runs) and, for comparison, the fuzz preset CI uses (ASan + UBSan). Each cell is one
# `attest fuzz` run of ATTEST_FUZZ_SECONDS (default 30) from the repository's seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${ATTEST_FUZZ_SECONDS:-30}
attest=build/release/ci/attest
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for preset in fuzz-fast fuzz; do
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" --target fuzz_all >/dev/null
done

echo "exec/s, ${seconds} s per cell, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
printf "%-18s %-8s %12s %12s\n" target kernel fuzz-fast "fuzz (ASan)"
for target in fuzz_mask_leak fuzz_overflow fuzz_differential fuzz_decode fuzz_backward; do
  kernels=(loop blocked tiled decode all)
  [ "$target" = fuzz_decode ] && kernels=(decode)
  [ "$target" = fuzz_backward ] && kernels=(loop tiled)
  for kernel in "${kernels[@]}"; do
    row=()
    for preset in fuzz-fast fuzz; do
      flag=(--kernel "$kernel")
      [ "$kernel" = all ] && flag=()
      report=$("$attest" fuzz --target "$target" --seconds "$seconds" "${flag[@]}" --fuzz-build "build/$preset" \
                 --out "$out/$preset-$target-$kernel" 2>/dev/null) || true
      speed=$(sed -n 's/.* \([0-9?]*\) exec\/s$/\1/p' <<<"$report")
      grep -q '^FAIL' <<<"$report" && speed="$speed FAILED"  # a finding: rerun with attest fuzz to see it
      row+=("$speed")
    done
    printf "%-18s %-8s %12s %12s\n" "$target" "$kernel" "${row[0]}" "${row[1]}"
  done
done

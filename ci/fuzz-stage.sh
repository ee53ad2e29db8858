#!/usr/bin/env bash
# CI's fuzz stage: build the fuzz preset's targets (clang 14, libFuzzer, ASan+UBSan), then per
# target: replay its seeds and regressions, fuzz every built-in kernel for ATTEST_FUZZ_SECONDS
# (default 60; any finding fails the stage, counted or not), and show that a small mutant is
# found and its saved input replays.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${ATTEST_FUZZ_SECONDS:-60}
attest=build/release/ci/attest
out=build/fuzz-stage
rm -rf "$out"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_all

declare -A mutant=([fuzz_mask_leak]=masked_value_times_zero [fuzz_overflow]=no_max_subtraction
                   [fuzz_decode]=decode_skips_self [fuzz_differential]=drop_partial_tile)
for target in fuzz_mask_leak fuzz_overflow fuzz_decode fuzz_differential; do
  echo "== $target: replay corpus"
  inputs=("corpus/$target")
  [ -d "corpus/regressions/$target" ] && inputs+=("corpus/regressions/$target")
  "build/fuzz/fuzz/$target" -runs=0 "${inputs[@]}" 2>&1 | tail -1

  echo "== $target: ${seconds} s on every built-in kernel"
  "$attest" fuzz --target "$target" --seconds "$seconds" --fuzz-build build/fuzz --out "$out/clean"

  echo "== $target: must find mutant:${mutant[$target]}"
  status=0
  "$attest" fuzz --target "$target" --seconds 60 --kernel "mutant:${mutant[$target]}" --fuzz-build build/fuzz \
    --out "$out/mutant" || status=$?
  # Exit 1: a finding that `attest replay --kernel mutant:...` failed again in a fresh process.
  [ "$status" -eq 1 ] || { echo "$target did not find mutant:${mutant[$target]} (exit $status)"; exit 1; }
  crash=$(ls "$out/mutant/fuzz/$target/artifacts/"crash-* | head -1)
  # The raw input fails in the GCC replay driver too, and the problem file with its recorded kernel.
  if ATTEST_FUZZ_KERNEL="mutant:${mutant[$target]}" "build/release/fuzz/${target}_replay" "$crash" 2>/dev/null; then
    echo "$crash did not fail again in the replay driver"; exit 1
  fi
  status=0
  "$attest" replay "$out/mutant/fuzz/$target/$(basename "$crash").json" || status=$?
  [ "$status" -eq 1 ] || { echo "replay of the saved problem exited $status, expected 1"; exit 1; }
done
echo "fuzz stage: ok"

#!/usr/bin/env bash
# CI's fuzz stage: build the fuzz preset's targets (clang 14, libFuzzer, ASan+UBSan), then
#  - per kernel fuzz target (`attest fuzz --list`, the table of fuzz/src/fuzz_targets.cpp):
#    replay its seeds and regressions, fuzz every built-in kernel for ATTEST_FUZZ_SECONDS
#    (default 60; any finding fails the stage, counted or not), and show that its mutant is found
#    and the saved input replays;
#  - per harness fuzz target (fuzz/harness/: attest's own readers of files and protocol frames):
#    replay its seeds and fuzz it for ATTEST_HARNESS_FUZZ_SECONDS (default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${ATTEST_FUZZ_SECONDS:-60}
harness_seconds=${ATTEST_HARNESS_FUZZ_SECONDS:-30}
attest=build/release/ci/attest
out=build/fuzz-stage
rm -rf "$out"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_all

while read -r target mutant; do
  echo "== $target: replay corpus"
  inputs=("corpus/$target")
  [ -d "corpus/regressions/$target" ] && inputs+=("corpus/regressions/$target")
  "build/fuzz/fuzz/$target" -runs=0 "${inputs[@]}" 2>&1 | tail -1

  echo "== $target: ${seconds} s on every built-in kernel"
  "$attest" fuzz --target "$target" --seconds "$seconds" --fuzz-build build/fuzz --out "$out/clean"

  echo "== $target: must find mutant:$mutant"
  status=0
  "$attest" fuzz --target "$target" --seconds 60 --kernel "mutant:$mutant" --fuzz-build build/fuzz \
    --out "$out/mutant" || status=$?
  # Exit 1: a finding that `attest replay --kernel mutant:...` failed again in a fresh process.
  [ "$status" -eq 1 ] || { echo "$target did not find mutant:$mutant (exit $status)"; exit 1; }
  crash=$(ls "$out/mutant/fuzz/$target/artifacts/"crash-* | head -1)
  # The raw input fails in the GCC replay driver too, and the problem file with its recorded kernel.
  if ATTEST_FUZZ_KERNEL="mutant:$mutant" "build/release/fuzz/${target}_replay" "$crash" 2>/dev/null; then
    echo "$crash did not fail again in the replay driver"; exit 1
  fi
  status=0
  "$attest" replay "$out/mutant/fuzz/$target/$(basename "$crash").json" || status=$?
  [ "$status" -eq 1 ] || { echo "replay of the saved problem exited $status, expected 1"; exit 1; }
done < <("$attest" fuzz --list)

for source in fuzz/harness/fuzz_*.cpp; do
  target=$(basename "$source" .cpp)
  echo "== $target: replay seeds, then ${harness_seconds} s"
  mkdir -p "$out/harness/$target"
  "build/fuzz/fuzz/$target" -runs=0 "corpus/$target" 2>&1 | tail -1
  "build/fuzz/fuzz/$target" -max_total_time="$harness_seconds" -print_final_stats=1 \
    -artifact_prefix="$out/harness/$target/" "$out/harness/$target" "corpus/$target" 2>&1 | grep -E "^stat::(number_of_executed_units|average_exec_per_sec)|ERROR|SUMMARY" || true
  if ls "$out/harness/$target/"crash-* "$out/harness/$target/"leak-* "$out/harness/$target/"timeout-* >/dev/null 2>&1; then
    echo "$target found an input that breaks attest's reader: $(ls "$out/harness/$target/"{crash,leak,timeout}-* 2>/dev/null)"
    exit 1
  fi
done
echo "fuzz stage: ok"

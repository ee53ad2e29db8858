#!/usr/bin/env bash
# CI's fuzz stage: build the targets with ci/oss-fuzz/build.sh (clang 14, libFuzzer, ASan+UBSan;
# fuzz/tests/oss_fuzz_build_test.sh checks what OSS-Fuzz needs), then
#  - per kernel fuzz target (`attest fuzz --list`, the table of fuzz/src/fuzz_targets.cpp):
#    replay its seeds and regressions, fuzz every built-in kernel for ATTEST_FUZZ_SECONDS
#    (default 20; any finding fails the stage, counted or not), and show that its mutant is found
#    and the saved input replays;
#  - per harness fuzz target (fuzz/harness/: attest's own readers of files and protocol frames):
#    replay its seeds and fuzz it for ATTEST_HARNESS_FUZZ_SECONDS (default 10).
# The defaults are CI's time budget (the whole .ci/run within 30 min on 2 cores; cut from
# 30 and 20 when a fifth kernel target and the Python and PyTorch tests were added); the
# mutant each kernel target must find keeps its 60 s.
# libFuzzer runs on one core, so targets run two at a time (ATTEST_FUZZ_LANES); each one's log is
# printed whole when it ends. Every run is bounded by its time, not by its speed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${ATTEST_FUZZ_SECONDS:-12}
harness_seconds=${ATTEST_HARNESS_FUZZ_SECONDS:-6}
lanes=${ATTEST_FUZZ_LANES:-2}
attest=build/release/ci/attest
out=build/fuzz-stage
oss=build/oss-fuzz
fuzz_build=$oss/work/attest-oss-fuzz-build
rm -rf "$out"
mkdir -p "$out/logs"

# ci/test.sh builds the targets beside the sanitizer tests (ATTEST_FUZZ_PREBUILT=1); run alone, the
# stage builds them itself.
if [ "${ATTEST_FUZZ_PREBUILT:-0}" != 1 ]; then
  ATTEST_OSS_FUZZ_OPT=-O2 bash fuzz/tests/oss_fuzz_build_test.sh "$oss"
fi

kernel_target() {
  local target=$1 mutant=$2 status crash
  echo "== $target: replay corpus"
  local inputs=("corpus/$target")
  [ -d "corpus/regressions/$target" ] && inputs+=("corpus/regressions/$target")
  "$fuzz_build/fuzz/$target" -runs=0 "${inputs[@]}" 2>&1 | tail -1

  echo "== $target: ${seconds} s on every built-in kernel"
  "$attest" fuzz --target "$target" --seconds "$seconds" --fuzz-build "$fuzz_build" --out "$out/clean"

  echo "== $target: must find mutant:$mutant"
  status=0
  "$attest" fuzz --target "$target" --seconds 60 --kernel "mutant:$mutant" --fuzz-build "$fuzz_build" \
    --out "$out/mutant" || status=$?
  # Exit 1: a finding that `attest replay --kernel mutant:...` failed again in a fresh process.
  [ "$status" -eq 1 ] || { echo "$target did not find mutant:$mutant (exit $status)"; return 1; }
  crash=$(ls "$out/mutant/fuzz/$target/artifacts/"crash-* | head -1)
  # The raw input fails in the GCC replay driver too, and the problem file with its recorded kernel.
  if ATTEST_FUZZ_KERNEL="mutant:$mutant" "build/release/fuzz/${target}_replay" "$crash" 2>/dev/null; then
    echo "$crash did not fail again in the replay driver"; return 1
  fi
  status=0
  "$attest" replay "$out/mutant/fuzz/$target/$(basename "$crash").json" || status=$?
  [ "$status" -eq 1 ] || { echo "replay of the saved problem exited $status, expected 1"; return 1; }
}

harness_target() {
  local target=$1 dir="$out/harness/$1"
  echo "== $target: replay seeds, then ${harness_seconds} s"
  mkdir -p "$dir"
  "$fuzz_build/fuzz/$target" -runs=0 "corpus/$target" 2>&1 | tail -1
  "$fuzz_build/fuzz/$target" -max_total_time="$harness_seconds" -print_final_stats=1 \
    -artifact_prefix="$dir/" "$dir" "corpus/$target" 2>&1 | grep -E "^stat::(number_of_executed_units|average_exec_per_sec)|ERROR|SUMMARY" || true
  if ls "$dir/"crash-* "$dir/"leak-* "$dir/"timeout-* >/dev/null 2>&1; then
    echo "$target found an input that breaks attest's reader: $(ls "$dir/"{crash,leak,timeout}-* 2>/dev/null)"
    return 1
  fi
}

# Jobs as "function target [mutant]", run `lanes` at a time; the stage fails if any job failed.
jobs_list=()
while read -r target mutant; do jobs_list+=("kernel_target $target $mutant"); done < <("$attest" fuzz --list)
for source in fuzz/harness/fuzz_*.cpp ci/certify/fuzz_*.cpp; do jobs_list+=("harness_target $(basename "$source" .cpp)"); done

failed=0
declare -A running=()  # pid -> log
finish_one() {  # waits for whichever job ends first, prints its log
  local status=0 pid
  wait -n -p pid || status=$?
  cat "${running[$pid]}"
  [ "$status" -eq 0 ] || { echo "FAILED: $(head -1 "${running[$pid]}")"; failed=1; }
  unset "running[$pid]"
}
for i in "${!jobs_list[@]}"; do
  [ "${#running[@]}" -lt "$lanes" ] || finish_one
  log="$out/logs/$i.log"
  (set -e; ${jobs_list[$i]}) > "$log" 2>&1 &
  running[$!]=$log
done
while [ "${#running[@]}" -gt 0 ]; do finish_one; done
[ "$failed" -eq 0 ] || { echo "fuzz stage: FAILED"; exit 1; }
echo "fuzz stage: ok"
